"""``flowloom validate``, ``schema`` and ``import``: workflow files, no run store needed."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from .common import (
    EXIT_INVALID,
    JsonFlag,
    WorkflowFile,
    abort,
    app,
    err,
    is_stdin,
    node_titles,
    out,
    print_problems,
    read_source,
    settings,
    source_label,
    write_json,
)
from .loading import load_workflow, stored_datasets

__all__ = ["import_", "schema", "validate"]


def _summary(file: Path, doc: dict[str, Any], warnings: int) -> Text:
    """``FILE: valid workflow 'id' (N nodes, M edges)`` for a workflow without errors."""
    counts = f"{len(doc.get('nodes', []))} nodes, {len(doc.get('edges', []))} edges"
    counts += f", {warnings} warning(s)" if warnings else ""
    return Text.assemble(
        (f"{source_label(file)}: valid", "bold green"), f" workflow {doc.get('id')!r} ({counts})"
    )


@app.command()
def validate(file: WorkflowFile, as_json: JsonFlag = False) -> None:
    """Compile FILE and list every problem; exit 2 when there are errors (warnings do not fail)."""
    from engine.compiler import check_workflow
    from engine.shapes import deployment_problems, valid_nodes
    from nodes import builtin_catalog
    from nodes.llm.model_registry import registry_for

    from .loading import tenant_datasets

    doc, problems = load_workflow(file, "validate")
    if doc is not None:
        catalog, models = builtin_catalog(), registry_for(settings())
        nodes = valid_nodes(doc, catalog)
        problems = [
            *check_workflow(doc, catalog=catalog, models=models),
            *deployment_problems(
                doc,
                catalog=catalog,
                settings=settings(),
                models=models,
                nodes=nodes,
                datasets=tenant_datasets(nodes),
            ),
        ]
    errors = [p for p in problems if p.severity == "error"]
    if as_json:
        write_json([p.to_dict() for p in problems], indent=2)
    else:
        print_problems(problems, out(), node_titles(doc))
        if doc is not None and not errors:
            out().print(_summary(file, doc, len(problems)))
    if errors:
        raise typer.Exit(EXIT_INVALID)


def _refuse_overwriting_the_source(file: Path, output: Path | None) -> None:
    """Exit 2 when ``--output`` names FILE itself: the export would be lost to the import."""
    if output is None or is_stdin(file):
        return
    if output.resolve() == file.resolve():
        target = file.stem + ".flowloom.json"
        abort(
            "cannot import:",
            [
                f"{output} is the file being imported: writing there would overwrite it; use another name, e.g. -o {target}"
            ],
        )


def _issue_text(issue: Any, titles: dict[str, str] | None = None) -> Text:
    """One import finding on one line: severity, code, source node (kind), message."""
    style = "red" if issue.severity == "error" else "yellow"
    text = Text.assemble(("  " + issue.severity, style), " ", (issue.code, "bold"))
    if issue.node_id:
        kind = f" ({issue.source_type})" if issue.source_type else ""
        renamed = f" -> {issue.flowloom_id}" if issue.flowloom_id else ""
        title = (titles or {}).get(issue.flowloom_id or issue.node_id)
        text.append(f"  node={issue.node_id}{kind}{renamed}" + (f" {title!r}" if title else ""))
    return text.append(f"  {issue.message}")


def _print_issues(
    issues: list[Any], console: Console, *, imported: bool = False, titles: dict[str, str] | None = None
) -> None:
    """Errors (not converted; in a partial import: replaced) first, then warnings."""
    not_converted = (
        "not converted (replaced by failing placeholders or fallbacks)" if imported else "not converted"
    )
    for severity, heading in (("error", not_converted), ("warning", "converted with differences")):
        group = [i for i in issues if i.severity == severity]
        if group:
            console.print(Text(f"{len(group)} {heading}:", style="bold"))
            for issue in group:
                console.print(_issue_text(issue, titles))


def _default_id(file: Path, data: bytes) -> str | None:
    """The id of an imported workflow when ``--id`` is not given: a Flowloom document keeps its
    own (importing an exported workflow gives the same workflow back); a FastGPT or Dify
    export, whose ids mean nothing here, takes the file's name."""
    from nodes.importers import ImportFailed, detect_format, parse_source, unwrap_download

    if is_stdin(file):
        return None
    try:
        if detect_format(unwrap_download(parse_source(data))) == "flowloom":
            return None
    except ImportFailed:
        pass  # reported by the import itself
    return file.stem


def _pairs(values: list[str] | None, flag: str, shape: str) -> dict[str, str]:
    """``SOURCE=TARGET`` options as a mapping (exit 2 naming a malformed one)."""
    mapping: dict[str, str] = {}
    for pair in values or []:
        source, sep, target = pair.partition("=")
        if not sep or not source.strip() or not target.strip():
            abort(f"invalid {flag}:", [f"{pair!r}: expected {shape}"])
        mapping[source.strip()] = target.strip()
    return mapping


