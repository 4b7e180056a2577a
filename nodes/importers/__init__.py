"""Importers: document translators from FastGPT workflow JSON and Dify DSL YAML to Flowloom workflows.

They translate documents and run nothing: the result is a workflow the compiler checks
like any other. One entry point, :func:`import_workflow`, used by ``flowloom import`` and
the API's import route (which the canvas calls)::

    result = import_workflow(path.read_bytes(), catalog=catalog, models=registry, allow_partial=True)
    result.workflow      # a Flowloom workflow document that compiles
    result.report        # ImportIssue per node / reference / setting not carried over
    result.source_format # "fastgpt" | "dify" | "flowloom"

The importer only reads the file: JSON is parsed with :mod:`json`, YAML with PyYAML's
safe loader (no tags, no aliases), code stays text and templates are only parsed.
Anything that cannot be converted is reported with the source node id and a reason;
without ``allow_partial`` the import fails (:class:`ImportFailed`, every problem at
once), with it those nodes become ``unsupported`` placeholders that fail when run.

A Flowloom document is accepted too and returned in canonical form, so exporting an
imported workflow and importing it again gives the same workflow.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from engine.catalog import NodeCatalog
from engine.code_packages import PackageEnv
from engine.compiler import check_workflow

from .base import BaseImporter, normalise_workflow
from .report import (
    API_MODEL_HINTS,
    CLI_MODEL_HINTS,
    ImportFailed,
    ImportIssue,
    ImportResult,
    ModelHints,
    package_commands,
)

__all__ = [
    "API_MODEL_HINTS",
    "CLI_MODEL_HINTS",
    "ImportFailed",
    "ImportIssue",
    "ImportResult",
    "MAX_SOURCE_BYTES",
    "ModelHints",
    "detect_format",
    "import_workflow",
    "package_commands",
    "parse_source",
    "unwrap_download",
]

#: Largest file accepted (bytes).
MAX_SOURCE_BYTES = 20 * 1024 * 1024


def _fail(message: str, fmt: str = "") -> ImportFailed:
    return ImportFailed([ImportIssue("invalid_source", message)], fmt)


def _yaml_loader() -> Any:
    import yaml

    class _NoAliasLoader(yaml.SafeLoader):
        """Safe loading without anchors/aliases (exports never use them; they allow
        exponential blow-up of a small file)."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.events.AliasEvent):
                event = self.get_event()
                raise yaml.composer.ComposerError(
                    None, None, "YAML aliases are not accepted", event.start_mark
                )
            return super().compose_node(parent, index)

    return _NoAliasLoader


def parse_source(data: bytes | str | Mapping[str, Any]) -> dict[str, Any]:
    """The file's top-level object: JSON first, then YAML (safe, no aliases).

    Raises:
        ImportFailed: not JSON or YAML, too large, or not an object (``invalid_source``).
    """
    if isinstance(data, Mapping):
        return dict(data)
    if isinstance(data, bytes):
        if len(data) > MAX_SOURCE_BYTES:
            raise _fail(f"the file is larger than {MAX_SOURCE_BYTES} bytes")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise _fail(f"the file is not UTF-8 text: {exc}") from None
    else:
        text = data
        if len(text) > MAX_SOURCE_BYTES:
            raise _fail(f"the file is larger than {MAX_SOURCE_BYTES} bytes")
    try:
        doc = json.loads(text)
    except RecursionError:
        raise _fail(_TOO_DEEP) from None
    except ValueError as json_error:
        import yaml

        try:
            doc = yaml.load(text, Loader=_yaml_loader())
        except RecursionError:
            raise _fail(_TOO_DEEP) from None
        except yaml.YAMLError as exc:
            raise _fail(f"the file is neither JSON ({json_error}) nor YAML ({exc})") from None
    if not isinstance(doc, dict):
        raise _fail("the file must hold an object (a FastGPT workflow, a Dify DSL or a Flowloom workflow)")
    return doc


#: Python's parsers recurse once per level: far past any real document they run out of
#: stack, which must read as a problem with the file, not as a crash.
_TOO_DEEP = "the file nests objects or arrays too deeply to be read (far more than any workflow needs)"


def unwrap_download(doc: dict[str, Any]) -> dict[str, Any]:
    """The DSL inside Dify's API download format ``{"data": "<DSL YAML>"}``, else ``doc``.

    Dify's console API returns an export as a JSON object whose ``data`` holds the YAML
    text; saving that response is a common way to obtain a DSL file.

    Raises:
        ImportFailed: the wrapper's text is not a YAML/JSON object (``invalid_source``,
            the message names the wrapper).
    """
    inner = doc.get("data")
    if not isinstance(inner, str) or set(doc) - {"data"}:
        return doc
    try:
        unwrapped = parse_source(inner)
    except ImportFailed as exc:
        reason = exc.report[0].message if exc.report else str(exc)
        raise _fail(
            f'the file is a Dify API download {{"data": "<DSL YAML>"}}, but its "data" text is not a '
            f"DSL: {reason}"
        ) from None
    if not looks_like_dsl(unwrapped):
        raise _fail(
            'the file is a Dify API download {"data": "<DSL YAML>"}, but its "data" text holds no '
            "Dify DSL (workflow.graph)",
            "dify",
        )
    return unwrapped


