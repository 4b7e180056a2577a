"""The planning agent's whiteboard: plan model, atomic updates, stop gate, ask payloads.

Pure functions and values only (no I/O, no model calls), used by ``nodes/agent/node.py``.

**Plan.** A :class:`Plan` is a goal and ordered :class:`PlanStep` s; a step is
``pending`` / ``in_progress`` / ``done`` / ``skipped`` / ``blocked`` (with a
``blocker`` text) and may be flagged ``needs_replan``. Plans round-trip through
:meth:`Plan.to_dict` / :meth:`Plan.from_dict`: while a run is paused the plan is part of
the agent's :class:`~schemas.run.PendingContext` on its node run, in the run state.

**update_plan** (:func:`apply_plan_updates`) takes a batch ``{"updates": [...]}`` of
operations, applied in order to a copy and returned only when every one succeeded -
a failing operation leaves the plan exactly as it was (the whole batch is rolled back):

- ``set_plan`` ``{goal?, steps}``: creates the plan; refused when one exists (use
  ``replace_plan``, which keeps the finished work).
- ``update_step`` ``{step_id, status?, blocker?, needs_replan?, note?}``: changes one
  step. Leaving ``blocked`` clears the blocker.
- ``replace_plan`` ``{goal?, steps}``: a new list of steps that keeps the stable done
  steps: a new step with the id of a done step stays done (with its note), and done
  steps the new list does not name are kept first, in their old order. Clears every
  ``needs_replan`` flag.

Steps are strings (a title) or ``{id?, title, status?}``; missing ids are numbered.

**Stop gate** (:func:`stop_gate`): the problems that forbid stopping, in this order -
a plan was required but never made (``plan_missing``); a step is not done, skipped or
blocked (``steps_open``); a blocked step has no blocker (``blocker_missing``); a step
needs replanning (``needs_replan``); a business tool ran since the last plan update
(``results_unrecorded`` - only once a plan exists: an agent that never planned and
was not asked to has nothing to record). :func:`gate_feedback` words them as the
``<stop_gate_feedback>`` message the loop continues with.

**Plan requests** (:func:`plan_requested`): the user explicitly asked for a plan
("计划模式", "先制定一个计划", "plan mode", "make a plan first", "update the plan after
each step", ...) - a UI/state contract, not a judgement of complexity; a negated
request ("不需要计划", "no plan needed") does not count.

**ask_agent** (:func:`parse_ask`): a question with 3-5 distinct options and the hard
block it is for (``missing_input``, ``tool_unavailable``, ``goal_unclear``);
:func:`resolve_answer` maps the person's reply (option id or label, or free text) to
the text the model receives.

**Pending context** (:class:`schemas.run.PendingContext`): what a paused agent needs
to go on from another process - the full message list, the loop state, the id of the
tool call waiting for the person (the ask, or a write tool to confirm), the plan and
the counters. It is kept on the waiting node run, so it is part of the run state and
checkpointed with it; the interrupt payload carries its ``pending_id`` so a resume
only ever continues the context it paused with.
"""

from __future__ import annotations

import copy
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "ASK_REASONS",
    "ASK_TOOL",
    "ASK_TOOL_SCHEMA",
    "INTERNAL_TOOLS",
    "MAX_STEPS",
    "PLAN_TOOL",
    "PLAN_TOOL_SCHEMA",
    "AskError",
    "AskRequest",
    "GateProblem",
    "Plan",
    "PlanStep",
    "PlanUpdateError",
    "StepStatus",
    "apply_plan_updates",
    "gate_feedback",
    "parse_ask",
    "parse_arguments",
    "plan_requested",
    "resolve_answer",
    "stop_gate",
]

#: Names of the agent's own tools; business tools with these names are dropped.
PLAN_TOOL = "update_plan"
ASK_TOOL = "ask_agent"
INTERNAL_TOOLS = frozenset({PLAN_TOOL, ASK_TOOL})

