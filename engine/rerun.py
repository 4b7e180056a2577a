"""Re-running a past run from one of its nodes: which node runs are reused, and the
state the new run starts from.

A builder who changed one node wants to see its effect without paying again for what
comes before it (model calls, HTTP requests). :func:`seed_rerun` fills a new run's state
with copies of the past run's node runs *strictly upstream* of the chosen node, so the
scheduler restores the run from them (edges follow from node runs, as after a crash:
:func:`engine.run_records.derive_edges`) and executes only the chosen node and what
follows it, with the new document.

A node run is reused when, in the new document's graph, its node is an ancestor of the
chosen node at the top level (not inside a loop body), it has the same id and kind as
in the past run, it succeeded there (or was skipped, which a branch decided), every
node before it is reused too, and its status still fits its incoming edges (a rewired
branch makes it run again). Reused node runs are marked in ``data["reused_from"]``
(past run id, node run id, its timings and usage); their usage is not counted again.
"""

from __future__ import annotations

import time
from typing import Any

from schemas.events import NodeDelta, NodeFinished, RunStarted
from schemas.node_records import ReusedFrom
from schemas.run import NodeRun, RunState
from schemas.types import NodeRunStatus, RunStatus

from .answers import AnswerStream
from .compiler import CompiledPlan
from .errors import FlowloomError
from .plain_errors import did_you_mean
from .run_records import id_part  # the one spelling of node run ids (escaped node ids)

__all__ = ["RerunRefused", "durable", "seed_rerun"]

_REUSABLE = (NodeRunStatus.succeeded, NodeRunStatus.skipped)


class RerunRefused(FlowloomError):
    """The rerun cannot start from that node: unknown in the document, inside a loop
    body, or not on the past run's path. The message names the node and says why."""


def _container_of(plan: CompiledPlan, node_id: str) -> str | None:
    """The top-level loop, iteration or loop region whose body holds ``node_id``, if any."""
    for nid, node_plan in plan.nodes.items():
        body = node_plan.body
        if body is not None and (node_id in body.nodes or _container_of(body, node_id) is not None):
            return nid
    return None


def _check_target(plan: CompiledPlan, old: RunState, node_id: str) -> None:
    """Raises RerunRefused unless ``node_id`` is a top-level node of ``plan`` that ran in ``old``."""
    if node_id not in plan.nodes:
        container = _container_of(plan, node_id)
        if container is not None:
            raise RerunRefused(
                f"node {node_id!r} is inside {container!r}: a rerun starts at a top-level node; "
                f"rerun from {container!r} instead"
            )
        known = ", ".join(sorted(plan.nodes)[:20])
        raise RerunRefused(
            f"no node {node_id!r} in the workflow{did_you_mean(node_id, plan.nodes)} (its nodes: {known})"
        )
    past = old.node_runs.get(node_id)
    if past is None or past.loop_id is not None or past.status is NodeRunStatus.skipped:
        how = "was skipped" if past is not None and past.status is NodeRunStatus.skipped else "did not run"
        raise RerunRefused(
            f"node {node_id!r} {how} in run {old.run_id}: it is not on that run's path; rerun "
            f"from a node the run reached"
        )


def _edge_sources(plan: CompiledPlan) -> dict[str, tuple[str, str]]:
    """Edge id -> (source node, source handle) of the top-level scope."""
    return {
        eid: (src, handle) for src, node_plan in plan.nodes.items() for eid, handle, _t in node_plan.out_edges
    }


def _ancestors(plan: CompiledPlan, sources: dict[str, tuple[str, str]], node_id: str) -> set[str]:
    found: set[str] = set()
    stack = [node_id]
    while stack:
        for eid in plan.nodes[stack.pop()].in_edges:
            src = sources[eid][0] if eid in sources else None
            if src is not None and src not in found:
                found.add(src)
                stack.append(src)
    return found


