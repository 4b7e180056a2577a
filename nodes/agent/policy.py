"""The agent's risk gate: which tool calls run at once and which need a person's yes.

Tools declare a risk level and the gate reads the *declared* level,
never a value the run could change; a level that cannot be read counts as HIGH
(write). Here:

- :func:`declared_risk` reads a tool's declared level: ``read`` (also ``readonly``,
  ``read_only``, ``low``) is read-only; ``write`` and everything else - ``None``, a
  typo, ``"medium"`` - is :attr:`Risk.write`.
- :class:`RiskPolicy` is the workflow's decision: write-level tools run only after a
  ``confirm`` interrupt is answered yes, unless the workflow allows them (all of them
  with ``allow_write_tools: true``, or by name).
- :func:`confirm_payload` / :func:`parse_confirmation` are the interrupt's question
  and the reading of the answer (``approve``/``reject`` by id or label, yes/no words
  in English and Chinese; anything else asks again).
- A refused call is not run: :func:`rejection_message` is the tool result the model
  gets instead, so the loop goes on with read-only tools.
- :class:`RiskGate` applies the policy in a running node: :meth:`RiskGate.check` pauses
  before a call that needs a yes, :meth:`RiskGate.decide` reads the answer on resume.
  Every kind that runs tools (``tool_call``, ``agent``) is gated the same way, on by
  default: a model can be talked into calling a destructive tool by text it reads (a
  tool result, a web page), so the node that runs the tool asks first, whichever it is.
  A node inside a loop body cannot pause (a round cannot be checkpointed half-way): there
  a call that needs a yes fails the node with reason ``interrupt_in_loop`` instead.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "APPROVE",
    "CONFIRM_KIND",
    "READ_LEVELS",
    "REJECT",
    "Risk",
    "RiskGate",
    "RiskPolicy",
    "confirm_payload",
    "declared_risk",
    "parse_confirmation",
    "rejection_message",
]

#: Interrupt kind of the write-tool confirmation.
CONFIRM_KIND = "confirm"
APPROVE, REJECT = "approve", "reject"

#: Declared levels that mean read-only; every other value (None, a typo, "medium") is write.
READ_LEVELS = frozenset({"read", "readonly", "read_only", "read-only", "low"})
_READ = READ_LEVELS
_YES = frozenset(
    {
        APPROVE,
        "yes",
        "y",
        "allow",
        "ok",
        "okay",
        "confirm",
        "run",
        "run it",
        "allow this call",
        "确认",
        "同意",
        "是",
        "好",
        "允许",
        "可以",
        "执行",
    }
)
_NO = frozenset(
    {
        REJECT,
        "no",
        "n",
        "deny",
        "refuse",
        "cancel",
        "stop",
        "do not run it",
        "don't run it",
        "拒绝",
        "否",
        "不",
        "不要",
        "取消",
        "不允许",
        "不同意",
    }
)


class Risk(StrEnum):
    """A tool's declared risk: read-only, or writes something (needs confirmation)."""

    read = "read"
    write = "write"


def declared_risk(value: Any) -> Risk:
    """The declared level as a :class:`Risk`; unknown or missing counts as write."""
    if isinstance(value, Risk):
        return value
    if isinstance(value, str) and value.strip().casefold() in _READ:
        return Risk.read
    return Risk.write


@dataclass(frozen=True)
class RiskPolicy:
    """What the workflow allows without asking: ``allow_all`` write tools, or those in ``allowed``."""

    allow_all: bool = False
    allowed: frozenset[str] = frozenset()

    @classmethod
    def from_config(cls, value: bool | Iterable[str] | None) -> RiskPolicy:
        """From a node config value: ``true`` (every write tool), ``false``/None, or a list of names."""
        if value is None or isinstance(value, bool):
            return cls(allow_all=bool(value))
        return cls(allowed=frozenset(value))

    def needs_confirmation(self, tool: str, risk: Any) -> bool:
        """True when a call of ``tool`` (declared ``risk``) must be confirmed by a person first."""
        if declared_risk(risk) is Risk.read:
            return False
        return not (self.allow_all or tool in self.allowed)


def _arguments_text(arguments: Any, limit: int = 800) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            pass
    text = (
        arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    )
    return text if len(text) <= limit else text[:limit] + "…"


