"""What each node of a workflow document offers downstream, for editors: its output
handles and its outputs with their types (:func:`node_shapes`); what it needs from
the deployment it would run on (:func:`deployment_problems`); and which system variables
it reads (:func:`system_reads`), so a run form asks for a message only when one is read.

An editor needs these while the document is still being written, so nothing here
requires the whole document to compile: every node whose own fields are valid gets its
shape, whatever is wrong elsewhere (a dangling edge, a bad reference, another node's
invalid config). A node whose fields are invalid has no shape; the compiler's problems
say why.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import jinja2
from pydantic import ValidationError

from schemas.nodes import NodeConfig, Requirement
from schemas.types import SYS_VARIABLES
from schemas.values import walk_refs
from schemas.workflow import Workflow

from .catalog import NodeCatalog
from .code_packages import PackageEnv, PackageNeed, missing_message, package_env, requirement_name
from .errors import Problem
from .plain_errors import a_or_an, did_you_mean
from .references import template_names, template_selectors
from .settings import SECRET_ENV_PREFIX, Settings

if TYPE_CHECKING:  # a protocol, for annotations only
    from .ports import ModelCatalog

__all__ = [
    "NodeShape",
    "deployment_problems",
    "key_remedy",
    "searched_datasets",
    "missing_key_env",
    "plan_missing_keys",
    "plan_searched_datasets",
    "plan_unknown_datasets",
    "node_shapes",
    "system_reads",
    "valid_nodes",
    "workflow_writes",
]


@dataclass(frozen=True, slots=True)
class NodeShape:
    """``handles``: the node's output handles in order (``error`` included under the
    error-branch strategy); ``outputs``: output name -> type name (``string``, ``number``,
    ``object``...); None when they follow from a part of the document that is invalid."""

    handles: list[str]
    outputs: dict[str, str] | None


def _shell(doc: Mapping[str, Any]) -> Workflow:
    """The document's top level (inputs and variables drive some nodes' outputs); an
    invalid top level falls back to an empty workflow, so node shapes still come out."""
    try:
        return Workflow.model_validate({**doc, "nodes": [], "edges": []})
    except (ValidationError, TypeError):
        return Workflow(id="draft")


def valid_nodes(doc: Mapping[str, Any], catalog: NodeCatalog) -> list[Any]:
    """The nodes of ``doc`` that are objects of a known kind whose own fields validate, as
    node models. The functions below take them as ``nodes`` so a caller asking several
    questions of one document validates its nodes once."""
    raw_nodes = doc.get("nodes")
    if not isinstance(raw_nodes, list):
        return []
    nodes = []
    for raw in raw_nodes:
        if not isinstance(raw, dict) or raw.get("type") not in catalog or not isinstance(raw.get("id"), str):
            continue
        try:
            nodes.append(catalog.node_model(raw["type"]).model_validate(raw))
        except ValidationError:
            continue
    return nodes


def node_shapes(
    doc: Mapping[str, Any], *, catalog: NodeCatalog, nodes: list[Any] | None = None
) -> dict[str, NodeShape]:
    """Node id -> :class:`NodeShape` for every node of ``doc`` (a workflow document as a
    mapping) that is an object of a known kind whose fields validate; others are left out.

    Raises nothing for bad input: what cannot be shaped is simply absent.
    """
    shell = _shell(doc)
    shapes: dict[str, NodeShape] = {}
    for node in valid_nodes(doc, catalog) if nodes is None else nodes:
        try:
            outputs: dict[str, str] | None = {name: str(t) for name, t in node.outputs(shell).items()}
        except Exception:
            outputs = None
        shapes[node.id] = NodeShape(handles=node.handles(), outputs=outputs)
    return shapes


def deployment_problems(
    doc: Mapping[str, Any],
    *,
    catalog: NodeCatalog,
    settings: Settings,
    models: ModelCatalog | None = None,
    nodes: list[Any] | None = None,
    datasets: Collection[str] | None = None,
) -> list[Problem]:
    """What the nodes of ``doc`` need that this deployment lacks, naming the node, the field
    and the variable to set:

    - ``disabled_by_operator`` (error): a boolean operator setting a node needs is off;
    - ``missing_secret`` (error): a secret a node reads is not set;
    - ``missing_api_key`` (warning): a node calls a model (``models``; None: not checked)
      whose provider needs an API key in a variable that is not set in ``settings.environ()``
      (the process environment over ``.env``, where the registry reads keys);
    - ``missing_package`` (warning): a code node imports a module that is not installed
      in the code sandbox's package environment (:mod:`engine.code_packages`), with the
      ``flowloom sandbox install`` command that installs it;
    - ``unknown_dataset`` (warning): a node searches a dataset id not among ``datasets``
      (the tenant's dataset ids; None: not checked), with the commands that make it;
    - ``retrieval_degraded`` (warning): a search in ``semantic`` mode names a dataset
      without an embedding model (``datasets`` a mapping id -> ``Dataset``: checked), which
      a run searches by full text instead, as it then warns.

    Validation reports these so a builder learns before publishing what would make a run
    fail here; a workflow is still portable (another deployment may have them). A missing
    key only warns: the operator may set it before anyone runs the workflow, and Run and
    Publish must not wait for that; the same holds for a package. Never a secret's or a
    key's value.

    Raises nothing for bad input: nodes whose fields are invalid are the compiler's to report.
    """
    problems: list[Problem] = []
    environ = settings.environ()  # the .env file is read once per Settings, the environment live
    packages: list[PackageEnv] = []  # read when a node first needs a package
    for node in valid_nodes(doc, catalog) if nodes is None else nodes:
        config: NodeConfig = node.config
        for need in config.requirements():
            if need.kind == "package":
                if not packages:
                    packages.append(package_env(settings))
                problems.extend(_missing_package(node.id, need, packages[0]))
            elif need.kind == "setting":
                if getattr(settings, need.name, False):
                    continue
                variable = f"FLOWLOOM_{need.name.upper()}"
                problems.append(
                    Problem(
                        "disabled_by_operator",
                        f"{need.why}, which this deployment does not allow: "
                        f"the operator must set {variable}=1",
                        node_id=node.id,
                        path=need.path,
                    )
                )
            else:
                variable = SECRET_ENV_PREFIX + need.name
                if environ.get(variable):
                    continue
                problems.append(
                    Problem(
                        "missing_secret",
                        f"secret {need.name!r} is not set ({need.why}): set "
                        f"{variable} in the environment or .env",
                        node_id=node.id,
                        path=need.path,
                    )
                )
        if models is not None:
            problems.extend(_missing_keys(node, models, environ))
        if datasets is not None:
            problems.extend(_unknown_datasets(node, datasets))
        if isinstance(datasets, Mapping):
            problems.extend(_semantic_without_vectors(node, datasets))
    return problems


def _semantic_without_vectors(node: Any, datasets: Mapping[str, Any]) -> list[Problem]:
    """A ``retrieval_degraded`` warning per dataset a ``semantic`` search of ``node`` names
    that has no embedding model: the run searches it by full text and only then says so,
    while the builder could pick ``full_text`` (or give the dataset a model) now."""
    problems = []
    for path, dataset_id in node.config.dataset_refs():
        options = _options_at(node.config, path.rpartition("datasets[")[0])
        dataset = datasets.get(dataset_id)
        if str(getattr(options, "mode", "")) != "semantic" or dataset is None or dataset.embedding_model:
            continue
        problems.append(
            Problem(
                "retrieval_degraded",
                f"mode 'semantic' needs vectors, but dataset {dataset_id!r} has no embedding model: a run "
                "searches it by full text instead; set the mode to 'full_text', or give the "
                f"dataset an embedding model (PATCH /v1/datasets/{dataset_id}, or its page under Knowledge)",
                node_id=node.id,
                path=f"config.{path.rpartition('datasets[')[0]}mode",
                severity="warning",
            )
        )
    return problems


def _options_at(config: Any, prefix: str) -> Any:
    """The object whose fields sit at ``prefix`` of ``config`` (``""``: the config itself,
    ``dataset_tools[1].``: an agent's second dataset tool): where a search's ``mode`` is."""
    target = config
    for part in filter(None, prefix.rstrip(".").split(".")):
        name, _, index = part.partition("[")
        target = getattr(target, name, None)
        if index and isinstance(target, list):
            target = target[int(index.rstrip("]"))]
    return target


def searched_datasets(nodes: Iterable[Any]) -> set[str]:
    """The dataset ids the (valid) ``nodes`` search: what a validation lists the tenant's
    datasets for (none: it need not open the knowledge store)."""
    return {dataset_id for node in nodes for _, dataset_id in node.config.dataset_refs()}


def _unknown_datasets(
    node: Any, datasets: Collection[str], severity: Literal["error", "warning"] = "warning"
) -> list[Problem]:
    """``unknown_dataset`` problems of ``node``: one per searched id the tenant lacks (the
    closest id it has, when one is close). A warning when a workflow is validated: the
    dataset may be made before anyone runs it."""
    return [
        Problem(
            "unknown_dataset",
            f"dataset {dataset_id!r} does not exist (yet) for this tenant{did_you_mean(dataset_id, datasets)}: "
            f"a run would fail at this search; make it with `flowloom datasets create NAME --id {dataset_id}` "
            f"and fill it with `flowloom datasets add {dataset_id} FILES --wait` (or POST /v1/datasets), or "
            "pick another",
            node_id=node.id,
            path=f"config.{path}",
            severity=severity,
        )
        for path, dataset_id in node.config.dataset_refs()
        if dataset_id not in datasets
    ]


def plan_searched_datasets(plan: Any) -> set[str]:
    """The dataset ids the nodes of ``plan`` (a ``CompiledPlan``, loop bodies included) search."""
    found: set[str] = set()
    for node_plan in plan.nodes.values():
        found.update(dataset_id for _, dataset_id in node_plan.node.config.dataset_refs())
        if node_plan.body is not None:
            found |= plan_searched_datasets(node_plan.body)
    return found


def plan_unknown_datasets(plan: Any, datasets: Collection[str]) -> list[Problem]:
    """``unknown_dataset`` errors of every node of ``plan`` (loop bodies included) that
    searches a dataset id not among ``datasets`` (the tenant's): what a launch refuses
    (:class:`~engine.errors.UnknownDatasets`), since the run would fail at that search
    after the nodes before it ran (and were paid for)."""
    found: list[Problem] = []
    for node_plan in plan.nodes.values():
        found += _unknown_datasets(node_plan.node, datasets, "error")
        if node_plan.body is not None:
            found += plan_unknown_datasets(node_plan.body, datasets)
    return found


def _missing_package(node_id: str, need: Requirement, env: PackageEnv) -> list[Problem]:
    """A ``missing_package`` warning when the module ``need`` names is not installed in
    the code sandbox's environment, with the command that installs it."""
    language = need.language or "python"
    if env.has(language, need.name):
        return []
    missing = PackageNeed(language, need.name, requirement_name(language, need.name), False)
    return [
        Problem(
            "missing_package",
            missing_message([missing]),
            node_id=node_id,
            path=need.path,
            severity="warning",
        )
    ]


def missing_key_env(models: ModelCatalog, name: str, environ: Mapping[str, str]) -> str | None:
    """The variable model ``name``'s provider needs for its key when it is unset or blank in
    ``environ`` (the registry strips it the same way before sending it); else None."""
    variable = models.required_key_env(name)
    if variable is None or str(environ.get(variable, "") or "").strip():
        return None
    return variable


def key_remedy(models: ModelCatalog, name: str, variable: str) -> str:
    """How to give model ``name`` what it lacks: set ``variable``, or, when the registry
    takes the provider's URL from a variable, point that at an endpoint of one's own
    (Ollama, vLLM, llama.cpp, TEI), which needs no key. The second is what a local model
    such as an embedding model served next to Flowloom is for."""
    url_var = models.base_url_env(name)
    remedy = f"set {variable} in the environment or .env"
    if url_var is not None:
        remedy += f", or point {url_var} at your own OpenAI-compatible server (no key needed there)"
    return remedy


def plan_missing_keys(plan: Any, models: ModelCatalog, environ: Mapping[str, str]) -> list[Problem]:
    """``missing_api_key`` errors of every node of ``plan`` (a ``CompiledPlan``; loop
    bodies included) whose model's provider key is unset or blank in ``environ``: what a
    launch refuses (:class:`~engine.errors.MissingModelKey`). A model field costs one
    lookup, so a run checks its keys when it starts: a key set or removed later counts."""
    found: dict[tuple[str | None, str | None], Problem] = {}
    for node_plan in plan.nodes.values():
        for p in _missing_keys(node_plan.node, models, environ):
            found[p.node_id, p.path] = Problem(
                p.code, p.message, node_id=p.node_id, path=p.path, severity="error"
            )
        if node_plan.body is not None:
            found.update(((p.node_id, p.path), p) for p in plan_missing_keys(node_plan.body, models, environ))
    return list(found.values())


def _missing_keys(node: Any, models: ModelCatalog, environ: Mapping[str, str]) -> list[Problem]:
    """``missing_api_key`` warnings of ``node``: one per model field whose provider's key
    variable is unset or blank."""
    found = []
    for path, name in node.config.model_refs():
        variable = missing_key_env(models, name, environ)
        if variable is None:
            continue
        found.append(
            Problem(
                "missing_api_key",
                f"model {name!r} needs an API key in {variable}, which is not set "
                f"in this deployment: {key_remedy(models, name, variable)} before running",
                node_id=node.id,
                path=f"config.{path}",
                severity="warning",
            )
        )
    return found


def workflow_writes(doc: Mapping[str, Any], *, catalog: NodeCatalog) -> str | None:
    """Why running ``doc`` may change something outside the run (the first node that may),
    or None when every node is of a kind the catalog marks ``reads_only`` and its config
    writes nothing - what a client offering the workflow as a tool may call freely. A node
    that does not validate, or of a kind the catalog does not know, counts as writing.
    """
    raw_nodes = doc.get("nodes")
    nodes = valid_nodes(doc, catalog)
    if not isinstance(raw_nodes, list) or len(nodes) != len(raw_nodes):
        return "the workflow has nodes that do not validate"
    for node in nodes:
        spec = catalog.get(node.type)
        if spec is None or not spec.reads_only:
            return f"node {node.id!r} is {a_or_an(node.type)} node"
        reason = node.config.writes()
        if reason is not None:
            return f"node {node.id!r} {reason}"
    return None


def system_reads(
    doc: Mapping[str, Any], *, catalog: NodeCatalog, nodes: list[Any] | None = None
) -> list[str]:
    """The ``sys`` names (``query``, ``history``, ``chat_id``...) the valid nodes of ``doc``
    read, sorted: in ``{"ref": "sys.NAME"}`` values and in templates (``{{ sys.NAME }}``,
    ``{{ sys["NAME"] }}``), config defaults included - a chat, classifier, extractor or
    agent node left at its default reads ``sys.query``. References are found the way the
    compiler finds them (``walk_refs`` over the config, ``template_selectors`` over its
    templates); nodes that do not validate are skipped, like :func:`node_shapes` does, and
    a template that does not parse adds nothing (the compiler reports it).

    A run form uses this to ask for the user's message only when ``query`` is read.
    Rules beyond plain references, with why:

    - ``history``: a model node's ``history_source`` (``sys.history`` by default) counts
      only when its ``history`` puts at least one past turn in the prompt; with 0 the
      conversation is never shown to the model, so the node does not depend on it.
    - A template local that stands for a reference (``NodeConfig.template_local_refs``:
      a chat node's ``{{ question }}`` in its ``user_prompt`` is ``sys.query``) counts as
      reading that reference.
    - ``{{ sys }}`` read whole names no variable and adds nothing; a name that is not a
      system variable (``sys.querry``) is left out too - the compiler reports it
      (``unknown_sys``) and no run can read it.

    A workflow that reads ``query`` or ``history`` is a chat flow: its answer depends on
    the conversation (the user's message, or the earlier turns only a chat has), so a
    client's chat preview is where it is meant to run.

    Raises nothing for bad input.
    """
    names: set[str] = set()
    for node in valid_nodes(doc, catalog) if nodes is None else nodes:
        config: NodeConfig = node.config
        for found in walk_refs(config, "config"):
            sel = found.ref.selector
            if sel.scope != "sys" or not sel.field:
                continue
            if found.path == "config.history_source" and getattr(config, "history", 1) <= 0:
                continue
            names.add(sel.field)
        names.update(_template_sys_reads(config))
    return sorted(names & SYS_VARIABLES.keys())


def _template_sys_reads(config: NodeConfig) -> set[str]:
    """The ``sys`` names the templates of ``config`` read (see :func:`system_reads`)."""
    names: set[str] = set()
    local_names = config.template_locals()
    for field_path, source in config.templates():
        bound = config.template_local_refs(field_path)
        try:
            selectors = list(template_selectors(source))
            used = template_names(source) if bound else set()
        except jinja2.TemplateSyntaxError:
            continue
        for local, ref in bound.items():
            scope, _, name = ref.partition(".")
            if local in used and scope == "sys":
                names.add(name)
        if "sys" in local_names:
            continue  # a name the node binds itself shadows the scope, as the compiler reads it
        names.update(field for head, field in selectors if head == "sys" and field)
    return names