def _in_edges(
    plan: CompiledPlan, sources: dict[str, tuple[str, str]], runs: dict[str, NodeRun], nid: str
) -> tuple[bool, bool]:
    """(every incoming edge resolved, one of them taken) given the node runs ``runs``."""
    resolved, taken = True, False
    for eid in plan.nodes[nid].in_edges:
        src, handle = sources.get(eid, ("", ""))
        run = runs.get(src)
        if run is None or run.status not in _REUSABLE:
            resolved = False
        elif run.status is NodeRunStatus.succeeded and handle in run.handles:
            taken = True
    return resolved, taken


def _reused(old_run: NodeRun, old_run_id: str, new_id: str, now: float) -> NodeRun:
    """A copy of ``old_run`` in the new run, marked as reused (its usage kept only in the mark)."""
    mark: ReusedFrom = {
        "run_id": old_run_id,
        "node_run_id": old_run.id,
        "started_at": old_run.started_at,
        "finished_at": old_run.finished_at,
        "attempts": old_run.attempts,
        "usage": old_run.usage.record() if old_run.usage is not None else None,
    }
    copied = old_run.model_copy(
        deep=True,
        update={
            "id": new_id,
            "usage": None,
            "pending": None,
            "attempts": 0,
            "retries": 0,
            "started_at": now,
            "finished_at": now,
            "waited_s": 0.0,
        },
    )
    copied.data = {**copied.data, "reused_from": mark}
    return copied


def _skipped(plan: CompiledPlan, state: RunState, nid: str, now: float) -> list[NodeRun]:
    """A skipped node run for ``nid`` (and the members of a skipped loop region)."""
    node_plan = plan.nodes[nid]
    runs = [
        NodeRun(
            id=f"{state.run_id}:{id_part(nid)}",
            node_id=nid,
            kind=node_plan.node.type,
            status=NodeRunStatus.skipped,
            started_at=now,
            finished_at=now,
        )
    ]
    if node_plan.members and node_plan.body is not None:
        for member in node_plan.members:
            runs.append(
                NodeRun(
                    id=f"{state.run_id}:{id_part(member)}",
                    node_id=member,
                    kind=node_plan.body.nodes[member].node.type,
                    status=NodeRunStatus.skipped,
                    started_at=now,
                    finished_at=now,
                )
            )
    return runs


def seed_rerun(plan: CompiledPlan, old: RunState, state: RunState, node_id: str) -> list[Any]:
    """Fill ``state`` (a new, pending run of ``plan`` with the past run's inputs) for a rerun
    of ``old`` from ``node_id``; returns the run's first events (``run_started``, a
    ``node_finished`` per reused or skipped node, ``node_delta`` for answer text the reused
    nodes had sent), numbered from 1.

    Afterwards ``state`` is ``running`` with its start time and deadline, the reused node
    runs (module docstring), skipped node runs where the reused branches decided so, the
    answer text sent so far, and run variables as the past run ended them (the ones
    ``plan`` declares): a node that updates a variable upstream is not executed again, so
    its update is taken from there. ``state.sys`` gains ``rerun_of`` and ``rerun_from``.

    Raises:
        RerunRefused: ``node_id`` is unknown, inside a loop body, or not on ``old``'s path.
    """
    _check_target(plan, old, node_id)
    now = time.time()
    sources = _edge_sources(plan)
    upstream = _ancestors(plan, sources, node_id)
    seeded: dict[str, NodeRun] = {}
    for nid in plan.order:
        past = old.node_runs.get(nid)
        if (
            nid not in upstream
            or nid not in plan.nodes
            or past is None
            or past.loop_id is not None
            or past.status not in _REUSABLE
            or past.kind != plan.nodes[nid].node.type
        ):
            continue
        preds = {sources[e][0] for e in plan.nodes[nid].in_edges if e in sources}
        if not preds <= seeded.keys():
            continue
        resolved, taken = _in_edges(plan, sources, seeded, nid)
        fits = (
            (nid in plan.roots or (resolved and taken))
            if past.status is NodeRunStatus.succeeded
            else (resolved and not taken and nid not in plan.roots)
        )
        if fits:
            seeded[nid] = _reused(
                past,
                old.run_id,
                f"{state.run_id}{past.id[len(old.run_id) :]}"
                if past.id.startswith(f"{old.run_id}:")
                else f"{state.run_id}:{id_part(nid)}",
                now,
            )
    for nid in plan.order:  # what the reused branches decided: nodes none of them leads to are skipped
        if nid in seeded or nid not in plan.nodes or nid in plan.roots:
            continue
        resolved, taken = _in_edges(plan, sources, seeded, nid)
        if resolved and not taken:
            for run in _skipped(plan, state, nid, now):
                seeded[run.node_id] = run
    state.node_runs.update(seeded)
    declared = {v.name for v in plan.workflow.variables}
    state.variables.update({k: v for k, v in old.variables.items() if k in declared})
    state.status, state.started_at = RunStatus.running, now
    state.deadline = now + plan.workflow.limits.max_wall_time
    state.sys["rerun_of"], state.sys["rerun_from"] = old.run_id, node_id
    return _first_events(plan, state, [seeded[n] for n in plan.order if n in seeded], now)