MAX_STEPS = 30
MAX_TITLE = 300
MAX_TEXT = 1000


class StepStatus(StrEnum):
    """Lifecycle of a plan step."""

    pending = "pending"
    in_progress = "in_progress"
    done = "done"
    skipped = "skipped"
    blocked = "blocked"


#: Statuses that let the agent stop.
FINISHED = frozenset({StepStatus.done, StepStatus.skipped, StepStatus.blocked})


class PlanUpdateError(ValueError):
    """An update_plan batch was refused; nothing was applied. The message is for the model."""


# ============================================================================ plan model


@dataclass
class PlanStep:
    """One step of the plan."""

    id: str
    title: str
    status: StepStatus = StepStatus.pending
    blocker: str | None = None
    needs_replan: bool = False
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``status`` as its string)."""
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status.value,
            "blocker": self.blocker,
            "needs_replan": self.needs_replan,
            "note": self.note,
        }


@dataclass
class Plan:
    """The agent's whiteboard. ``version`` counts applied update batches."""

    goal: str
    steps: list[PlanStep] = field(default_factory=list)
    version: int = 1

    def step(self, step_id: str) -> PlanStep | None:
        """The step with ``step_id``, or None."""
        return next((s for s in self.steps if s.id == step_id), None)

    @property
    def finished(self) -> bool:
        """Every step done, skipped or blocked."""
        return all(s.status in FINISHED for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        """JSON form, read back by :meth:`from_dict`."""
        return {"goal": self.goal, "version": self.version, "steps": [s.to_dict() for s in self.steps]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        """The plan saved by :meth:`to_dict`.

        Raises:
            ValueError: not such a dict.
        """
        try:
            steps = [
                PlanStep(
                    id=str(s["id"]),
                    title=str(s["title"]),
                    status=StepStatus(s.get("status", "pending")),
                    blocker=s.get("blocker"),
                    needs_replan=bool(s.get("needs_replan", False)),
                    note=s.get("note"),
                )
                for s in data["steps"]
            ]
            return cls(goal=str(data.get("goal", "")), steps=steps, version=int(data.get("version", 1)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a saved plan: {exc}") from None

    def render(self) -> str:
        """The plan as text for the model: one line per step with its status."""
        lines = [f"Goal: {self.goal}" if self.goal else "Plan:"]
        for s in self.steps:
            extra = ""
            if s.status is StepStatus.blocked:
                extra += f" - blocker: {s.blocker or '(none given)'}"
            if s.needs_replan:
                extra += " - needs replanning"
            if s.note:
                extra += f" - note: {s.note}"
            lines.append(f"[{s.status.value}] {s.id}. {s.title}{extra}")
        return "\n".join(lines)


# ============================================================================ updates


def parse_arguments(arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """A tool call's arguments as an object (``""``/None -> ``{}``).

    Raises:
        ValueError: not JSON, or not a JSON object (message for the model).
    """
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def _text(value: Any, what: str, limit: int, *, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise PlanUpdateError(f"{what} must be a non-empty string")
    value = value.strip()
    if len(value) > limit:
        raise PlanUpdateError(f"{what} is longer than {limit} characters")
    return value or None


def _status(value: Any, what: str) -> StepStatus:
    try:
        return StepStatus(value)
    except ValueError:
        allowed = ", ".join(s.value for s in StepStatus)
        raise PlanUpdateError(f"{what} must be one of {allowed}, got {value!r}") from None


def _new_steps(raw: Any, what: str) -> list[PlanStep]:
    if not isinstance(raw, list) or not raw:
        raise PlanUpdateError(f"{what}.steps must be a non-empty array of steps")
    if len(raw) > MAX_STEPS:
        raise PlanUpdateError(f"{what}.steps has {len(raw)} steps; at most {MAX_STEPS}")
    steps: list[PlanStep] = []
    for i, item in enumerate(raw):
        where = f"{what}.steps[{i}]"
        if isinstance(item, str):
            item = {"title": item}
        if not isinstance(item, dict):
            raise PlanUpdateError(f"{where} must be a string or an object with a title")
        unknown = sorted(set(item) - {"id", "title", "status"})
        if unknown:
            raise PlanUpdateError(f"{where} has unknown field(s) {unknown} (allowed: id, title, status)")
        step_id = item.get("id")
        if step_id is not None:
            if isinstance(step_id, bool) or not isinstance(step_id, (str, int)) or not str(step_id).strip():
                raise PlanUpdateError(f"{where}.id must be a non-empty string")
            step_id = str(step_id).strip()
        status = _status(item["status"], f"{where}.status") if "status" in item else StepStatus.pending
        steps.append(
            PlanStep(
                id=step_id or "",
                title=_text(item.get("title"), f"{where}.title", MAX_TITLE) or "",
                status=status,
            )
        )
    ids = [s.id for s in steps if s.id]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise PlanUpdateError(f"{what}.steps: step ids must be unique, repeated: {dupes}")
    return steps


def _number(steps: list[PlanStep]) -> None:
    """Give every step without an id the next free number."""
    used = {s.id for s in steps if s.id}
    counter = 0
    for s in steps:
        if not s.id:
            counter += 1
            while str(counter) in used:
                counter += 1
            s.id = str(counter)
            used.add(s.id)


def _set_plan(plan: Plan | None, op: dict[str, Any], what: str) -> Plan:
    if plan is not None:
        raise PlanUpdateError(
            f"{what}: a plan already exists; use replace_plan to change it (done steps are kept) "
            "or update_step to change one step"
        )
    steps = _new_steps(op.get("steps"), what)
    _number(steps)
    return Plan(goal=_text(op.get("goal", ""), f"{what}.goal", MAX_TEXT, required=False) or "", steps=steps)


def _replace_plan(plan: Plan | None, op: dict[str, Any], what: str) -> Plan:
    if plan is None:
        raise PlanUpdateError(f"{what}: there is no plan to replace; use set_plan first")
    steps = _new_steps(op.get("steps"), what)
    done = {s.id: s for s in plan.steps if s.status is StepStatus.done}
    named = {s.id for s in steps if s.id}
    for s in steps:
        kept = done.get(s.id)
        if kept is not None:  # a stable done step stays done, whatever the new entry says
            s.status, s.note = StepStatus.done, kept.note
    carried = [copy.copy(s) for s in plan.steps if s.status is StepStatus.done and s.id not in named]
    merged = carried + steps
    if len(merged) > MAX_STEPS:
        raise PlanUpdateError(
            f"{what}: the kept done steps and the new steps make {len(merged)} steps; at most {MAX_STEPS}"
        )
    _number(merged)
    for s in merged:
        s.needs_replan = False
    goal = _text(op.get("goal"), f"{what}.goal", MAX_TEXT, required=False) if "goal" in op else plan.goal
    return Plan(goal=goal or "", steps=merged, version=plan.version)


def _update_step(plan: Plan | None, op: dict[str, Any], what: str) -> Plan:
    if plan is None:
        raise PlanUpdateError(f"{what}: there is no plan yet; create one with set_plan")
    raw_id = op.get("step_id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
        raise PlanUpdateError(
            f"{what}.step_id must be the id of a step ({', '.join(s.id for s in plan.steps)})"
        )
    step = plan.step(str(raw_id).strip())
    if step is None:
        raise PlanUpdateError(
            f"{what}: no step {str(raw_id)!r}; steps are {', '.join(s.id for s in plan.steps)}"
        )
    changes = set(op) & {"status", "blocker", "needs_replan", "note"}
    if not changes:
        raise PlanUpdateError(f"{what}: nothing to change (give status, blocker, needs_replan or note)")
    if "status" in op:
        step.status = _status(op["status"], f"{what}.status")
        if step.status is not StepStatus.blocked:
            step.blocker = None
    if "blocker" in op:
        blocker = _text(op["blocker"], f"{what}.blocker", MAX_TEXT, required=False)
        if blocker is not None and step.status is not StepStatus.blocked:
            raise PlanUpdateError(
                f"{what}: a blocker only goes with status 'blocked' (step {step.id} is {step.status.value})"
            )
        step.blocker = blocker
    if "needs_replan" in op:
        if not isinstance(op["needs_replan"], bool):
            raise PlanUpdateError(f"{what}.needs_replan must be true or false")
        step.needs_replan = op["needs_replan"]
    if "note" in op:
        step.note = _text(op["note"], f"{what}.note", MAX_TEXT, required=False)
    return plan


_OPERATIONS = {"set_plan": _set_plan, "update_step": _update_step, "replace_plan": _replace_plan}
_OP_FIELDS = {
    "set_plan": {"goal", "steps"},
    "replace_plan": {"goal", "steps"},
    "update_step": {"step_id", "status", "blocker", "needs_replan", "note"},
}


def apply_plan_updates(plan: Plan | None, arguments: str | Mapping[str, Any] | None) -> Plan:
    """Apply an update_plan batch atomically; returns the new plan (``plan`` is never modified).

    ``arguments`` is ``{"updates": [op, ...]}`` (a single op object is accepted too).

    Raises:
        PlanUpdateError: the batch is malformed or an operation fails; the message
            names the operation (``updates[i]``) and nothing was applied.
    """
    try:
        args = parse_arguments(arguments)
    except ValueError as exc:
        raise PlanUpdateError(str(exc)) from None
    updates = args.get("updates") if "updates" in args else ([args] if "operation" in args else None)
    if not isinstance(updates, list) or not updates:
        raise PlanUpdateError(
            'expected {"updates": [{"operation": "set_plan" | "update_step" | "replace_plan", ...}]}'
        )
    working = copy.deepcopy(plan)
    for i, op in enumerate(updates):
        what = f"updates[{i}]"
        if not isinstance(op, dict):
            raise PlanUpdateError(f"{what} must be an object with an operation")
        name = op.get("operation")
        if not isinstance(name, str) or name not in _OPERATIONS:
            raise PlanUpdateError(f"{what}.operation must be one of {', '.join(_OPERATIONS)}, got {name!r}")
        handler = _OPERATIONS[name]
        unknown = sorted(set(op) - _OP_FIELDS[name] - {"operation"})
        if unknown:
            raise PlanUpdateError(
                f"{what} ({name}) has unknown field(s) {unknown} "
                f"(allowed: {', '.join(sorted(_OP_FIELDS[name]))})"
            )
        working = handler(working, op, f"{what} ({name})")
    assert working is not None
    working.version = (plan.version + 1) if plan is not None else 1
    return working


# ============================================================================ stop gate


@dataclass(frozen=True, slots=True)
class GateProblem:
    """Why the agent may not stop yet: a stable ``code`` and a message for the model."""

    code: str
    message: str


def stop_gate(plan: Plan | None, *, plan_required: bool, tool_since_update: bool) -> list[GateProblem]:
    """Every reason the agent may not stop now (empty: it may). See the module docstring."""
    problems: list[GateProblem] = []
    if plan is None:
        if plan_required:
            problems.append(
                GateProblem(
                    "plan_missing",
                    "The user asked for a plan, but none was made. Create it "
                    "with update_plan (set_plan) and keep it updated as you work.",
                )
            )
        return problems
    open_steps = [s for s in plan.steps if s.status not in FINISHED]
    if open_steps:
        listed = "; ".join(f"{s.id} ({s.status.value}): {s.title}" for s in open_steps)
        problems.append(
            GateProblem(
                "steps_open",
                f"These steps are not finished: {listed}. Do them, or mark them "
                "done, skipped or blocked (with a blocker) using update_plan.",
            )
        )
    no_blocker = [s.id for s in plan.steps if s.status is StepStatus.blocked and not s.blocker]
    if no_blocker:
        problems.append(
            GateProblem(
                "blocker_missing",
                f"Blocked step(s) {', '.join(no_blocker)} have no blocker: "
                "say what blocks them (update_step with blocker).",
            )
        )
    replan = [s.id for s in plan.steps if s.needs_replan]
    if replan:
        problems.append(
            GateProblem(
                "needs_replan",
                f"Step(s) {', '.join(replan)} need replanning: revise the plan "
                "with replace_plan, or clear needs_replan.",
            )
        )
    if tool_since_update:
        problems.append(
            GateProblem(
                "results_unrecorded",
                "Tools ran since the last plan update: record their "
                "results in the plan with update_plan before answering.",
            )
        )
    return problems


def gate_feedback(problems: Iterable[GateProblem], plan: Plan | None) -> str:
    """The ``<stop_gate_feedback>`` user message that sends the agent back to work."""
    lines = ["<stop_gate_feedback>", "You cannot give the final answer yet:"]
    lines += [f"- {p.message}" for p in problems]
    if plan is not None:
        lines += ["Current plan:", plan.render()]
    lines.append("Continue working; give the final answer once the plan is complete.")
    lines.append("</stop_gate_feedback>")
    return "\n".join(lines)


# ============================================================================ plan requests

_EXPLICIT_PLAN = [
    r"计划模式",
    r"规划模式",
    r"(创建|制定|建立|做|列|写|给出|拟定|生成)(一个|一份|个|份)?(详细的?|执行|工作|分步)?(计划|规划)",
    r"先(做|列|写|定|拟|出)?(一个|一份|个|份)?(计划|规划)",
    r"(每一?步|逐步|每完成一步)[^。！？!?\n]{0,6}更新[^。！？!?\n]{0,4}(计划|规划)",
    r"按(照)?计划(执行|进行|来)",
    r"\bplan(ning)?[ -]mode\b",
    r"\b(make|create|write|draft|build|prepare|produce|set up|come up with|start with)\s+(a|an|the|your)?\s*"
    r"((detailed|short|clear|step[- ]by[- ]step|work|execution)\s+)?plan\b",
    r"\bplan (it |this |everything )?(out )?first\b",
    r"\b(with|use|using|follow) a plan\b",
    r"\bupdate (the|your) plan\b",
    r"\bstep[- ]by[- ]step plan\b",
]
_NEGATED_PLAN = [
    r"(不|无|别|不要|不用|不需要|无需|没必要)[^。！？!?\n]{0,6}(计划|规划)",
    r"\b(no|without|don'?t|do not|skip( the)?|never)\b[^.!?\n]{0,20}\bplan",
]
_PLAN_RE = re.compile("|".join(f"(?:{p})" for p in _EXPLICIT_PLAN), re.IGNORECASE)
_NEGATED_RE = re.compile("|".join(f"(?:{p})" for p in _NEGATED_PLAN), re.IGNORECASE)


def plan_requested(text: str | None) -> bool:
    """True when ``text`` (the last user message) explicitly asks for a plan (CN or EN)."""
    if not text:
        return False
    normal = unicodedata.normalize("NFKC", text)
    if _NEGATED_RE.search(normal):
        return False
    return _PLAN_RE.search(normal) is not None


# ============================================================================ ask_agent

ASK_REASONS = {
    "missing_input": "a required private input only the user has is missing",
    "tool_unavailable": "a required tool is unavailable",
    "goal_unclear": "the goal is unclear",
}
MIN_OPTIONS, MAX_OPTIONS = 3, 5


class AskError(ValueError):
    """An ask_agent call was refused (the message is fed back to the model)."""


@dataclass(frozen=True)
class AskRequest:
    """A validated question for the person."""

    question: str
    options: tuple[str, ...]
    reason: str

    def payload(self) -> dict[str, Any]:
        """The ``ask`` interrupt payload: question, options ``[{id, label}]`` (ids ``1``..), reason."""
        return {
            "question": self.question,
            "options": [{"id": str(i + 1), "label": label} for i, label in enumerate(self.options)],
            "reason": self.reason,
        }


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip().casefold()


def parse_ask(arguments: str | Mapping[str, Any] | None) -> AskRequest:
    """Validate an ask_agent call.

    Raises:
        AskError: missing question, fewer than 3 / more than 5 options, repeated or empty
            options, or a reason that is not a hard block.
    """
    try:
        args = parse_arguments(arguments)
    except ValueError as exc:
        raise AskError(str(exc)) from None
    question = args.get("question")
    if not isinstance(question, str) or not question.strip():
        raise AskError("ask_agent needs a non-empty 'question'")
    if len(question) > MAX_TEXT:
        raise AskError(f"the question is longer than {MAX_TEXT} characters")
    reason = args.get("reason")
    if reason not in ASK_REASONS:
        allowed = "; ".join(f"{k} ({v})" for k, v in ASK_REASONS.items())
        raise AskError(
            f"ask_agent is only for hard blocks; 'reason' must be one of: {allowed}. "
            "Otherwise keep working with what you have."
        )
    options = args.get("options")
    if not isinstance(options, list) or not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
        raise AskError(f"ask_agent needs {MIN_OPTIONS} to {MAX_OPTIONS} options the user can pick directly")
    labels: list[str] = []
    for i, option in enumerate(options):
        if isinstance(option, dict):
            option = option.get("label")
        if not isinstance(option, str) or not option.strip():
            raise AskError(f"options[{i}] must be a non-empty string")
        if len(option) > MAX_TITLE:
            raise AskError(f"options[{i}] is longer than {MAX_TITLE} characters")
        labels.append(option.strip())
    folded = [_fold(o) for o in labels]
    if len(set(folded)) != len(folded):
        raise AskError("the options must be different from each other")
    return AskRequest(question.strip(), tuple(labels), reason)


def resolve_answer(answer: Any, options: Iterable[Mapping[str, Any]]) -> str:
    """The text the model gets for the person's ``answer``: the label of the option it
    names (by id or label, ignoring case and spacing), else the answer itself."""
    if not isinstance(answer, str):
        return json.dumps(answer, ensure_ascii=False)
    wanted = _fold(answer).strip("[]().。 ")
    for option in options:
        if wanted in (_fold(str(option.get("id", ""))), _fold(str(option.get("label", "")))):
            return str(option.get("label", answer))
    return answer.strip()


def _schema_steps() -> dict[str, Any]:
    return {
        "type": "array",
        "maxItems": MAX_STEPS,
        "description": "step titles, or {id, title, status}",
        "items": {
            "type": ["string", "object"],
            "properties": {
                "id": {"type": ["string", "integer"]},
                "title": {"type": "string"},
                "status": {"type": "string", "enum": [s.value for s in StepStatus]},
            },
            "required": ["title"],
        },
    }


#: Parameters (JSON Schema) of the update_plan tool.
PLAN_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "updates": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "operation": {"type": "string", "enum": list(_OPERATIONS)},
                    "goal": {"type": "string"},
                    "steps": _schema_steps(),
                    "step_id": {"type": ["string", "integer"]},
                    "status": {"type": "string", "enum": [s.value for s in StepStatus]},
                    "blocker": {"type": "string", "description": "what blocks the step (status blocked)"},
                    "needs_replan": {"type": "boolean"},
                    "note": {"type": "string", "description": "result or remark for the step"},
                },
                "required": ["operation"],
            },
        }
    },
    "required": ["updates"],
}

#: Parameters (JSON Schema) of the ask_agent tool.
ASK_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string"},
        "options": {
            "type": "array",
            "minItems": MIN_OPTIONS,
            "maxItems": MAX_OPTIONS,
            "items": {"type": "string"},
        },
        "reason": {"type": "string", "enum": list(ASK_REASONS)},
    },
    "required": ["question", "options", "reason"],
}


# ============================================================================ pending context
# The pending context is :class:`schemas.run.PendingContext`, kept on the waiting node run.