def confirm_payload(
    tool: str, arguments: Any, description: str = "", error: str | None = None
) -> dict[str, Any]:
    """The ``confirm`` interrupt payload: ``question``, ``options`` (approve/reject), ``tool``, ``arguments``."""
    args = _arguments_text(arguments)
    what = f" ({description})" if description else ""
    payload: dict[str, Any] = {
        "question": f"The agent wants to run the write-level tool {tool!r}{what} with {args}. Allow it?",
        "options": [{"id": APPROVE, "label": "Allow this call"}, {"id": REJECT, "label": "Do not run it"}],
        "tool": tool,
        "arguments": args,
        "risk": Risk.write.value,
    }
    if error:
        payload["error"] = error
    return payload


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).strip().strip("\"'`“”‘’「」[]()").strip()
    return re.sub(r"\s+", " ", text.rstrip(".。!！?？")).casefold()


def parse_confirmation(answer: Any) -> bool | None:
    """True (approved), False (rejected) or None (not understood: ask again)."""
    if isinstance(answer, bool):
        return answer
    if isinstance(answer, dict):
        answer = answer.get("id", answer.get("answer"))
    if not isinstance(answer, str):
        return None
    folded = _fold(answer)
    if folded in _YES:
        return True
    if folded in _NO:
        return False
    return None


class RiskGate:
    """The policy applied in a running node (``ctx`` is its :class:`~engine.context.NodeContext`)."""

    def __init__(self, policy: RiskPolicy) -> None:
        self.policy = policy

    def check_scope(self, ctx: Any, tools: Iterable[tuple[str, Any]]) -> None:
        """Before the first round: a node inside a loop body whose tools (``(name, risk)``)
        include one that would need a person's yes fails at once, before any model call,
        whatever the model would have chosen (the rule does not depend on the model).

        Raises:
            NodeFailed: (``interrupt_in_loop``) naming the gated tools and the two ways out.
        """
        loop_id = getattr(ctx.node_run, "loop_id", None)
        gated = [name for name, risk in tools if self.policy.needs_confirmation(name, risk)]
        if loop_id is not None and gated:
            from engine.errors import NodeFailed

            raise NodeFailed(
                f"tools {', '.join(map(repr, gated))} are write-level and need a person's confirmation, "
                f"which cannot be asked inside loop {loop_id!r}; declare their risk as read, or allow "
                "them with allow_write_tools",
                node_id=ctx.node_id,
                reason="interrupt_in_loop",
            )

    def check(self, ctx: Any, tool: str, risk: Any, arguments: Any, description: str = "") -> None:
        """Return when the call of ``tool`` may run now; else pause the node for a ``confirm``.

        Raises:
            InterruptRequested: the call needs a person's yes (the node resumes with the answer).
            NodeFailed: (``interrupt_in_loop``) it needs one but the node runs inside a loop body.
        """
        if not self.policy.needs_confirmation(tool, risk):
            return
        loop_id = getattr(ctx.node_run, "loop_id", None)
        if loop_id is not None:
            from engine.errors import NodeFailed

            raise NodeFailed(
                f"tool {tool!r} is write-level and needs a person's confirmation, which cannot be "
                f"asked inside loop {loop_id!r}; declare the tool's risk as read, or allow it with "
                "allow_write_tools",
                node_id=ctx.node_id,
                reason="interrupt_in_loop",
            )
        ctx.interrupt(CONFIRM_KIND, confirm_payload(tool, arguments, description))

    @staticmethod
    def decide(ctx: Any, payload: dict[str, Any]) -> bool:
        """The resumed node's answer to its ``confirm`` (``payload``: the question asked):
        True to run the call, False to refuse it.

        Raises:
            InterruptRequested: the answer is neither yes nor no: the same question again, with
                an ``error`` saying why.
        """
        answer = ctx.resume.answer
        decision = parse_confirmation(answer)
        if decision is None:
            ctx.interrupt(CONFIRM_KIND, {**payload, "error": f"{answer!r} is neither approve nor reject"})
        return bool(decision)


def rejection_message(tool: str) -> str:
    """The tool result the model gets when a person refused the call."""
    return (
        f"The user did not allow the write-level tool {tool!r} to run; it was not executed. "
        "Continue with read-only tools, or answer with what you have."
    )
