"""``flowloom models list | show NAME | probe NAME``: the chat models of the registry, their
limits and capabilities as runs see them (the override file and the ``default`` model's
variables applied), and what an endpoint really does.

``probe NAME`` sends a few small requests to the model's endpoint
(:mod:`nodes.llm.model_probe`): a free tool call, a forced one, JSON mode, json_schema,
usage in streams, and reads the context length where the server tells it. It prints
each finding beside the registry's value; ``--write`` merges the findings into the
override file (``FLOWLOOM_MODELS_OVERRIDE``, else ``<home>/models.override.toml``), so
later runs use them. ``--json`` prints the report. Exit codes: 0 done, 2 unknown model,
missing key, or an endpoint that cannot be probed.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from .common import EXIT_OK, JsonFlag, SynonymGroup, abort, app, out, print_columns, settings, write_json

__all__ = ["list_models", "probe", "show"]

models_app = typer.Typer(
    cls=SynonymGroup,
    help="Models of the registry: limits, capabilities, and probing an endpoint.",
    no_args_is_help=True,
)
app.add_typer(models_app, name="models")


def _registry() -> Any:
    from nodes.llm.model_registry import registry_for

    return registry_for(settings())


def _spec(registry: Any, name: str) -> Any:
    from nodes.llm.model_registry import UnknownModel

    try:
        return registry.get(name)
    except UnknownModel as exc:
        abort("unknown model:", [str(exc)])


def model_summary(spec: Any) -> dict[str, Any]:
    """A chat model's limits and capabilities as JSON."""
    return {
        "name": spec.name,
        "upstream": spec.model,
        "provider": spec.provider,
        "max_context": spec.max_context,
        "max_output_tokens": spec.max_output_tokens,
        "capabilities": spec.capabilities.model_dump(),
    }


def _flags(caps: Any) -> str:
    names = ("structured_output", "json_mode", "stream_usage", "vision", "reasoning")
    shown = [n for n in names if getattr(caps, n)]
    return ",".join(shown) or "-"


@models_app.command("list")
def list_models(as_json: JsonFlag = False) -> None:
    """List the chat models: context, output cap, tools and other capabilities."""
    registry = _registry()
    specs = [registry.get(name) for name in registry.names()]
    if as_json:
        write_json([model_summary(s) for s in specs])
        raise typer.Exit(EXIT_OK)
    print_columns(
        ("MODEL", "CONTEXT", "OUTPUT", "TOOLS", "CAPABILITIES"),
        [
            (
                s.name,
                str(s.max_context),
                str(s.max_output_tokens),
                s.capabilities.tools,
                _flags(s.capabilities),
            )
            for s in specs
        ],
    )
    raise typer.Exit(EXIT_OK)


@models_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="a chat model of the registry")], as_json: JsonFlag = False
) -> None:
    """One model: where it is served, its limits and capabilities."""
    registry = _registry()
    spec = _spec(registry, name)
    summary = {**model_summary(spec), "base_url": registry.base_url(spec)}
    if as_json:
        write_json(summary)
        raise typer.Exit(EXIT_OK)
    caps = summary.pop("capabilities")
    print_columns(
        ("FIELD", "VALUE"),
        [(k, str(v)) for k, v in summary.items()]
        + [(f"capabilities.{k}", str(v).lower() if isinstance(v, bool) else str(v)) for k, v in caps.items()],
    )
    raise typer.Exit(EXIT_OK)


def _yes(check: Any) -> str:
    return {True: "yes", False: "no", None: "unknown"}[check.ok]


@models_app.command("probe")
def probe(
    name: Annotated[str, typer.Argument(help="a chat model of the registry")],
    write: Annotated[
        bool, typer.Option("--write", help="store the findings in the model override file")
    ] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds allowed per request")] = 120.0,
    as_json: JsonFlag = False,
) -> None:
    """Ask the model's endpoint what works: tool calls (free and forced), JSON mode,
    json_schema, usage in streams, and its context length."""
    from nodes.llm.model_probe import ProbeFailed, ProbeTarget, probe_model
    from nodes.llm.model_registry import MissingAPIKey

    registry = _registry()
    spec = _spec(registry, name)
    try:
        target = ProbeTarget.from_registry(registry, name)
        report = asyncio.run(probe_model(target, timeout=timeout))
    except (ProbeFailed, MissingAPIKey) as exc:
        abort("cannot probe the model:", [str(exc)])
    override = report.override()
    path = settings().models_override_path
    if write:
        _write(path, name, override)
    if as_json:
        write_json(
            {
                **report.model_dump(mode="json"),
                "tools": report.tools,
                "override": override.table(),
                "written_to": str(path) if write else None,
            }
        )
        raise typer.Exit(EXIT_OK)
    caps = spec.capabilities
    rows = [
        ("free tool call", _yes(report.free_tool_call), report.free_tool_call.detail),
        ("forced tool call", _yes(report.forced_tool_call), report.forced_tool_call.detail),
        ("JSON mode", _yes(report.json_mode), report.json_mode.detail),
        ("json_schema", _yes(report.json_schema), report.json_schema.detail),
        ("usage in streams", _yes(report.stream_usage), report.stream_usage.detail),
        (
            "context length",
            str(report.context_length or "unknown"),
            f"told by {report.context_source}" if report.context_source else "the server does not tell it",
        ),
    ]
    out().print(f"{name} ({spec.model}) at {report.base_url}")
    print_columns(("CHECK", "RESULT", "DETAIL"), rows)
    out().print(
        f"registry: tools {caps.tools}, context {spec.max_context}, output cap {spec.max_output_tokens}; "
        f"probe: tools {report.tools or 'unknown'}, context {report.context_length or 'unknown'}"
    )
    if write:
        out().print(f"written to {path}")
    elif override.table():
        out().print(f"--write stores these findings in {path}")
    raise typer.Exit(EXIT_OK)


def _write(path: Any, name: str, override: Any) -> None:
    from nodes.llm.model_overrides import write_override
    from nodes.llm.model_registry import ModelConfigError

    try:
        write_override(path, name, override)
    except (ModelConfigError, OSError) as exc:
        abort("cannot write the override file:", [str(exc)])
