"""The node catalog contract: what the engine needs to know about node kinds.

The engine never names a node kind. It compiles and runs whatever catalog it is
given: for each kind, a :class:`KindSpec` with the config model (fields, handles,
outputs, templates), the executor class (behaviour) and the traits the compiler
and the scheduler act on. ``nodes/`` builds the built-in catalog; tests and
embedders build their own (``catalog.with_kinds(...)``).

Executors are built once per compiled plan and shared by every run of that plan:
they may precompute from their config but must keep no per-run state (that belongs
in :class:`~schemas.run.RunState`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import TypeAdapter

from schemas.nodes import NodeConfig
from schemas.workflow import NodeBase, node_model, workflow_json_schema

if TYPE_CHECKING:
    from .context import NodeContext, NodeResult

__all__ = ["KindSpec", "NodeCatalog", "NodeExecutor"]

C = TypeVar("C", bound=NodeConfig)


class NodeExecutor(Generic[C]):
    """Base of node behaviour: ``run(ctx)`` executes one attempt of one node.

    Subclasses name their kind with ``class X(NodeExecutor[XConfig], kind="x")``
    (informational: the catalog, not the class, decides which kinds exist).
    ``run`` raises to fail the attempt and returns a :class:`~engine.context.NodeResult`
    (outputs and the handles taken) to succeed.
    """

    kind: ClassVar[str] = ""

    def __init_subclass__(cls, kind: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if kind is not None:
            cls.kind = kind

    def __init__(self, node: NodeBase) -> None:
        self.node = node
        self.config: C = node.config  # type: ignore[assignment]  # the catalog pairs each executor with its kind's config

    async def run(self, ctx: NodeContext) -> NodeResult:
        """Execute the node once (one attempt). Raise to fail; return outputs + handles."""
        raise NotImplementedError


Collects = Literal["outputs", "answer"]


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One node kind as the engine sees it.

    - ``config_source``: the pydantic config model (its ``handles``/``outputs``/``templates``),
      or its import path ``"package.module:Class"``, imported the first time :attr:`config`
      is read (a command checking a workflow of plumbing nodes then never builds the
      agent, LLM or knowledge models); :attr:`config` is the class either way.
    - ``executor``: the behaviour class, built per node with ``executor(node)``, or its
      import path ``"package.module:Class"``, imported the first time a plan needs it
      (checking a workflow then never imports the model SDKs behind the LLM nodes).
    - ``entry``: the run starts here (exactly one node of such a kind per workflow).
    - ``container``: nodes whose ``parent`` is such a node form a body it runs per
      item / round / tool call.
    - ``interactive``: it pauses the run to ask a person (not allowed inside loop bodies,
      since a body round cannot be checkpointed half-way).
    - ``collects``: ``"outputs"`` - its outputs become the run's outputs;
      ``"answer"`` - its ``answer`` output joins the run's answer text.
    - ``streams``: the output whose text the node streams live while it runs
      (``ctx.delta(text, "answer")``; e.g. an LLM's ``answer``). Its final value starts
      with what it streamed, so an answer template referencing it sends the deltas live
      and then only the rest (engine/answers.py); None: the node streams nothing the
      answer stream uses (its deltas are not shown).
    - ``inside``: kinds of container this kind must be inside (empty: anywhere).
    - ``reads_only``: running it changes nothing outside the run unless its config says
      so (:meth:`~schemas.nodes.NodeConfig.writes`); a graph tool made only of such nodes
      needs no confirmation. False (the default) counts as writing, so a kind added
      later is confirmed until its author says otherwise.
    - ``pure``: running it has no effect outside the run and costs nothing worth keeping,
      so running it again gives the same result (a template, a condition, a variable).
      Its result need not be stored before its successors start: it rides on the run's
      next checkpoint, and after a crash it is recomputed. False (the default): the
      node's result is checkpointed before any successor starts, so a completed side
      effect (a model call, an HTTP request, code, a question to a person) is never
      done again; a kind added later is treated so until its author says otherwise.
    - ``icon``, ``category``: how the canvas and the catalog listing present it.
    - ``labels``: the title and description in other languages, as ``(language tag,
      title, description)`` triples (``zh-CN``...): editors show kinds in the builder's
      language, and the catalog stays the one place that describes kinds.
    """

    kind: str
    config_source: type[NodeConfig] | str
    executor: type[NodeExecutor[Any]] | str
    entry: bool = False
    container: bool = False
    interactive: bool = False
    collects: Collects | None = None
    streams: str | None = None
    inside: frozenset[str] = frozenset()
    reads_only: bool = False
    pure: bool = False
    icon: str = ""
    category: str = ""
    labels: tuple[tuple[str, str, str], ...] = ()

    @property
    def config(self) -> type[NodeConfig]:
        """The config model (imported on first use when given as a path).

        Raises:
            ImportError: the path names no importable config class.
            ValueError: the class declares another kind.
        """
        if isinstance(self.config_source, str):
            return _load_config(self.config_source, self.kind)
        return self.config_source

    @property
    def config_path(self) -> str:
        """``module:Class`` of the config model (read without importing it)."""
        return _path_of(self.config_source)

    def executor_class(self) -> type[NodeExecutor[Any]]:
        """The executor class (imported on first use when given as a path).

        Raises:
            ImportError: the path names no importable class.
        """
        if isinstance(self.executor, str):
            return _load(self.executor)
        return self.executor

    @property
    def executor_path(self) -> str:
        """``module:Class`` of the executor."""
        return _path_of(self.executor)

    @property
    def title(self) -> str:
        """The kind's display name (the config class's ``title``)."""
        return self.config.title or self.kind

    @property
    def description(self) -> str:
        """The kind's description: the first paragraph of the config class's docstring, on one
        line (its line breaks and their indentation become single spaces). Editors show it to
        builders, so that paragraph is written for them (tests/api/test_node_kinds.py)."""
        return " ".join((self.config.__doc__ or "").strip().split("\n\n")[0].split())


