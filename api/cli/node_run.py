"""``flowloom run FILE --node ID --input REFERENCE=VALUE ...``: one node run on its own.

What the node reads is keyed by reference, as the compiler sees it: ``start.query``,
``shout.output``, ``inputs.city``, ``sys.query``, ``vars.count``, ``iter.item`` (a node in
an iteration's body). A bare name is taken as ``inputs.NAME`` (or ``start.NAME``) when
the node reads that. Each value is converted by the type the reference declares
(``number``, ``boolean``, ``object``/``array`` as JSON, ``string`` as is; a reference of
no declared type is JSON when it parses, else text). What is not given comes from the
node's last run of this workflow in the run store; a reference still without a value is
refused by name (exit 2) before anything runs. The run is stored as kind
``single_node`` (``flowloom runs``, ``flowloom show``); output and exit codes are those
of ``flowloom run``, and the outputs printed are the node's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.text import Text

from .common import JsonView, View, abort, err, node_titles, terminal_view

__all__ = ["run_one_node"]


def _convert(ref: Any, text: str) -> Any:
    """``text`` as the value of ``ref`` (a ReadRef): by its declared type (module docstring).
    Raises ValueError naming the reference."""
    from engine.runner import coerce_input
    from schemas.types import VarType
    from schemas.workflow import InputVar

    if ref.type is None or ref.type is VarType.any:
        try:
            return json.loads(text)
        except ValueError:
            return text
    try:
        return coerce_input(InputVar(name="value", type=ref.type), text)
    except ValueError as exc:
        raise ValueError(
            f"--input {ref.key}: {str(exc).removeprefix(chr(39) + 'value' + chr(39) + ': ')}"
        ) from None


def _gather(refs: list[Any], pairs: list[str], inputs_file: Path | None) -> dict[str, Any]:
    """Values by reference key from ``--inputs-file`` (a JSON object, typed) then ``--input``."""
    from .running import _read_inputs_file

    values = _read_inputs_file(inputs_file) if inputs_file is not None else {}
    by_key = {ref.key: ref for ref in refs}
    errors: list[str] = []
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            errors.append(f"--input {pair!r}: expected REFERENCE=VALUE (e.g. start.query=hello)")
            continue
        if key not in by_key and "." not in key:
            key = next((k for k in (f"inputs.{key}", f"start.{key}") if k in by_key), key)
        ref = by_key.get(key)
        if ref is None:
            errors.append(
                f"--input {key}: the node does not read it (it reads: {', '.join(by_key) or 'nothing'})"
            )
            continue
        try:
            values[key] = _convert(ref, text)
        except ValueError as exc:
            errors.append(str(exc))
    if errors:
        abort("invalid input value(s):", errors)
    return values


def run_one_node(
    doc: dict[str, Any],
    plan: Any,
    node_id: str,
    pairs: list[str],
    inputs_file: Path | None,
    as_json: bool,
    no_input: bool,
) -> int:
    """Run ``node_id`` of ``doc`` alone (module docstring); returns the exit code."""
    from engine.single_node import MissingNodeInputs, NodeRunRefused, read_references
    from schemas.launch import RunNode

    from .running import _drive, inline, report_end, with_service

    try:
        refs = read_references(plan, node_id)
    except NodeRunRefused as exc:
        abort("cannot run the node:", [str(exc)])
    values = _gather(refs, pairs, inputs_file)
    titles = node_titles(doc)

    async def body(service: Any) -> int:
        try:
            ticket = await service.launch("default", RunNode(doc, node_id, values, from_last=True), inline())
        except MissingNodeInputs as exc:
            abort(
                "missing input value(s):", [f"{key}: give it with --input {key}=VALUE" for key in exc.missing]
            )
        err().print(
            Text.assemble(
                ("node", "bold"), f" {titles.get(node_id) or node_id!r} alone as run {ticket.run_id}"
            )
        )
        view: View = JsonView() if as_json else terminal_view(titles)
        summary = await _drive(service, ticket, view, not no_input)
        view.close()
        return report_end(summary, no_input, titles)

    return with_service(body)
