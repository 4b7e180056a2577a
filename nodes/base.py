"""Node executors: one class per node kind, registered by ``kind``.

A kind's *config* (fields, handles, outputs) lives in :mod:`schemas.nodes`; its
*behaviour* is a :class:`NodeExecutor` subclass here, declared with
``class X(NodeExecutor, kind="x")``. :func:`check_catalog` verifies the two line up,
so the catalog stays one registry.

Executors are built once per compiled plan and shared by every run of that plan:
they may precompute from their config but must keep no per-run state (that belongs
in :class:`~schemas.run.RunState`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from schemas.nodes import NODE_KINDS, NodeConfig

if TYPE_CHECKING:
    from engine.context import NodeContext, NodeResult
    from schemas.workflow import NodeBase

__all__ = ["EXECUTORS", "NodeExecutor", "check_catalog", "executor_for"]

C = TypeVar("C", bound=NodeConfig)

#: kind -> executor class
EXECUTORS: dict[str, type["NodeExecutor[Any]"]] = {}


class NodeExecutor(Generic[C]):
    """Base of node behaviour. Subclasses implement :meth:`run`."""

    kind: ClassVar[str] = ""

    def __init_subclass__(cls, kind: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if kind is not None:
            if kind in EXECUTORS:
                raise ValueError(f"executor for node kind {kind!r} registered twice")
            cls.kind = kind
            EXECUTORS[kind] = cls

    def __init__(self, node: "NodeBase") -> None:
        self.node = node
        self.config: C = node.config  # type: ignore[assignment]

    async def run(self, ctx: "NodeContext") -> "NodeResult":
        """Execute the node once (one attempt). Raise to fail; return outputs + handles."""
        raise NotImplementedError


def executor_for(node: "NodeBase") -> NodeExecutor[Any]:
    """Build the executor of ``node``.

    Raises:
        KeyError: no executor for the node's kind (a catalog/executor mismatch).
    """
    return EXECUTORS[node.type](node)


def check_catalog() -> None:
    """Every catalog kind has exactly one executor and vice versa.

    Raises:
        RuntimeError: lists the kinds missing on either side.
    """
    missing = sorted(set(NODE_KINDS) - set(EXECUTORS))
    extra = sorted(set(EXECUTORS) - set(NODE_KINDS))
    if missing or extra:
        raise RuntimeError(f"node catalog mismatch: no executor for {missing}; executor without config for {extra}")
