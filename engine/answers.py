"""The answer stream: the text a person sees, in the answer templates' order.

Rules (README "The answer stream"):

1. The stream is made of *units*, in a fixed order per scope: the nodes of kinds that
   collect the run's answer (their template), the nodes whose outputs are the run's
   outputs when the workflow has no answer nodes (Dify-style workflows: their bindings,
   rule 6), and the containers (loops, iterations, loop regions) whose body
   holds units (their items / rounds, in index order), and, in a workflow without End
   nodes, the nodes with a streamed output that nothing above reads (an LLM answering
   directly, as in FastGPT: its live deltas only). Units are ordered upstream
   first, parallel ones in document order (a topological order preferring the earlier
   node of the document), so the text never depends on timing.
2. A unit's template is split into segments: literal text and references to node
   outputs (``{{ n.answer }}``, ``{{ nodes["n"].x.y }}``). Whatever cannot be split
   (a tag, a filter, ``inputs``/``sys``/``vars``, a dynamic key) and all that follows it
   is the unit's *tail*, sent when the unit's node has rendered it.
3. A segment referencing a node's *streamed* output (the kind's ``streams`` trait, e.g.
   an LLM's ``answer``) carries the node's deltas live while it is the next segment;
   any other reference is sent when its node finishes. Deltas and values that are not
   next are buffered, and sent the moment everything before them is complete.
4. A unit is *open* once every branching node upstream of it in its scope has resolved
   (so text of a branch that will not run is not sent), and every node upstream that asks
   a person and streams nothing (a form) has been answered (so no text that follows a
   question is shown before the question is answered); a unit whose node is skipped or
   fails drops what it had buffered. What was sent stays sent.
5. Nothing is sent twice: when a streamed node finishes, only the part of its final
   value beyond what it streamed is sent (nothing when the two differ - a retried or
   failed call - because text cannot be taken back). The run's answer is exactly the
   concatenation of what was sent (``RunState.answer``), kept across pauses.
6. A unit of output bindings (an End node) is a template of its bindings in order, a
   line break between two (as Dify streams End outputs): a binding reading a node
   output is sent when that node finishes (a streamed output live, token by token), one
   reading ``inputs`` / ``sys`` at once, any other (a literal, ``vars``, a binding whose
   default replaces a skipped node's value) when the End node has its outputs - always
   printed as a template prints the value (strings as they are, objects as JSON).

Compile side: :func:`stream_plan` (per scope, stored on the plan). Run side:
:class:`AnswerStream`, one per scope run, fed by the scheduler with node resolutions
and by :meth:`~engine.context.NodeContext.delta` with live text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2 import nodes as jnodes

from schemas.types import RESERVED_SCOPES, NodeRunStatus, Ref, Selector
from schemas.values import InputBinding

from .errors import ReferenceFailed
from .references import node_view, resolve_selector, template_env, to_text

if TYPE_CHECKING:  # run records are built only when a run streams (not to check a workflow)
    from schemas.run import NodeRun, RunState
    from schemas.workflow import NodeBase

    from .catalog import NodeCatalog

__all__ = ["AnswerStream", "Segment", "StreamPlan", "UnitPlan", "stream_plan"]

_BLOCKED = object()


@dataclass(frozen=True, slots=True)
class Segment:
    """One piece of a unit: ``text`` (literal) or a reference to ``node``'s ``steps``
    (``("attr"|"item", key)`` from the node's outputs). ``live``: the referenced output is
    the node's streamed one, so its deltas are sent while it is the next segment;
    ``only_live``: send only the deltas (a node answering on its own: no final value).

    Output bindings (rule 6) also name their ``output``; ``scoped`` is an ``inputs`` /
    ``sys`` reference (fixed for the run: known when the unit is built); ``fallback``: the
    binding has a default, so a skipped node's value is the unit node's to give."""

    text: str | None = None
    node: str | None = None
    steps: tuple[tuple[str, Any], ...] = ()
    live: bool = False
    only_live: bool = False
    output: str | None = None
    scoped: Selector | None = None
    fallback: bool = False


@dataclass(frozen=True, slots=True)
class UnitPlan:
    """A unit of a scope (module rule 1). ``mode``: ``answer`` (segments, then the tail
    reconciled with the node's ``answer`` output), ``outputs`` (streamed bindings only)
    or ``container`` (its body's streams, per item / round). ``gates``: branching nodes
    of the scope upstream of it (rule 4)."""

    node: str
    mode: str
    segments: tuple[Segment, ...] = ()
    gates: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """The units of one scope, in stream order, and the node ids the stream watches
    (resolutions: ``watch``; live deltas: ``live``)."""

    units: tuple[UnitPlan, ...]
    watch: frozenset[str]
    live: frozenset[str]


# ------------------------------------------------------------------ compile side


def _steps(expr: jnodes.Node) -> tuple[str, tuple[tuple[str, Any], ...]] | None:
    """``(node id, steps)`` of ``n.a["b"][0]`` / ``nodes["n"].a``; None when not that shape."""
    steps: list[tuple[str, Any]] = []
    while isinstance(expr, (jnodes.Getattr, jnodes.Getitem)):
        if isinstance(expr, jnodes.Getattr):
            steps.append(("attr", expr.attr))
        elif (
            isinstance(expr.arg, jnodes.Const)
            and isinstance(expr.arg.value, (str, int))
            and not isinstance(expr.arg.value, bool)
        ):
            steps.append(("item", expr.arg.value))
        else:
            return None
        expr = expr.node
    if not isinstance(expr, jnodes.Name) or not steps:
        return None
    steps.reverse()
    if expr.name == "nodes":
        kind, key = steps[0]
        if not isinstance(key, str) or len(steps) < 2:
            return None
        return key, tuple(steps[1:])
    if expr.name in RESERVED_SCOPES:
        return None
    return expr.name, tuple(steps)


def split_template(
    source: str, is_node: Callable[[str], bool], streamed: Callable[[str], str | None]
) -> tuple[Segment, ...]:
    """Segments of a template up to the first part that is not literal text or a plain
    node reference (module rule 2); an unparsable template has none (all tail)."""
    try:
        body = template_env().parse(source).body
    except jinja2.TemplateSyntaxError:
        return ()
    out: list[Segment] = []
    for stmt in body:
        if not isinstance(stmt, jnodes.Output):
            break
        for expr in stmt.nodes:
            if isinstance(expr, jnodes.TemplateData):
                out.append(Segment(text=expr.data))
                continue
            found = _steps(expr)
            if found is None or not is_node(found[0]):
                return tuple(out)
            node, steps = found
            live = len(steps) == 1 and steps[0][1] == streamed(node)
            out.append(Segment(node=node, steps=steps, live=live))
        else:
            continue
        break
    return tuple(out)


def output_bindings(node: NodeBase) -> list[InputBinding]:
    """The bindings of a node whose outputs are the run's outputs (its first config field
    holding a list of bindings), in the order the node declares them."""
    for name in type(node.config).model_fields:
        value = getattr(node.config, name)
        if isinstance(value, list) and value and all(isinstance(b, InputBinding) for b in value):
            return value
    return []


def output_segments(
    node: NodeBase, is_node: Callable[[str], bool], streamed: Callable[[str], str | None]
) -> tuple[Segment, ...]:
    """Segments of an output unit (module rule 6): each binding in order, a line break
    between two of them (Dify prints End outputs so)."""
    out: list[Segment] = []
    for index, binding in enumerate(output_bindings(node)):
        if index:
            out.append(Segment(text="\n"))
        value, name = binding.value, binding.name
        fallback = binding.default is not None
        sel = value.selector if isinstance(value, Ref) else None
        if sel is not None and sel.scope == "node" and is_node(sel.node or ""):
            steps = (("attr", sel.field), *(("item", key) for key in sel.path))
            live = not sel.path and streamed(sel.node or "") == sel.field
            out.append(Segment(node=sel.node, steps=steps, live=live, output=name, fallback=fallback))
        elif sel is not None and sel.scope in ("inputs", "sys"):
            out.append(Segment(output=name, scoped=sel))
        else:  # a literal, or a value that may change during the run: the node's own output
            out.append(Segment(output=name))
    return tuple(out)


def stream_plan(
    units: Iterable[tuple[str, NodeBase | None, Any]],
    *,
    catalog: NodeCatalog,
    kind_of: Callable[[str], str | None],
    gates_of: Callable[[str], frozenset[str]],
    answers: bool,
    local: frozenset[str] | set[str],
    own: frozenset[str] = frozenset(),
) -> StreamPlan | None:
    """The stream of one scope from its candidate units ``(id, node or None, body stream)``
    given in stream order; None when the scope has no unit.

    ``kind_of(id)``: the kind of a node of the workflow (None: not a node); ``gates_of``:
    rule 4; ``answers``: the workflow has answer nodes (then output bindings do not stream);
    ``local``: the node ids of the scope (a reference to another node reads a value that
    exists before the scope starts); ``own``: nodes that stream on their own (their live
    deltas are a unit).
    """

    def streamed(node_id: str) -> str | None:
        kind = kind_of(node_id)
        spec = catalog.get(kind) if kind is not None else None
        return spec.streams if spec is not None else None

    planned: list[UnitPlan] = []
    for unit_id, node, body in units:
        spec = catalog.get(node.type) if node is not None else None
        if body is not None:
            planned.append(UnitPlan(unit_id, "container", gates=gates_of(unit_id)))
        elif unit_id in own and node is not None and streamed(unit_id):
            field = streamed(unit_id)
            planned.append(
                UnitPlan(
                    unit_id,
                    "own",
                    (Segment(node=unit_id, steps=(("attr", field),), live=True, only_live=True),),
                    gates_of(unit_id),
                )
            )
        elif node is not None and spec is not None and spec.collects == "answer":
            templates = list(node.config.templates())
            segments = (
                split_template(templates[0][1], lambda n: kind_of(n) is not None, streamed)
                if len(templates) == 1
                else ()
            )
            planned.append(UnitPlan(unit_id, "answer", segments, gates_of(unit_id)))
        elif node is not None and spec is not None and spec.collects == "outputs" and not answers:
            segments = output_segments(node, lambda n: kind_of(n) is not None, streamed)
            if segments:
                planned.append(UnitPlan(unit_id, "outputs", segments, gates_of(unit_id)))
    if not planned:
        return None
    watch = {u.node for u in planned} | {g for u in planned for g in u.gates}
    watch |= {s.node for u in planned for s in u.segments if s.node is not None and s.node in local}
    live = frozenset(s.node for u in planned for s in u.segments if s.live and s.node is not None)
    return StreamPlan(tuple(planned), frozenset(watch), live)


# ------------------------------------------------------------------ run side: ordered parts


class _Part:
    """A node of the ordering tree: text flows out of it only while it is ``live`` (it
    and every enclosing part are the next to be sent)."""

    __slots__ = ("parent", "live", "closed")

    def __init__(self) -> None:
        self.parent: _Seq | None = None
        self.live = False
        self.closed = False

    def activate(self) -> None:
        raise NotImplementedError


class _Leaf(_Part):
    """Text of one segment: sent at once when live, else buffered until it is."""

    __slots__ = ("buf", "written", "attribution", "send")

    def __init__(
        self,
        send: Callable[[_Leaf, str], None],
        attribution: tuple[str, str, str | None, int | None, str | None],
        text: str = "",
        closed: bool = False,
    ) -> None:
        super().__init__()
        self.send = send
        # (node id, node run id, loop id, iteration, output name) of the delta events
        self.attribution = attribution
        self.buf: list[str] = [text] if text else []
        self.written = text
        self.closed = closed

    def write(self, text: str) -> None:
        if not text or self.closed:
            return
        self.written += text
        if self.live:
            self.send(self, text)
        else:
            self.buf.append(text)

    def activate(self) -> None:
        self.live = True
        if self.buf:
            text = "".join(self.buf)
            self.buf.clear()
            self.send(self, text)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.live and self.parent is not None:
            self.parent.advance()

    def drop(self) -> None:
        """Forget what was not sent (its unit will not be sent)."""
        if not self.live:
            self.buf.clear()
            self.written = ""


class _Seq(_Part):
    """Children sent one after the other; closed once sealed and every child is."""

    __slots__ = ("children", "cursor", "sealed")

    def __init__(self) -> None:
        super().__init__()
        self.children: list[_Part] = []
        self.cursor = 0
        self.sealed = False

    def add(self, child: _Part) -> None:
        child.parent = self
        self.children.append(child)
        if self.live:
            self.advance()

    def _run(self) -> None:
        children = self.children
        while self.cursor < len(children):
            child = children[self.cursor]
            if not child.live:
                child.activate()
            if not child.closed:
                return
            self.cursor += 1
        if self.sealed:
            self.closed = True

    def activate(self) -> None:
        self.live = True
        self._run()

    def advance(self) -> None:
        """A live child closed (or was added): go on; tell the parent when this closes."""
        if self.closed:
            return
        self._run()
        if self.closed and self.parent is not None and self.parent.live:
            self.parent.advance()

    def seal(self) -> None:
        """No more children; closes once the children are."""
        self.sealed = True
        if self.live:
            self.advance()


class _Unit(_Seq):
    """A unit: a sequence that may go live only once its gates are open (rule 4)."""

    __slots__ = ("plan", "gates", "opened", "wanted", "leaves", "bound", "done")

    def __init__(self, plan: UnitPlan, gates: int) -> None:
        super().__init__()
        self.plan = plan
        self.gates = gates
        self.opened = gates == 0  # set by force_open once the resolutions settled
        self.wanted = False
        self.done = False  # its node resolved: nothing more will be written into it
        self.leaves: list[_Leaf] = []
        self.bound: list[tuple[_Leaf, str]] = []  # an output unit's leaves of each binding

    def activate(self) -> None:
        if not self.opened:
            self.wanted = True
            return
        super().activate()

    def open_gate(self) -> bool:
        """One upstream branching node resolved; True when it was the last one."""
        if self.gates <= 0:
            return False
        self.gates -= 1
        return self.gates == 0

    def force_open(self) -> None:
        """Go live now if this unit is the next one (its gates no longer matter)."""
        self.gates = 0
        self.opened = True
        if self.wanted and not self.live:
            super().activate()
            if self.closed and self.parent is not None and self.parent.live:
                self.parent.advance()


# ------------------------------------------------------------------ run side: the stream


@functools.cache
def _delta_event() -> type[Any]:
    """``schemas.events.NodeDelta``, imported on first use (compiling needs no event
    model) and then found here rather than by an import statement per run."""
    from schemas.events import NodeDelta

    return NodeDelta


class _Root:
    """What every stream of a run shares: the sink of sent text and the text so far."""

    __slots__ = ("emit", "pieces", "muted", "changed", "_delta")

    def __init__(self, emit: Callable[..., None], answer: str) -> None:
        self.emit = emit
        self._delta = _delta_event()
        self.pieces: list[str] = [answer] if answer else []
        self.muted = False
        self.changed = False

    def send(self, leaf: _Leaf, text: str) -> None:
        if self.muted or not text:
            return
        self.pieces.append(text)
        self.changed = True
        node_id, run_id, loop_id, iteration, output = leaf.attribution
        self.emit(
            self._delta,
            node_id=node_id,
            node_run_id=run_id,
            channel="answer",
            text=text,
            loop_id=loop_id,
            iteration=iteration,
            output=output,
        )


class AnswerStream:
    """The answer stream of one scope run (module docstring).

    Built by the scheduler with :meth:`top` (a run, fresh or restored) or :meth:`nested`
    (one round / item of a container unit of the enclosing stream); fed with
    :meth:`resolved` when a watched node resolves and :meth:`delta` with live text.
    """

    __slots__ = (
        "plan",
        "state",
        "root",
        "seq",
        "slot",
        "units",
        "by_node",
        "leaves_of",
        "gated",
        "containers",
        "run_id_of",
        "where",
        "opening",
    )

    def __init__(
        self,
        plan: StreamPlan,
        state: RunState,
        root: _Root,
        slot: _Seq | None,
        run_id_of: Callable[[str], str],
        where: tuple[str | None, int | None],
    ) -> None:
        # ``seq`` holds the units; it goes live in :meth:`start`: at once for the top scope,
        # else placed in ``slot`` (its item's place in the container unit).
        self.plan, self.state, self.root, self.seq, self.slot = plan, state, root, _Seq(), slot
        self.run_id_of, self.where = run_id_of, where
        self.units: list[_Unit] = []
        self.by_node: dict[str, _Unit] = {}
        self.leaves_of: dict[str, list[tuple[_Leaf, Segment]]] = {}
        self.gated: dict[str, list[_Unit]] = {}
        self.containers: dict[str, _Unit] = {}
        self.opening: list[_Unit] = []  # gates all resolved; opened by settle()
        for unit_plan in plan.units:
            self._add_unit(unit_plan)
        self.seq.seal()

    @classmethod
    def top(
        cls, plan: StreamPlan, state: RunState, emit: Callable[..., None], run_id_of: Callable[[str], str]
    ) -> AnswerStream:
        """The stream of a run's top scope; ``state.answer`` is what was sent before
        (a restored run). Text sent from here on is emitted with ``emit`` and added to it."""
        return cls(plan, state, _Root(emit, state.answer), None, run_id_of, (None, None))

    def start(self, resolved: Iterable[NodeRun] = (), *, silent: bool = False) -> None:
        """Go live once ``resolved`` (node runs that resolved before the stream starts) are
        fed. ``silent`` (a restored run): replayed without sending - what they sent then is
        already in ``state.answer``; else their text is sent (a rerun's reused nodes).

        Every resolution is fed before any unit opens: a unit whose gates resolved opens
        only once the skips they decided are known too, so a branch that was not taken
        never sends its literal text (its own skipped run is among ``resolved``)."""
        self.root.muted = silent
        try:
            for run in resolved:
                self.resolved(run)
            self.settle()
            if self.slot is None:
                self.seq.activate()
            else:
                self.slot.add(self.seq)
                self.slot.seal()
        finally:
            self.root.muted = False

    def nested(
        self, plan: StreamPlan, state: RunState, container: str, index: int, run_id_of: Callable[[str], str]
    ) -> AnswerStream | None:
        """The stream of round / item ``index`` of ``container`` (a unit of this stream),
        or None when ``container`` is not a unit here; it sends once :meth:`start` ran."""
        unit = self.containers.get(container)
        if unit is None:
            return None
        while len(unit.children) <= index:
            unit.add(_Seq())
        item = unit.children[index]
        assert isinstance(item, _Seq)
        if item.children or item.sealed:  # the container runs again (a retry): a fresh, unsent place
            item = _Seq()
        return AnswerStream(plan, state, self.root, item, run_id_of, (container, index))

    @property
    def text(self) -> str:
        """Everything sent so far in the run (the run's answer)."""
        return "".join(self.root.pieces)

    @property
    def changed(self) -> bool:
        """True when text was sent since the last :meth:`saved`."""
        return self.root.changed

    def saved(self) -> str:
        """The run's answer, marking it saved."""
        self.root.changed = False
        text = "".join(self.root.pieces)
        self.root.pieces = [text] if text else []
        return text

    # ---------------------------------------------------------------- building

    def _add_unit(self, unit_plan: UnitPlan) -> None:
        unit = _Unit(unit_plan, len(unit_plan.gates))  # a restored run replays resolutions (start)
        self.units.append(unit)
        self.by_node[unit_plan.node] = unit
        for gate in unit_plan.gates:
            self.gated.setdefault(gate, []).append(unit)
        if unit_plan.mode == "container":
            self.containers[unit_plan.node] = unit
            self.seq.add(unit)
            return
        loop_id, iteration = self.where
        own = (unit_plan.node, self.run_id_of(unit_plan.node), loop_id, iteration, None)
        send = self.root.send
        for segment in unit_plan.segments:
            if segment.text is not None:
                leaf = _Leaf(send, own, segment.text, closed=True)
            else:
                node, output = segment.node or "", segment.output
                source = (
                    (node, self.run_id_of(node), loop_id, iteration, output)
                    if segment.live
                    else own[:4] + (output,)
                )
                leaf = _Leaf(send, source)
                if segment.node is None:  # an output binding's value that is not a node's
                    if segment.scoped is not None:
                        self._fill_scoped(leaf, segment.scoped)
                elif node in self.plan.watch:
                    self.leaves_of.setdefault(node, []).append((leaf, segment))
                else:  # a node outside this scope: resolved before the scope started
                    self._fill(leaf, segment, self.state.find_node_run(node))
                if output is not None:
                    unit.bound.append((leaf, output))
            unit.leaves.append(leaf)
            unit.add(leaf)
        if unit_plan.mode == "answer":
            tail = _Leaf(send, own)
            unit.leaves.append(tail)
            unit.add(tail)
        unit.seal()
        self.seq.add(unit)

    # ---------------------------------------------------------------- feeding

    def delta(self, node_id: str, text: str) -> None:
        """Live text of ``node_id``'s streamed output (its deltas)."""
        for leaf, segment in self.leaves_of.get(node_id, ()):
            if segment.live:
                leaf.write(text)

    def resolved(self, run: NodeRun) -> None:
        """``run`` resolved (succeeded, failed, skipped or cancelled): fill the segments that
        read it, open the units it gated, finish its own unit."""
        nid = run.node_id
        if nid not in self.plan.watch:
            return
        for leaf, segment in self.leaves_of.get(nid, ()):
            self._fill(leaf, segment, run)
        for gated in self.gated.get(nid, ()):
            if gated.open_gate():
                self.opening.append(gated)
        unit = self.by_node.get(nid)
        if unit is None or unit.done:
            return
        unit.done = True
        if unit.plan.mode == "container":
            for item in unit.children:
                if isinstance(item, _Seq) and not item.sealed:
                    item.seal()
            unit.seal()
        elif unit.plan.mode == "answer" and run.status is NodeRunStatus.succeeded and run.outputs is not None:
            self._finish_answer(unit, str(to_text(run.outputs.get("answer", ""))))
        elif (
            unit.plan.mode == "outputs" and run.status is NodeRunStatus.succeeded and run.outputs is not None
        ):
            self._finish_outputs(unit, run.outputs)
        else:
            self._abort(unit, keep=run.status is NodeRunStatus.succeeded)

    def settle(self) -> None:
        """Open the units whose gates all resolved. Called once the resolution's edges
        (and the skips they propagate) are marked, so a unit on a branch that was not
        taken is skipped before it could open."""
        opening, self.opening = self.opening, []
        for unit in opening:
            unit.force_open()

    def finish(self) -> None:
        """The scope run ended: units whose node did not resolve are dropped (rule 4)."""
        for unit in self.units:
            if not unit.done:
                unit.done = True
                if unit.plan.mode == "container":
                    for item in unit.children:
                        if isinstance(item, _Seq):
                            item.seal()
                    unit.seal()
                else:
                    self._abort(unit, keep=False)

    def _fill(self, leaf: _Leaf, segment: Segment, run: NodeRun | None) -> None:
        if leaf.closed:
            return
        if segment.only_live:
            leaf.close()
            return
        if segment.fallback and run is not None and run.status is NodeRunStatus.skipped:
            return  # the binding's default: the unit's node gives it
        value = _segment_text(segment, run)
        if value is _BLOCKED:
            return  # left open: the unit's tail decides (the render will fail or differ)
        text = str(value)
        if text.startswith(leaf.written):
            leaf.write(text[len(leaf.written) :])
        leaf.close()

    def _fill_scoped(self, leaf: _Leaf, sel: Selector) -> None:
        """An ``inputs`` / ``sys`` value: known from the run's start."""
        try:
            value = to_text(resolve_selector(self.state, sel))
        except (ReferenceFailed, jinja2.TemplateRuntimeError):
            return  # left open: the unit's node decides (it fails or prints its default)
        leaf.write(str(value))
        leaf.close()

    def _finish_outputs(self, unit: _Unit, outputs: dict[str, Any]) -> None:
        """The unit's node produced ``outputs``: each binding still open gets its value,
        beyond what it already sent (rule 5); then the unit is complete."""
        for leaf, name in unit.bound:
            if leaf.closed:
                continue
            try:
                text = str(to_text(outputs.get(name)))
            except jinja2.TemplateRuntimeError:
                text = ""
            if text.startswith(leaf.written):
                leaf.write(text[len(leaf.written) :])
        self._abort(unit, keep=True)

    def _finish_answer(self, unit: _Unit, rendered: str) -> None:
        """The unit's node rendered ``rendered``: send what the segments did not (rule 5)."""
        sent = ""
        open_leaf: _Leaf | None = None
        for leaf in unit.leaves:
            sent += leaf.written
            if not leaf.closed:
                open_leaf = leaf
                break
        if open_leaf is not None:
            for leaf in unit.leaves[unit.leaves.index(open_leaf) + 1 :]:
                leaf.buf.clear()
                leaf.written = ""
            if rendered.startswith(sent):
                open_leaf.write(rendered[len(sent) :])
        for leaf in unit.leaves:
            leaf.closed = True
        if unit.live:
            unit.advance()
            if unit.closed and unit.parent is not None and unit.parent.live:
                unit.parent.advance()

    def _abort(self, unit: _Unit, keep: bool) -> None:
        for leaf in unit.leaves:
            if not keep:
                leaf.drop()
            leaf.closed = True
        unit.gates = 0
        unit.opened = True
        if unit.live:
            unit.advance()
            if unit.closed and unit.parent is not None and unit.parent.live:
                unit.parent.advance()
        elif unit.wanted:
            unit.force_open()


def _segment_text(segment: Segment, run: NodeRun | None) -> Any:
    """The text the template prints for ``segment`` (module rule 2), or ``_BLOCKED``."""
    if run is None:
        return _BLOCKED
    if run.status is NodeRunStatus.skipped:
        return ""
    if run.outputs is None or not (run.status is NodeRunStatus.succeeded or run.handles):
        return _BLOCKED  # failed or cancelled without a branch: the unit will not render
    env, value = template_env(), node_view(run)
    for kind, key in segment.steps:
        value = env.getattr(value, key) if kind == "attr" else env.getitem(value, key)
        if isinstance(value, jinja2.Undefined):
            return _BLOCKED
    try:
        return to_text(value)
    except jinja2.TemplateRuntimeError:
        return _BLOCKED
