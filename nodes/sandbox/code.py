"""code: runs user Python / JavaScript in a sandboxed child process (:mod:`nodes.sandbox.process`).

Config: :class:`~schemas.nodes_code.CodeConfig`. The bound ``inputs`` go to
``main(**inputs)`` (Python) or ``main(inputs)`` (JavaScript, one object); the object
``main`` returns must hold every declared output with a value of its declared type -
unless ``semantics`` is ``fastgpt`` (imported FastGPT nodes: inputs converted to their
``input_types``, outputs unchecked and null when missing, FastGPT's JavaScript globals;
:mod:`nodes.sandbox.compat`).
With ``tool`` set, the node runs that builtin tool (:mod:`nodes.agent.builtin_tools`) on its
inputs in the engine process instead: outputs ``text``, ``json``, ``files``, ``result``; bad
arguments fail it [``tool_error``].
Numbers stay numbers (JSON in and out). Python code gets the standard library
(``python -I -S``); JavaScript code runs as a script in Node with ``require`` for
Node's built-in modules; both also get the packages the operator installed with
``flowloom sandbox install`` (:mod:`engine.code_packages`, mounted read-only). What the
code prints is recorded, never part of the result.

The code never runs in the engine process: the sandbox is bubblewrap by default
and a node is refused, not run unprotected, when it does not work - unless the
operator opted in (``Settings.allow_unsandboxed_code``); see
:func:`nodes.sandbox.process.choose_mode`.

Record (``node_run.data``): ``language``, ``sandbox`` (``bwrap`` / ``none``),
``sandbox_warning`` (why it ran without the sandbox), ``pid`` (the child process:
bwrap's pid in the sandbox, set once it starts), ``exit_code``, ``elapsed_ms``,
``stdout`` / ``stderr`` (the first 64 KiB each; ``logs_truncated``),
``ignored_outputs`` (returned keys not declared), and ``error``
(``{kind, type, message, traceback}``) when the code failed.

Errors (all :class:`~engine.errors.NodeFailed`, ``reason`` in brackets):
no usable sandbox and no opt-in, or no interpreter [``sandbox_unavailable``]; the code
imports a package that is not installed, named with the command that installs it,
before anything starts [``missing_package``];
syntax error, with the line [``code_syntax_error``]; exception while defining or
running ``main``, with the user's traceback only [``code_error``]; a missing or
mistyped output, a return value that is not an object or not JSON, an unreadable
result [``code_output``];
wall time [``code_timeout``]; returned JSON or printed output over
``max_output_bytes`` [``output_too_large``]; killed without a result - memory, CPU
time, crash [``code_killed``]. A Python ``MemoryError`` is a ``code_error`` whose
message names the memory limit.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from engine.catalog import NodeExecutor
from engine.code_packages import missing_message, package_env, package_needs
from engine.context import NodeContext, NodeResult
from engine.errors import NodeFailed
from engine.telemetry import telemetry
from schemas.node_records import NodeData
from schemas.nodes_code import CodeConfig
from schemas.types import type_of_value, value_matches

from .compat import FASTGPT_JS_PRELUDE, fastgpt_inputs
from .process import Limits, Mode, Outcome, SandboxUnavailable, choose_mode, run_code

__all__ = ["CodeNode"]

_LANG = {"python": "Python", "javascript": "JavaScript"}


class CodeNode(NodeExecutor[CodeConfig], kind="code"):
    """Binds ``inputs``, runs ``main`` in the sandbox, returns the declared outputs."""

    def _language(self) -> Literal["python", "javascript"]:
        language = self.config.language
        assert language is not None  # the config requires a language with code (a tool has none)
        return language

    def _fail(self, ctx: NodeContext, message: str, reason: str) -> NodeFailed:
        return NodeFailed(message, node_id=ctx.node_id, reason=reason)

    async def run(self, ctx: NodeContext) -> NodeResult:
        cfg = self.config
        values = ctx.bind(cfg.inputs)
        if cfg.tool is not None:
            return self._builtin(ctx, cfg.tool, values)
        if cfg.semantics == "fastgpt":
            values = fastgpt_inputs(values, cfg.input_types)
        data = ctx.node_run.data
        assert cfg.language is not None  # the config requires it with code
        data["language"] = cfg.language
        missing = missing_message(package_needs(package_env(ctx.deps.settings), cfg.language, cfg.code))
        if missing:
            # The import would fail inside the sandbox anyway; this way the message says what to install.
            raise self._fail(ctx, missing, "missing_package")
        try:
            # Inputs go to the child as JSON; refuse what would not survive the trip.
            json.dumps(values, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise self._fail(ctx, f"the inputs are not JSON-serialisable: {exc}", "node_error") from None
        try:
            mode, warning = await choose_mode(ctx.deps.settings)
        except SandboxUnavailable as exc:
            raise self._fail(ctx, str(exc), "sandbox_unavailable") from None
        data["sandbox"] = mode
        if warning is not None:
            data["sandbox_warning"] = f"ran WITHOUT a sandbox (operator opt-in): {warning}"
        ctx.cancel.raise_if_cancelled(ctx.node_id)
        # the execution's span, within the node's: a failure below (a timeout, an error of
        # the code, a bad output) ends it failed with the node's reason code
        with telemetry().span(
            f"execute_code {cfg.language}",
            {
                "flowloom.code.language": cfg.language,
                "flowloom.code.sandbox": mode,
                "flowloom.node.id": ctx.node_id,
                "openinference.span.kind": "TOOL",
            },
        ) as span:
            outcome = await self._execute(ctx, values, mode)
            span.set(
                {
                    "flowloom.code.status": outcome.status,
                    "flowloom.code.exit_code": outcome.exit_code,
                    "flowloom.code.elapsed_ms": round(outcome.elapsed_s * 1000.0, 1),
                }
            )
            return NodeResult(self._outputs(ctx, outcome))

    async def _execute(self, ctx: NodeContext, values: dict[str, Any], mode: Mode) -> Outcome:
        """Run the code in the sandbox ``mode`` and record how it went in the node run.

        Raises:
            NodeFailed: the sandbox could not start (reason ``sandbox_unavailable``).
        """
        cfg, data = self.config, ctx.node_run.data
        limits = Limits(timeout=cfg.timeout, memory_mb=cfg.memory_mb, max_output_bytes=cfg.max_output_bytes)
        prelude = FASTGPT_JS_PRELUDE if cfg.semantics == "fastgpt" and cfg.language == "javascript" else ""
        try:
            outcome = await run_code(
                self._language(),
                cfg.code,
                values,
                limits,
                ctx.deps.settings,
                mode=mode,
                on_start=lambda pid: data.__setitem__("pid", pid),
                prelude=prelude,
            )
        except SandboxUnavailable as exc:
            raise self._fail(ctx, str(exc), "sandbox_unavailable") from None
        self._record(data, outcome)
        return outcome

    def _builtin(self, ctx: NodeContext, name: str, values: dict[str, Any]) -> NodeResult:
        """Run builtin tool ``name`` with the bound inputs (Dify's tool node outputs).

        Raises:
            NodeFailed: the arguments do not fit the tool (reason ``tool_error``).
        """
        from ..agent.builtin_tools import ToolArgumentError, run_builtin

        ctx.node_run.data["tool"] = name
        try:
            out = run_builtin(name, {k: v for k, v in values.items() if v is not None})
        except ToolArgumentError as exc:
            raise self._fail(ctx, f"builtin tool {name}: {exc}", "tool_error") from None
        # Dify lists JSON messages (objects) in json; these tools make no files
        listed = [out.value] if isinstance(out.value, dict) else []
        return NodeResult({"text": out.text, "json": listed, "files": [], "result": out.value})

    @staticmethod
    def _record(data: NodeData, outcome: Outcome) -> None:
        data.update(
            {
                "exit_code": outcome.exit_code,
                "elapsed_ms": round(outcome.elapsed_s * 1000.0, 1),
                "stdout": outcome.stdout,
                "stderr": outcome.stderr,
                "logs_truncated": outcome.logs_truncated,
            }
        )
        if outcome.error is not None:
            data["error"] = outcome.error

    def _outputs(self, ctx: NodeContext, outcome: Outcome) -> dict[str, Any]:
        """Turn the outcome into the declared outputs, or raise the matching node error."""
        cfg, lang = self.config, _LANG[self._language()]
        if outcome.status == "timeout":
            raise self._fail(ctx, f"{lang} code stopped: {outcome.detail}", "code_timeout")
        if outcome.status == "output_too_large":
            raise self._fail(ctx, f"{lang} code stopped: {outcome.detail}", "output_too_large")
        if outcome.status == "killed":
            tail = outcome.stderr.strip()[-500:]
            raise self._fail(
                ctx, f"{lang} code stopped: {outcome.detail}" + (f"\n{tail}" if tail else ""), "code_killed"
            )
        if outcome.status == "bad_result":
            raise self._fail(ctx, f"{lang} code: {outcome.detail}", "code_output")
        if outcome.status == "error":
            assert outcome.error is not None
            raise self._error(ctx, outcome.error)
        result = outcome.result or {}
        outputs: dict[str, Any] = {}
        if cfg.semantics == "fastgpt":  # FastGPT checks nothing; a missing output is undefined (null)
            outputs = {out.name: result.get(out.name) for out in cfg.outputs_}
        for out in cfg.outputs_ if cfg.semantics == "strict" else ():
            if out.name not in result:
                returned = ", ".join(sorted(result)) or "nothing"
                raise self._fail(
                    ctx,
                    f"output {out.name!r} is declared but main() did not return it (returned: {returned})",
                    "code_output",
                )
            value = result[out.name]
            if not value_matches(value, out.type):
                actual = type_of_value(value)
                raise self._fail(
                    ctx,
                    f"output {out.name!r} must be {out.type.value}, got {actual.value if actual else 'null'}: "
                    f"{json.dumps(value, ensure_ascii=False)[:80]}",
                    "code_output",
                )
            outputs[out.name] = value
        ignored = sorted(set(result) - set(outputs))
        if ignored:
            ctx.node_run.data["ignored_outputs"] = ignored
        return outputs

    def _error(self, ctx: NodeContext, error: dict[str, Any]) -> NodeFailed:
        lang, kind = _LANG[self._language()], error.get("kind")
        trace = (error.get("traceback") or "").rstrip()
        if kind == "syntax":
            return self._fail(
                ctx, f"{lang} code has a syntax error:\n{trace or error.get('message')}", "code_syntax_error"
            )
        if kind == "output":
            return self._fail(ctx, f"{lang} code returned bad outputs: {error.get('message')}", "code_output")
        where = "while defining main" if kind == "definition" else "in main"
        message = f"{lang} code raised {error.get('message') or error.get('type')} ({where})"
        if error.get("type") == "MemoryError":
            message += f" - the memory limit (memory_mb={self.config.memory_mb}) was reached"
        return self._fail(ctx, message + (f"\n{trace}" if trace else ""), "code_error")