@app.command("import")
def import_(
    file: Annotated[
        Path,
        typer.Argument(
            dir_okay=False, allow_dash=True, help="FastGPT workflow JSON or Dify DSL YAML (- for stdin)"
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", dir_okay=False, help="write the Flowloom workflow here (default: stdout)"
        ),
    ] = None,
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial",
            help="replace what cannot be converted by failing 'unsupported' placeholders "
            "(and unknown models by 'default') instead of failing",
        ),
    ] = False,
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            "-m",
            metavar="SOURCE=NAME",
            help="use registry model NAME for the file's model SOURCE "
            "(repeatable; '*=NAME' for every unknown model)",
        ),
    ] = None,
    dataset: Annotated[
        list[str] | None,
        typer.Option(
            "--dataset",
            "-d",
            metavar="SOURCE=ID",
            help="search dataset ID where the file's search nodes name dataset "
            "SOURCE (repeatable; '*=ID' for every unmapped one and for searches with none selected)",
        ),
    ] = None,
    workflow_id: Annotated[str | None, typer.Option("--id", help="id of the imported workflow")] = None,
) -> None:
    """Convert FILE (FastGPT JSON or Dify YAML) into a Flowloom workflow; print what was not converted.

    Exit 2 listing every problem when something cannot be converted (unless
    --allow-partial) or the result would not compile. Nothing in FILE is executed.
    """
    from engine.code_packages import package_env
    from nodes import builtin_catalog
    from nodes.importers import ImportFailed, import_workflow
    from nodes.llm.model_registry import registry_for

    mapping = _pairs(model, "--model", "SOURCE=NAME")
    datasets = _pairs(dataset, "--dataset", "SOURCE=ID")
    _refuse_overwriting_the_source(file, output)
    try:
        data = read_source(file)
    except OSError as exc:
        abort("cannot import:", [f"{file}: {exc.strerror or exc}"])
    registry = registry_for(settings())
    known = stored_datasets() if datasets else None  # the tenant `flowloom run` searches
    try:
        result = import_workflow(
            data,
            catalog=builtin_catalog(),
            models=registry,
            allow_partial=allow_partial,
            model_map=mapping,
            workflow_id=workflow_id or _default_id(file, data),
            dataset_map=datasets,
            packages=package_env(settings()),
            datasets=known,
        )
    except ImportFailed as exc:
        _print_failure(exc, file, allow_partial)
        raise typer.Exit(EXIT_INVALID) from None
    text = json.dumps(result.workflow, indent=2, ensure_ascii=False) + "\n"
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            abort("cannot write the workflow:", [f"{output}: {exc}"])
    _print_imported(result, registry, file, output, checked=known is not None)


def _print_failure(exc: Any, file: Path, allow_partial: bool) -> None:
    """Why an import failed (every problem) and, when options would help, which ones."""
    console = err()
    fmt = f" ({exc.source_format})" if exc.source_format else ""
    console.print(Text(f"cannot import {source_label(file)}{fmt}:", style="bold red"))
    _print_issues(exc.report, console)
    for line in package_lines(exc.packages):
        console.print(line)
    if any(i.severity == "error" and i.code != "invalid_source" for i in exc.report) and not allow_partial:
        console.print(
            Text(
                "use --allow-partial to import anyway with failing placeholders, --model "
                "SOURCE=NAME for unknown models and --dataset SOURCE=ID for datasets",
                style="dim",
            )
        )


def _print_imported(
    result: Any, registry: Any, file: Path, output: Path | None, *, checked: bool = False
) -> None:
    """The import's report on stderr: its issues, a summary, where models and datasets
    went, the secrets to set and the command that runs the workflow. ``checked``: the
    mapped datasets were checked against the tenant's (each missing one is an issue)."""
    from schemas.env_vars import secret_names

    console = err()
    _print_issues(result.report, console, imported=True, titles=node_titles(result.workflow))
    wf = result.workflow
    placeholders = sum(1 for n in wf["nodes"] if n.get("type") == "unsupported")
    where = f" -> {output}" if output is not None else ""
    summary = Text.assemble(
        (f"{source_label(file)}: imported", "bold green"),
        f" {result.source_format} workflow {wf['id']!r} "
        f"({len(wf['nodes'])} nodes, {len(wf['edges'])} edges){where}",
    )
    if placeholders:
        summary.append(f"; {placeholders} unsupported placeholder(s) fail when run", style="yellow")
    console.print(summary)
    for line in [
        *model_lines(result, registry),
        *dataset_lines(result, checked),
        *package_lines(result.packages),
    ]:
        console.print(line)
    for name in secret_names(wf):  # no file carries a secret's value: say how to give it
        console.print(
            Text.assemble(("secret to set: ", "bold"), f"{name} (flowloom secrets set {wf['id']} {name})")
        )
    # Only a regular file can be run later: a device (``-o /dev/null``, ``/dev/stdout``) kept
    # nothing to run, so the line pipes the import into ``flowloom run -`` as without -o.
    kept = output if output is not None and output.is_file() else None
    console.print(
        Text.assemble(
            ("run it with: ", "bold"),
            run_command(wf, kept, f"flowloom import {shlex.quote(source_label(file))}"),
        )
    )