def _first_events(plan: CompiledPlan, state: RunState, resolved: list[NodeRun], now: float) -> list[Any]:
    """``run_started``, a ``node_finished`` per reused or skipped node, then the answer
    text they let the answer stream send (kept in ``state.answer``, so the scheduler's
    restore replays it without sending it again)."""
    events: list[Any] = []

    def emit(cls: type[Any], **fields: Any) -> None:
        state.seq += 1
        events.append(cls(seq=state.seq, run_id=state.run_id, ts=now, **fields))

    emit(RunStarted, workflow_id=state.workflow_id, inputs=state.inputs)
    for run in resolved:
        emit(
            NodeFinished,
            node_id=run.node_id,
            node_run_id=run.id,
            attempt=run.attempts,
            kind=run.kind,
            status=run.status,
            handles=run.handles,
            outputs=run.outputs,
        )
    if plan.stream is not None:
        # All resolutions at once, as the scheduler marks a node's skips before any unit
        # opens: fed one by one, the answer of a branch the router did not take would open
        # (its gate resolved) before its own skip arrives, and speak.

        def run_id_of(nid: str) -> str:
            return f"{state.run_id}:{id_part(nid)}"

        stream = AnswerStream.top(plan.stream, state, emit, run_id_of)
        for run in resolved:
            _replay_body(plan, state, stream, run)
        stream.start([run for run in resolved if run.node_id in plan.nodes])
        state.answer = stream.saved()
    return events


def _replay_body(plan: CompiledPlan, state: RunState, stream: AnswerStream, run: NodeRun) -> None:
    """Feed the answer stream what a reused container's items / rounds said, from the node
    runs its record keeps (``data["items"]`` / ``data["rounds"]``), so a rerun answers what
    a fresh run would. The container's per-item values are not kept, so a reference to
    them is left to each answer's recorded text (the unit's tail)."""
    node_plan = plan.nodes.get(run.node_id)
    body = node_plan.body if node_plan is not None else None
    if node_plan is None or body is None or body.stream is None or node_plan.members:
        return
    container = run.node_id
    for record in run.data.get("items") or run.data.get("rounds") or []:
        index = int(record["index"])
        child = state.child()
        child.node_runs[container] = NodeRun(
            id=run.id, node_id=container, kind=run.kind, status=NodeRunStatus.succeeded, outputs={}
        )
        for raw in record.get("node_runs") or []:
            past = NodeRun.model_validate(raw)
            child.node_runs[past.node_id] = past
        prefix = f"{state.run_id}:{id_part(container)}#{index}:"

        def nested_id(nid: str, p: str = prefix) -> str:
            return p + id_part(nid)

        nested = stream.nested(body.stream, child, container, index, nested_id)
        if nested is not None:
            nested.start(
                [
                    r
                    for nid in body.order
                    if (r := child.node_runs.get(nid)) is not None and r.finished_at is not None
                ],
                silent=False,
            )


def durable(events: list[Any]) -> list[Any]:
    """The events of ``events`` the event log keeps (all but text deltas)."""
    return [event for event in events if not isinstance(event, NodeDelta)]