@dataclass(frozen=True, eq=False)  # compared and hashed by identity (the schema cache keys on it)
class NodeCatalog:
    """An immutable set of node kinds (kind -> :class:`KindSpec`).

    Raises:
        ValueError: on construction, when two specs share a kind or a spec's config
            class declares another kind (a config named by path: when it is imported).
    """

    specs: Mapping[str, KindSpec]
    containers: frozenset[str] = field(init=False)
    #: the kinds marked ``pure`` (:class:`KindSpec`), read by the scheduler per finished node
    pure: frozenset[str] = field(init=False)
    fingerprint: str = field(init=False)

    def __post_init__(self) -> None:
        for kind, spec in self.specs.items():
            if spec.kind != kind:
                raise ValueError(f"catalog entry {kind!r} holds the spec of kind {spec.kind!r}")
            if not isinstance(spec.config_source, str):  # a path is checked when it is imported
                _check_kind(spec.config_source, kind)
        object.__setattr__(self, "specs", dict(self.specs))
        object.__setattr__(self, "containers", frozenset(k for k, s in self.specs.items() if s.container))
        object.__setattr__(
            self, "pure", frozenset(k for k, s in self.specs.items() if s.pure and not s.container)
        )
        # The plan cache keys on this: two catalogs with the same classes compile alike.
        text = "|".join(
            f"{k}={s.config_path.replace(':', '.')}/{s.executor_path}" for k, s in sorted(self.specs.items())
        )
        object.__setattr__(self, "fingerprint", hashlib.sha256(text.encode()).hexdigest()[:16])

    @classmethod
    def of(cls, *specs: KindSpec) -> NodeCatalog:
        """A catalog of ``specs``.

        Raises:
            ValueError: a kind appears twice.
        """
        by_kind: dict[str, KindSpec] = {}
        for spec in specs:
            if spec.kind in by_kind:
                raise ValueError(f"node kind {spec.kind!r} appears twice in the catalog")
            by_kind[spec.kind] = spec
        return cls(by_kind)

    def with_kinds(self, *specs: KindSpec) -> NodeCatalog:
        """A new catalog with ``specs`` added (a spec replaces the kind of the same name)."""
        return NodeCatalog({**self.specs, **{s.kind: s for s in specs}})

    def __contains__(self, kind: object) -> bool:
        return kind in self.specs

    def __iter__(self) -> Iterator[str]:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)

    def get(self, kind: str) -> KindSpec | None:
        """The spec of ``kind``, or None when the catalog does not have it."""
        return self.specs.get(kind)

    def __getitem__(self, kind: str) -> KindSpec:
        return self.specs[kind]

    def kinds(self) -> list[str]:
        """Every kind, sorted."""
        return sorted(self.specs)

    def node_model(self, kind: str) -> type[NodeBase]:
        """The pydantic model of a node of ``kind``. Raises KeyError for an unknown kind."""
        return node_model(self.specs[kind].config, kind)

    def executor(self, node: NodeBase) -> NodeExecutor[Any]:
        """Build the executor of ``node``. Raises KeyError for an unknown kind."""
        return self.specs[node.type].executor_class()(node)

    def json_schema(self) -> dict[str, Any]:
        """JSON Schema (draft 2020-12) of workflows made of this catalog's kinds."""
        return _schema(self)

    def config_schema(self, kind: str) -> dict[str, Any]:
        """JSON Schema of ``kind``'s config. Raises KeyError for an unknown kind."""
        return TypeAdapter(self.specs[kind].config).json_schema(by_alias=True)


@functools.cache
def _load(path: str) -> type[NodeExecutor[Any]]:
    module, _, name = path.partition(":")
    cls = getattr(importlib.import_module(module), name, None)
    if not (isinstance(cls, type) and issubclass(cls, NodeExecutor)):
        raise ImportError(f"{path!r} is not a node executor class")
    return cls


def _path_of(source: type | str) -> str:
    """``module:Class`` of a class, or the import path it was given as."""
    return source if isinstance(source, str) else f"{source.__module__}:{source.__qualname__}"


def _check_kind(config: type[NodeConfig], kind: str) -> None:
    """Raise ValueError when ``config`` declares a kind other than ``kind``."""
    if config.kind and config.kind != kind:
        raise ValueError(f"kind {kind!r}: config class {config.__name__} declares kind {config.kind!r}")


@functools.cache
def _load_config(path: str, kind: str) -> type[NodeConfig]:
    module, _, name = path.partition(":")
    cls = getattr(importlib.import_module(module), name, None)
    if not (isinstance(cls, type) and issubclass(cls, NodeConfig)):
        raise ImportError(f"{path!r} is not a node config class")
    _check_kind(cls, kind)
    return cls


@functools.lru_cache(maxsize=8)
def _schema(catalog: NodeCatalog) -> dict[str, Any]:
    return workflow_json_schema({k: s.config for k, s in catalog.specs.items()})