def looks_like_dsl(doc: Mapping[str, Any]) -> bool:
    """True for a Dify DSL (see :func:`nodes.importers.dify.looks_like_dify`)."""
    from .dify import looks_like_dify

    return looks_like_dify(doc)


def detect_format(doc: Mapping[str, Any]) -> str:
    """``fastgpt``, ``dify`` or ``flowloom``.

    Raises:
        ImportFailed: none of them (``invalid_source``).
    """
    from .dify import looks_like_dify
    from .fastgpt import looks_like_fastgpt

    if looks_like_dify(doc):
        return "dify"
    if looks_like_fastgpt(doc):
        return "fastgpt"
    nodes = doc.get("nodes")
    if (
        isinstance(nodes, list)
        and all(isinstance(n, dict) and "type" in n and "id" in n for n in nodes)
        and "id" in doc
    ):
        return "flowloom"
    raise _fail(
        "not a FastGPT workflow (nodes with flowNodeType), a Dify DSL (workflow.graph) or a Flowloom "
        "workflow (id, nodes with id/type)"
    )


def import_workflow(
    data: bytes | str | Mapping[str, Any],
    *,
    catalog: NodeCatalog,
    models: Any,
    allow_partial: bool = False,
    model_map: Mapping[str, str] | None = None,
    workflow_id: str | None = None,
    hints: ModelHints = CLI_MODEL_HINTS,
    dataset_map: Mapping[str, str] | None = None,
    packages: PackageEnv | None = None,
    datasets: Collection[str] | None = None,
) -> ImportResult:
    """Convert a FastGPT / Dify / Flowloom document into a Flowloom workflow that compiles.

    ``catalog``: the node kinds the result is checked against (the built-in catalog:
    the importers produce built-in kinds). ``models``: the model registry model names
    are mapped to and checked against. ``model_map``: source model name -> registry name, ``"*"`` for every
    unknown model. ``workflow_id``: the id of the result (default: from the source's
    name, else a hash of the source). ``hints``: how the report advises mapping a model
    (:data:`CLI_MODEL_HINTS`, ``--model``; the API passes :data:`API_MODEL_HINTS`, ``model_map``).
    ``dataset_map``: source dataset id -> Flowloom dataset id, ``"*"`` for every unmapped
    one (:mod:`nodes.importers.datasets`). ``packages``: the code sandbox's package
    environment (:func:`engine.code_packages.package_env`) that code nodes' imports are
    checked against; None: none installed, the standard library and Node's built-ins only.
    ``ImportResult.packages`` lists every package the code imports, installed or not.
    ``datasets``: the ids of the tenant's datasets (None: not known, not checked); a
    ``dataset_map`` target not among them is reported (``unknown_dataset`` warning, with
    the closest id: :func:`nodes.importers.datasets.unknown_targets`).

    Raises:
        ImportFailed: with every problem, when something cannot be converted and
            ``allow_partial`` is False, or when the result does not compile.
    """
    doc = unwrap_download(parse_source(data))
    fmt = detect_format(doc)
    registry = models
    if fmt == "flowloom":
        return _import_flowloom(doc, catalog, registry, workflow_id)
    importer_cls: type[BaseImporter]
    if fmt == "dify":
        from .dify import DifyImporter

        importer_cls = DifyImporter
    else:
        from .fastgpt import FastGPTImporter

        importer_cls = FastGPTImporter
    importer = importer_cls(
        doc,
        catalog=catalog,
        allow_partial=allow_partial,
        registry=registry,
        model_map=model_map,
        workflow_id=workflow_id,
        hints=hints,
        dataset_map=dataset_map,
        packages=packages,
    )
    result = importer.run()
    if datasets is not None:
        from .datasets import unknown_targets

        result.report.extend(unknown_targets(result.datasets, dataset_map or {}, datasets, hints))
    return result


def _import_flowloom(
    doc: dict[str, Any], catalog: NodeCatalog, registry: Any, workflow_id: str | None
) -> ImportResult:
    out = normalise_workflow(doc, catalog)
    if workflow_id:
        out["id"] = workflow_id
    problems = check_workflow(out, catalog=catalog, models=registry)
    issues = [
        ImportIssue(
            f"compile_{p.code}",
            p.message + (f" (path {p.path})" if p.path else ""),
            p.node_id,
            None,
            p.severity,
        )
        for p in problems
    ]
    if any(i.severity == "error" for i in issues):
        raise ImportFailed(issues, "flowloom")
    return ImportResult(out, issues, "flowloom")