def model_lines(result: Any, registry: Any) -> list[Text]:
    """Where each source model went: the registry model, its provider and endpoint, and
    the variables that hold its key and its base URL (names only, never values).

    An imported flow names the models of the platform it came from; the person running
    it needs to know which variable to set, and that a local endpoint is one setting
    away (``FLOWLOOM_LLM_BASE_URL_OVERRIDE``)."""
    models = getattr(result, "models", None) or {}
    if not models:
        return []
    lines = [Text("models:", style="bold")]
    for source, target in sorted(models.items()):
        try:
            where = registry.describe(target)
        except KeyError:
            continue
        key = {
            "none": "no key",
            "optional": f"key in {where['api_key_env']} (optional)",
            "required": f"key in {where['api_key_env']}",
        }[str(where["key"])]
        url_var = f", URL set by {where['base_url_env']}" if where.get("base_url_env") else ""
        shown = repr(source) if source else "(no model set)"
        lines.append(
            Text(
                f"  {shown} -> {target} (provider {where['provider']}, upstream {where['upstream']!r} at "
                f"{where['base_url']}{url_var}; {key})"
            )
        )
    if settings().llm_base_url_override:  # already pointed at one endpoint: nothing to suggest
        return lines
    lines.append(
        Text(
            "  a local OpenAI-compatible server (Ollama, llama.cpp, vLLM) for every model: set "
            "FLOWLOOM_LLM_BASE_URL_OVERRIDE (and FLOWLOOM_LLM_MODEL_OVERRIDE); no key needed",
            style="dim",
        )
    )
    return lines


def dataset_lines(result: Any, checked: bool = False) -> list[Text]:
    """Where each source dataset went: the dataset id its searches use. Datasets are the
    deployment's data: unless ``checked`` (the mapped ones against this deployment's, each
    missing one an ``unknown_dataset`` issue), whether one exists is known when the
    workflow runs, which the last line says."""
    datasets = getattr(result, "datasets", None) or {}
    if not datasets:
        return []
    lines = [Text("datasets:", style="bold")]
    for source, target in sorted(datasets.items()):
        shown = "(no dataset selected)" if source == "*" else repr(source)
        lines.append(Text(f"  {shown} -> {target}"))
    if checked:
        return lines
    lines.append(
        Text(
            "  each must exist when the workflow runs: flowloom datasets list; create and fill one with "
            "flowloom datasets create NAME --id ID, then flowloom datasets add ID FILES",
            style="dim",
        )
    )
    return lines


def package_lines(packages: list[dict[str, Any]]) -> list[Text]:
    """The packages the flow's code imports (:attr:`ImportResult.packages`), installed or
    not, and the command that installs the missing ones: the sandbox installs nothing
    by itself, so the operator must run it before the flow can run."""
    if not packages:
        return []
    from nodes.importers import package_commands

    lines = [Text("packages the code imports:", style="bold")]
    for p in packages:
        state = "installed" if p["installed"] else "NOT installed"
        what = f" ({p['requirement']})" if p["requirement"] and p["requirement"] != p["module"] else ""
        nodes = ("node " if len(p["nodes"]) == 1 else "nodes ") + ", ".join(repr(n) for n in p["nodes"])
        lines.append(Text(f"  {p['language']} {p['module']}{what}: {state} ({nodes})"))
    for command in package_commands(packages):
        lines.append(Text.assemble(("install with: ", "bold"), command))
    return lines


def run_command(workflow: dict[str, Any], output: Path | None, source: str = "flowloom import FILE") -> str:
    """The ``flowloom run`` line for an imported workflow: ``--input NAME=...`` for each
    required input, ``--message ...`` for a ``query`` input (the user's message, as in
    Dify and FastGPT chat flows, also when it is read as ``sys.query``). Without ``-o`` the workflow went to stdout, so the
    line pipes the import into ``flowloom run -``."""
    parts = ["flowloom", "run", shlex.quote(str(output)) if output is not None else "-"]
    names = [str(v.get("name", "")) for v in workflow.get("inputs") or [] if isinstance(v, dict)]
    for var in workflow.get("inputs") or []:
        name = str(var.get("name", "")) if isinstance(var, dict) else ""
        if name and name != "query" and var.get("required", False):
            parts.append(f"--input {shlex.quote(name + '=...')}")
    # FastGPT and Dify chat flows read the user's message as sys.query rather than an input.
    if "query" in names or "sys.query" in json.dumps(workflow, ensure_ascii=False):
        parts.append("--message '...'")
    line = " ".join(parts)
    return line if output is not None else f"{source} | {line}"


@app.command()
def schema() -> None:
    """Print the JSON Schema of the workflow format (every built-in node kind)."""
    from nodes import builtin_catalog

    write_json(builtin_catalog().json_schema(), indent=2)
