"""Reading runs back from the SQL store: a run's rows, state and summary, lists of runs
and node runs, and the in-memory index of each run's latest node runs that the
checkpoints of :mod:`workers.sql.store` keep up to date. :class:`RunReads` is a base of
:class:`~workers.sql.store.SqlStore` and uses its ``_tx()`` transaction and raw SQLite reads."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import sqlalchemy as sa
from pydantic_core import from_json
from sqlalchemy.ext.asyncio import AsyncConnection

from engine.ports import RunNotFound
from schemas.records import RunSummary
from schemas.run import NodeRun, RunState
from schemas.types import RunStatus

from .rows import ENDED, node_run_from_row, state_from_row, summary_from_row
from .tables import node_runs, runs

__all__ = ["RunReads"]


#: Runs whose latest-node-run index a store keeps in memory (oldest dropped first).
_INDEX_LIMIT = 1024

_SUMMARY_COLUMNS = [
    runs.c[name]
    for name in (
        "run_id",
        "tenant_id",
        "workflow_id",
        "workflow_version",
        "workflow_hash",
        "status",
        "chat_id",
        "user_id",
        "created_at",
        "started_at",
        "finished_at",
        "waited_s",
        "tokens_in",
        "tokens_out",
        "cost",
        "usage_estimated",
        "error",
        "owner_id",
        "owner_host",
        "owner_pid",
        "lease_until",
        "interrupts",
    )
]
#: what a list of runs shows besides: the kind of run (a single node), the user's message
#: and the inputs (the row's preview, :func:`~workers.sql.rows.summary_from_row`)
_LIST_COLUMNS = [
    *_SUMMARY_COLUMNS,
    runs.c.inputs,
    runs.c.sys["run_kind"].as_string().label("sys_run_kind"),
    runs.c.sys["single_node"].as_string().label("sys_single_node"),
    runs.c.sys["query"].as_string().label("sys_query"),
]


#: ``runs`` columns a checkpoint writes that are also in an index: left out of the UPDATE
#: while they hold what this store last committed (rewriting an index entry with the
#: same key still dirties its page, i.e. one more page per commit on SQLite).
_INDEXED = ("status", "chat_id")


class _NodeIndex:
    """The committed current node run of each node of one run, each node's position
    (insertion order of ``RunState.node_runs``) and the committed values of the indexed
    run columns (``_INDEXED``; None: not known)."""

    __slots__ = ("current", "positions", "indexed", "created", "committed", "history")

    def __init__(self) -> None:
        self.current: dict[str, str] = {}
        self.positions: dict[str, int] = {}
        self.indexed: tuple[Any, ...] | None = None
        #: the ``runs`` columns :meth:`SqlStore.create_run` wrote (None: another store created the run)
        self.created: dict[str, Any] | None = None
        #: per node (node run id, status, finished_at) and history rows committed (SqlStore._keep_ended)
        self.committed: dict[str, tuple[str, str, float | None]] = {}
        self.history = 0

    def apply(self, current: dict[str, str], added: dict[str, int]) -> None:
        """Record committed node runs (``current``) and the positions of nodes new to the run."""
        self.current.update(current)
        self.positions.update(added)


#: JSON columns of ``runs`` and ``node_runs`` (decoded after a raw read)
_RUN_JSON = tuple(c.name for c in runs.c if isinstance(c.type, sa.JSON))
_NODE_RUN_JSON = tuple(c.name for c in node_runs.c if isinstance(c.type, sa.JSON))


def _decoded(row: dict[str, Any], json_columns: Sequence[str]) -> dict[str, Any]:
    for name in json_columns:
        if row[name] is not None:
            row[name] = from_json(row[name])
    return row


def _ordered_node_runs(rows: Sequence[Any]) -> list[NodeRun]:
    """Node runs of ``rows`` in start order (runs not started yet last)."""
    return [node_run_from_row(row) for row in _start_order(rows)]


def _start_order(rows: Sequence[Any]) -> list[Any]:
    """``rows`` (node-run rows) in start order (runs not started yet last)."""
    return sorted(
        rows,
        key=lambda r: (
            r["started_at"] is None,
            r["started_at"] or 0.0,
            r["current"],
            r["seq"],
            r["node_run_id"],
        ),
    )


class RunReads:
    """The reads of the run store port (``load_run``, ``load_detail``, ``get_run``,
    ``list_runs``, ``list_node_runs``, ...) and the node index they remember."""

    backend: str
    _index: OrderedDict[str, _NodeIndex]
    _ended: OrderedDict[tuple[str, str], tuple[dict[str, Any], list[dict[str, Any]]]]
    _tx: Callable[[], AbstractAsyncContextManager[AsyncConnection]]
    _sqlite_read: Callable[[list[tuple[str, tuple[Any, ...]]]], Awaitable[list[list[dict[str, Any]]]]]

    def _remember(self, run_id: str, index: _NodeIndex, *, ended: bool = False) -> None:
        """Keep ``index`` as the committed state of the run's node runs (dropped once it ended)."""
        self._index.pop(run_id, None)
        if ended:
            return
        self._index[run_id] = index
        while len(self._index) > _INDEX_LIMIT:
            self._index.popitem(last=False)

    async def _read_run(self, tenant_id: str, run_id: str) -> tuple[Any, list[Any]]:
        """The run's row and all its node-run rows, in one transaction. Raises RunNotFound.

        On SQLite both SELECTs run in one call in aiosqlite's worker thread (one hand-off
        instead of one per cursor step, as the checkpoint does); the JSON columns are
        decoded as SQLAlchemy's JSON type would."""
        if self.backend != "sqlite":
            async with self._tx() as conn:
                return await self._run_rows(conn, tenant_id, run_id)
        run_rows, node_rows = await self._sqlite_read(
            [
                ("SELECT * FROM runs WHERE run_id = ? AND tenant_id = ?", (run_id, tenant_id)),
                ("SELECT * FROM node_runs WHERE run_id = ? AND tenant_id = ?", (run_id, tenant_id)),
            ]
        )
        if not run_rows:
            raise RunNotFound(f"no run {run_id} for tenant {tenant_id!r}")
        return _decoded(run_rows[0], _RUN_JSON), [_decoded(row, _NODE_RUN_JSON) for row in node_rows]

    @staticmethod
    async def _run_rows(conn: AsyncConnection, tenant_id: str, run_id: str) -> tuple[Any, list[Any]]:
        row = (
            (
                await conn.execute(
                    sa.select(runs).where(runs.c.run_id == run_id, runs.c.tenant_id == tenant_id)
                )
            )
            .mappings()
            .one_or_none()
        )
        if row is None:
            raise RunNotFound(f"no run {run_id} for tenant {tenant_id!r}")
        node_rows = (
            (
                await conn.execute(
                    sa.select(node_runs).where(
                        node_runs.c.run_id == run_id, node_runs.c.tenant_id == tenant_id
                    )
                )
            )
            .mappings()
            .all()
        )
        return row, list(node_rows)

    async def load_detail(self, tenant_id: str, run_id: str) -> tuple[RunSummary, RunState, list[NodeRun]]:
        """The run's summary, its state and every node run (as :meth:`list_node_runs`
        orders them), read in one transaction. Raises RunNotFound. The first call after a
        run this store created and executed has ended is answered from what its last
        checkpoint committed, without a read (:meth:`_keep_ended`)."""
        return self.detail_of_rows(*await self.load_detail_rows(tenant_id, run_id))

    async def load_detail_rows(self, tenant_id: str, run_id: str) -> tuple[Any, list[Any]]:
        """What :meth:`load_detail` makes its models of: the run's row and its node-run
        rows in start order, JSON columns decoded (``(row, node_rows)``, mappings by
        column name). A caller that needs only a dump of those models (the API's answer,
        :mod:`api.detail_rows`) can skip them. Raises RunNotFound. Taken from what the
        last checkpoint committed the first time after a run this store executed ended."""
        kept = self._ended.pop((tenant_id, run_id), None)
        row, node_rows = kept if kept is not None else await self._read_run(tenant_id, run_id)
        return row, _start_order(node_rows)

    @staticmethod
    def detail_of_rows(row: Any, node_rows: Sequence[Any]) -> tuple[RunSummary, RunState, list[NodeRun]]:
        """The models of :meth:`load_detail_rows`' rows: ``(summary, state, node runs in
        the rows' order)``.

        Each row is validated once: the state's node runs and history are the list's
        objects (a 10,000-node run's answer made 20,000 ``NodeRun`` models, half of them
        for a state whose node runs the answer does not show)."""
        ordered = [node_run_from_row(node_row) for node_row in node_rows]
        built = {run.id: run for run in ordered}
        return summary_from_row(row), state_from_row(row, node_rows, built), ordered

    async def load_run(self, tenant_id: str, run_id: str) -> RunState:
        """The run as last checkpointed (node runs and history). Raises RunNotFound."""
        return self._loaded(*await self._read_run(tenant_id, run_id))

    def _loaded(self, row: Any, node_rows: list[Any]) -> RunState:
        """The state of a run's rows, its node index remembered for the next checkpoint."""
        run_id = row["run_id"]
        state = state_from_row(row, node_rows)
        index = _NodeIndex()
        index.indexed = tuple(row[name] for name in _INDEXED)
        for node_id, run in state.node_runs.items():
            index.current[node_id] = run.id
            index.positions[node_id] = len(index.positions)
        self._remember(run_id, index, ended=str(state.status) in ENDED)
        return state

    async def get_run(self, tenant_id: str, run_id: str) -> RunSummary:
        """The run's summary. Raises RunNotFound."""
        stmt = sa.select(*_LIST_COLUMNS).where(runs.c.run_id == run_id, runs.c.tenant_id == tenant_id)
        async with self._tx() as conn:
            row = (await conn.execute(stmt)).mappings().one_or_none()
        if row is None:
            raise RunNotFound(f"no run {run_id} for tenant {tenant_id!r}")
        return summary_from_row(row)

    async def list_runs(
        self,
        tenant_id: str,
        *,
        status: RunStatus | None = None,
        workflow_id: str | None = None,
        chat_id: str | None = None,
        limit: int = 50,
    ) -> list[RunSummary]:
        """The tenant's runs, newest first, optionally filtered by status, workflow or chat."""
        stmt = sa.select(*_LIST_COLUMNS).where(runs.c.tenant_id == tenant_id)
        if status is not None:
            stmt = stmt.where(runs.c.status == RunStatus(status).value)
        if workflow_id is not None:
            stmt = stmt.where(runs.c.workflow_id == workflow_id)
        if chat_id is not None:
            stmt = stmt.where(runs.c.chat_id == chat_id)
        stmt = stmt.order_by(runs.c.created_at.desc(), runs.c.run_id.desc()).limit(limit)
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [summary_from_row(row) for row in rows]

    async def count_unended(self) -> dict[str, int]:
        """Runs of every tenant ``pending``/``running``/``paused``, by status (status -> count)."""
        unended = (RunStatus.pending.value, RunStatus.running.value, RunStatus.paused.value)
        stmt = (
            sa.select(runs.c.status, sa.func.count())
            .where(runs.c.status.in_(unended))
            .group_by(runs.c.status)
        )
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).all()
        return {str(status): int(count) for status, count in rows}

    async def list_unfinished(self, *, now: float, host: str, limit: int = 500) -> list[RunSummary]:
        """Runs of every tenant that are ``pending``/``running`` and unheld, with an expired
        lease, or held by a process of ``host``; oldest first (``ix_runs_status_lease``)."""
        unheld = runs.c.owner_id.is_(None) | (runs.c.lease_until < now) | (runs.c.owner_host == host)
        stmt = (
            sa.select(*_SUMMARY_COLUMNS)
            .where(runs.c.status.in_((RunStatus.pending.value, RunStatus.running.value)), unheld)
            .order_by(runs.c.created_at, runs.c.run_id)
            .limit(limit)
        )
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [summary_from_row(row) for row in rows]

    async def list_node_runs(self, tenant_id: str, run_id: str) -> list[NodeRun]:
        """Every saved node run of the run (earlier loop rounds included), in start order
        (runs not started yet last). Empty for an unknown run or another tenant's run."""
        stmt = sa.select(node_runs).where(node_runs.c.run_id == run_id, node_runs.c.tenant_id == tenant_id)
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return _ordered_node_runs(rows)
