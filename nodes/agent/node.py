"""agent: the planning agent - a tool loop with a plan, questions and a stop gate.

The loop is the shared kernel :func:`nodes.agent.loop.run_agent_loop`; this node is the
:class:`PlanningHooks` it injects plus the tools it offers (config:
:class:`~schemas.nodes_agent.AgentConfig`). The pure rules live in
:mod:`nodes.agent.plan` (plan, stop gate, plan requests, ask payloads, pending context)
and :mod:`nodes.agent.policy` (risk gate).

**Tools**: the business tools - the tool-call node's graph,
HTTP/OpenAPI, workflow and MCP tools (open while the node runs), single-call model sub-agents (:func:`model_agent_spec`)
and the uploaded-file reader (:func:`file_reader_spec`) - plus ``update_plan`` and
``ask_agent``. A business tool named like an internal one is dropped (recorded in
``node_run.data["planning"]["dropped_tools"]``). Read-level tools are parallel-safe
(``parallel_tools``): consecutive ones in a round run concurrently; internal tools and
every other tool run alone.

**Hooks**, by tool name (``run_tool``): ``update_plan`` applies the batch atomically
(a refused batch is an error result, nothing changed) and clears "a tool ran since the
last plan update"; ``ask_agent`` validates the question and pauses with an ``ask``
interrupt ``{question, options, reason}``; a business tool whose declared risk needs
confirmation (:class:`~nodes.agent.policy.RiskPolicy`) pauses with a ``confirm``
interrupt; any other business tool runs and sets "a tool ran since the last plan
update". ``may_stop`` is the stop gate: while :func:`~nodes.agent.plan.stop_gate`
finds problems the reply is refused with ``<stop_gate_feedback>`` (the kernel keeps the
refused reply as context, not as the result); a third refusal fails the node with
:class:`PlanNotComplete` (``plan not complete``). ``request_control``: once a plan
exists and passes the gate, the next round may only answer (``tool_choice: none``).

**Pausing**: when a tool interrupts, the kernel records the paused
round; this node keeps a :class:`~schemas.run.PendingContext` - the full message
list, the loop state, the pending call id, plan and counters - on its waiting node
run (so in the run state, checkpointed with the run; node memory is not involved) and
adds its ``pending_id`` to the interrupt payload. **Resuming** (possibly in another
process, after a crash): the node runs again with ``ctx.resume``; it takes the context for
that ``pending_id`` from its node run (none there - a state edited by hand or saved by an
older version: the node fails with ``pending_context_missing``), turns the answer into the pending call's
result - for ``ask`` the chosen option's label or the free text; for ``confirm`` the
tool's own result when approved, :func:`~nodes.agent.policy.rejection_message` when
refused, the same question again (with an ``error``) when not understood - and the
kernel continues the SAME message chain. The node run (id, usage so far) is the one
that paused.

Outputs: ``answer``; ``plan`` (:meth:`~nodes.agent.plan.Plan.to_dict`, null when none
was made); ``history`` (``history_source`` plus this turn: the user's message, each
question asked and its answer once, the answer); ``asks`` (``{question, options,
answer}``); ``messages`` (the assistant/tool trail); ``usage``; ``cost`` (model +
tools); ``trace``; ``stop_reason``; ``rounds``. ``node_run.data["planning"]`` records the
plan, gate refusals, questions and confirmations.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.catalog import NodeExecutor
from engine.context import InterruptRequested, NodeContext, NodeResult
from engine.errors import NodeFailed
from engine.settings import Settings
from schemas.nodes_agent import AgentConfig, FileReaderTool, ModelAgentTool
from schemas.run import PendingContext

from ..llm.call import LLMRequest, call_llm, fit_messages
from ..llm.chat import (
    SYSTEM_SEPARATOR,
    add_usage,
    model_spec,
    recent_turns,
    registry_of,
    render_text,
    resolve_history,
    sampling,
)
from .calls import run_approved
from .loop import (
    AgentHooks,
    LoopSettings,
    LoopState,
    RequestControl,
    ToolCallContext,
    ToolOutcome,
    ToolSpec,
    batch_parallel_safe,
    run_agent_loop,
)
from .plan import (
    ASK_TOOL,
    ASK_TOOL_SCHEMA,
    INTERNAL_TOOLS,
    PLAN_TOOL,
    PLAN_TOOL_SCHEMA,
    AskError,
    Plan,
    PlanUpdateError,
    apply_plan_updates,
    gate_feedback,
    parse_ask,
    plan_requested,
    resolve_answer,
    stop_gate,
)
from .policy import (
    CONFIRM_KIND,
    Risk,
    RiskPolicy,
    confirm_payload,
    declared_risk,
    parse_confirmation,
    rejection_message,
)
from .tool_call import loop_tool_specs, mcp_tools

__all__ = [
    "AgentNode",
    "AgentStatus",
    "MAX_STOP_GATE_REFUSALS",
    "PlanNotComplete",
    "PlanningHooks",
    "file_reader_spec",
    "model_agent_spec",
    "upload_root",
]

#: Stop-gate refusals before the node fails.
MAX_STOP_GATE_REFUSALS = 2
#: Largest uploaded file the reader opens (bytes).
MAX_FILE_BYTES = 5 * 1024 * 1024

PLANNER_PROMPT = """You work on the user's task with tools, keeping a plan on a whiteboard.
- update_plan maintains the plan: set_plan creates it, update_step records progress (status pending, \
in_progress, done, skipped or blocked with a blocker; note the result), replace_plan revises it (done steps \
are kept). Record what your tools returned in the plan before you answer.
- ask_agent asks the user ONE question with 3 to 5 options they can pick. Use it only for a hard block: a \
required private input only the user has is missing (missing_input), a required tool is unavailable \
(tool_unavailable), or the goal is unclear (goal_unclear). Otherwise keep working with what you have.
- When every step is done, skipped or blocked, give the final answer."""

PLAN_TOOL_DESCRIPTION = (
    "Maintain your plan. updates is a list of operations applied together (all or none): "
    "set_plan {goal, steps}, update_step {step_id, status, blocker, needs_replan, note}, "
    "replace_plan {goal, steps} (keeps done steps)."
)
ASK_TOOL_DESCRIPTION = (
    "Ask the user one question with 3-5 options they can pick, ONLY when blocked: "
    "missing_input (a required private input only the user has), tool_unavailable, goal_unclear. "
    "The task pauses until the user answers; the answer comes back as this call's result."
)


class PlanNotComplete(NodeFailed):
    """The model kept stopping with the plan unfinished (more than 2 stop-gate refusals)."""

    reason = "plan_not_complete"


# ============================================================================ status


@dataclass
class AgentStatus:
    """The node's own state next to the kernel's (saved in ``LoopState.extra["planning"]``)."""

    plan: Plan | None = None
    plan_required: bool = False
    tool_since_update: bool = False
    refusals: int = 0
    gate: list[dict[str, Any]] = field(default_factory=list)
    asks: list[dict[str, Any]] = field(default_factory=list)
    confirmations: list[dict[str, Any]] = field(default_factory=list)
    question: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)

    def counters(self) -> dict[str, Any]:
        return {
            "plan_required": self.plan_required,
            "tool_since_update": self.tool_since_update,
            "refusals": self.refusals,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan.to_dict() if self.plan is not None else None,
            **self.counters(),
            "gate": self.gate,
            "asks": self.asks,
            "confirmations": self.confirmations,
            "question": self.question,
            "history": self.history,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> AgentStatus:
        plan = raw.get("plan")
        return cls(
            plan=Plan.from_dict(plan) if plan else None,
            plan_required=bool(raw.get("plan_required")),
            tool_since_update=bool(raw.get("tool_since_update")),
            refusals=int(raw.get("refusals", 0)),
            gate=list(raw.get("gate") or []),
            asks=list(raw.get("asks") or []),
            confirmations=list(raw.get("confirmations") or []),
            question=str(raw.get("question", "")),
            history=list(raw.get("history") or []),
        )


# ============================================================================ sub-agents


def model_agent_spec(ctx: NodeContext, agent: ModelAgentTool, default_model: str) -> ToolSpec:
    """A sub-agent that is one model call: ``{task}`` in, the reply text out (no loop, no tools).

    Its usage is added to this node run's usage and its cost is the tool's cost.
    """
    model = agent.model or default_model

    async def run(args: dict[str, Any], call: ToolCallContext) -> ToolOutcome:
        spec = model_spec(ctx, model)
        max_tokens = (
            spec.max_output_tokens
            if agent.max_tokens is None
            else min(agent.max_tokens, spec.max_output_tokens)
        )
        system = (
            ctx.render(agent.system_prompt, field=f"config.model_agents.{agent.name}.system_prompt")
            if agent.system_prompt
            else ""
        )
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": str(args.get("task", ""))})
        response = await call_llm(
            LLMRequest(model, messages, temperature=agent.temperature, max_tokens=max_tokens),
            registry=registry_of(ctx),
            cancel=ctx.cancel,
            node_id=ctx.node_id,
        )
        add_usage(ctx, response.usage)
        usage = response.usage
        return ToolOutcome(
            response.text or "",
            cost=usage.cost,
            data={"model": model, "tokens_in": usage.tokens_in, "tokens_out": usage.tokens_out},
        )

    params = {
        "type": "object",
        "properties": {
            "task": {"type": "string", "description": "what to do, with everything needed to do it"}
        },
        "required": ["task"],
        "additionalProperties": False,
    }
    description = agent.description or f"Ask model {model!r} to do one self-contained task; returns its text."
    return ToolSpec(
        agent.name,
        description,
        params,
        run,
        parallel_safe=True,
        risk="read",
        meta={"kind": "model_agent", "model": model},
    )


def upload_root(settings: Settings) -> Path:
    """Where uploaded files may be read: ``Settings.uploads`` (``FLOWLOOM_UPLOAD_DIR``, else
    ``<home>/uploads``), resolved."""
    return settings.uploads


def _read_text(path: Path, root: Path) -> str:
    """The text of ``path`` if it is a regular file inside ``root`` (symlinks resolved first)."""
    real = path.resolve()
    if not real.is_relative_to(root):
        raise PermissionError("the file is outside the upload directory")
    if not real.is_file():
        raise FileNotFoundError("no such file")
    if real.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"the file is larger than {MAX_FILE_BYTES} bytes")
    data = real.read_bytes()
    if b"\x00" in data[:8192]:
        raise ValueError("the file is binary, not text")
    return data.decode("utf-8", errors="replace")


def file_reader_spec(ctx: NodeContext, reader: FileReaderTool) -> ToolSpec:
    """A sub-agent reading the user's uploaded files (local paths under :func:`upload_root` only)."""
    files = ctx.resolve(reader.files, record_as="files")
    items = files if isinstance(files, list) else ([] if files is None else [files])
    uploads = [f for f in items if isinstance(f, dict) and isinstance(f.get("name"), str)]
    names = [f["name"] for f in uploads]

    async def run(args: dict[str, Any], call: ToolCallContext) -> ToolOutcome:
        wanted = args.get("file") or (names[0] if len(names) == 1 else None)
        chosen = next((f for f in uploads if f["name"] == wanted), None)
        if chosen is None:
            return ToolOutcome(
                f"no uploaded file {wanted!r}; files: {', '.join(names) or 'none'}", is_error=True
            )
        if not isinstance(chosen.get("path"), str):
            return ToolOutcome(
                f"file {chosen['name']!r} is not a local upload (only local uploads can be read)",
                is_error=True,
            )
        root = upload_root(ctx.deps.settings)
        path = Path(chosen["path"]).expanduser()
        path = path if path.is_absolute() else root / path
        try:
            text = await ctx.run_blocking(_read_text, path, root)
        except (OSError, ValueError) as exc:
            return ToolOutcome(f"cannot read {chosen['name']!r}: {exc}", is_error=True)
        offset = max(0, int(args.get("offset") or 0))
        part = text[offset : offset + reader.max_chars]
        end = offset + len(part)
        more = (
            f" (characters {offset}-{end} of {len(text)}; read on with offset={end})"
            if end < len(text)
            else ""
        )
        return ToolOutcome(
            f"{chosen['name']}{more}:\n{part}", data={"file": chosen["name"], "chars": len(text)}
        )

    params = {
        "type": "object",
        "properties": {
            "file": {"type": "string", "enum": names or [""], "description": "name of the uploaded file"},
            "offset": {"type": "integer", "description": "character to start from (default 0)"},
        },
        "required": [] if len(names) == 1 else ["file"],
        "additionalProperties": False,
    }
    description = f"{reader.description} Files: {', '.join(names) or 'none'}."
    return ToolSpec(
        reader.name,
        description,
        params,
        run,
        parallel_safe=True,
        risk="read",
        meta={"kind": "file_reader", "files": names},
    )


# ============================================================================ hooks


async def _internal(args: dict[str, Any], call: ToolCallContext) -> ToolOutcome:  # pragma: no cover
    raise RuntimeError(f"{call.name} is handled by the planning hooks")


def internal_specs(ask: bool) -> list[ToolSpec]:
    """``update_plan`` (and ``ask_agent`` when ``ask``), run by :class:`PlanningHooks`."""
    specs = [
        ToolSpec(
            PLAN_TOOL,
            PLAN_TOOL_DESCRIPTION,
            PLAN_TOOL_SCHEMA,
            _internal,
            risk="read",
            meta={"kind": "internal"},
        )
    ]
    if ask:
        specs.append(
            ToolSpec(
                ASK_TOOL,
                ASK_TOOL_DESCRIPTION,
                ASK_TOOL_SCHEMA,
                _internal,
                risk="read",
                meta={"kind": "internal"},
            )
        )
    return specs


class PlanningHooks(AgentHooks):
    """The planning agent's side of the kernel (module docstring)."""

    def __init__(
        self, ctx: NodeContext, status: AgentStatus, policy: RiskPolicy, *, parallel: bool, stream: bool
    ) -> None:
        self.ctx = ctx
        self.status = status
        self.policy = policy
        self.parallel = parallel
        self.stream = stream

    def sync(self, loop: LoopState) -> None:
        """Copy the node's status into the loop state (saved with it) and the node run."""
        loop.extra["planning"] = self.status.to_dict()
        self.ctx.node_run.data.setdefault("planning", {}).update(
            {
                "plan": loop.extra["planning"]["plan"],
                "gate": self.status.gate,
                "asks": self.status.asks,
                "confirmations": self.status.confirmations,
                "plan_required": self.status.plan_required,
            }
        )

    def problems(self) -> list[Any]:
        s = self.status
        return stop_gate(s.plan, plan_required=s.plan_required, tool_since_update=s.tool_since_update)

    async def run_tool(self, call: ToolCallContext, spec: ToolSpec, loop: LoopState) -> ToolOutcome:
        status = self.status
        if spec.name == PLAN_TOOL:
            try:
                status.plan = apply_plan_updates(status.plan, call.args)
            except PlanUpdateError as exc:
                return ToolOutcome(f"update_plan refused, the plan is unchanged: {exc}", is_error=True)
            status.tool_since_update = False
            self.sync(loop)
            return ToolOutcome(f"Plan updated (version {status.plan.version}).\n{status.plan.render()}")
        if spec.name == ASK_TOOL:
            try:
                ask = parse_ask(call.args)
            except AskError as exc:
                return ToolOutcome(str(exc), is_error=True)
            self.sync(loop)
            self.ctx.interrupt("ask", ask.payload())
        if self.policy.needs_confirmation(spec.name, spec.risk):
            self.sync(loop)
            self.ctx.interrupt(CONFIRM_KIND, confirm_payload(spec.name, call.arguments, spec.description))
        status.tool_since_update = True
        self.sync(loop)
        return await super().run_tool(call, spec, loop)

    def may_stop(self, loop: LoopState, reply: Any) -> str | None:
        problems = self.problems()
        status = self.status
        if problems:
            codes = [p.code for p in problems]
            if status.refusals >= MAX_STOP_GATE_REFUSALS:
                status.gate.append({"round": loop.round, "refused": codes, "failed": True})
                self.sync(loop)
                raise PlanNotComplete(
                    f"plan not complete: the agent tried to stop {status.refusals + 1} times with "
                    f"{', '.join(codes)} ({'; '.join(p.message for p in problems)})",
                    node_id=self.ctx.node_id,
                )
            status.refusals += 1
            status.gate.append({"round": loop.round, "refused": codes})
            self.sync(loop)
            return gate_feedback(problems, status.plan)
        status.gate.append({"round": loop.round, "passed": True})
        self.sync(loop)
        if self.stream and reply.text:
            self.ctx.delta(reply.text, "answer")
        return None

    def request_control(self, loop: LoopState) -> RequestControl:
        if self.status.plan is not None and not self.problems():
            return RequestControl(tool_choice="none")  # the plan is complete: only the answer is left
        return RequestControl()

    def can_batch(self, calls: list[ToolCallContext], loop: LoopState) -> list[list[ToolCallContext]]:
        return batch_parallel_safe(calls) if self.parallel else [[c] for c in calls]


# ============================================================================ the node


class AgentNode(NodeExecutor[AgentConfig], kind="agent"):
    """Runs the planning agent (module docstring)."""

    async def build_tools(
        self, ctx: NodeContext, mcp: Sequence[ToolSpec] = ()
    ) -> tuple[list[ToolSpec], list[str]]:
        """(business tools, names dropped because they collide with internal tools);
        ``mcp``: the tools of the node's open MCP servers.

        Read-level tools are marked parallel-safe when ``parallel_tools`` is on.

        Raises:
            NodeFailed: a graph tool's node is not a body root; a workflow tool cannot be found.
        """
        cfg = self.config
        specs = await loop_tool_specs(ctx, cfg) + list(mcp)
        specs += [model_agent_spec(ctx, a, cfg.model) for a in cfg.model_agents]
        if cfg.file_reader is not None:
            specs.append(file_reader_spec(ctx, cfg.file_reader))
        kept = [s for s in specs if s.name not in INTERNAL_TOOLS]
        dropped = [s.name for s in specs if s.name in INTERNAL_TOOLS]
        for s in kept:
            s.parallel_safe = cfg.parallel_tools and declared_risk(s.risk) is Risk.read
        return kept, dropped

    def settings(self, ctx: NodeContext) -> tuple[LoopSettings, Any, int]:
        cfg = self.config
        spec = model_spec(ctx, cfg.model)
        temperature, max_tokens = sampling(cfg, spec, None)
        return (
            LoopSettings(
                model=cfg.model,
                max_rounds=cfg.max_rounds,
                tool_only_cap=cfg.tool_only_cap,
                repeat_limit=cfg.repeat_limit,
                max_result_chars=cfg.max_result_chars,
                tool_timeout=cfg.tool_timeout,
                max_parse_retries=cfg.max_parse_retries,
                protocol=cfg.mode,
                temperature=temperature,
                max_tokens=max_tokens,
                stream=False,  # the accepted answer is streamed by may_stop, never a refused one
            ),
            spec,
            max_tokens,
        )

    def opening(
        self, ctx: NodeContext, spec: Any, max_tokens: int, status: AgentStatus
    ) -> list[dict[str, Any]]:
        """System prompt (model default, node prompt, planner rules), history turns, the task."""
        cfg = self.config
        node_prompt = ctx.render(cfg.system_prompt, field="config.system_prompt") if cfg.system_prompt else ""
        system = SYSTEM_SEPARATOR.join(
            p for p in (spec.default_system_prompt, node_prompt, PLANNER_PROMPT) if p and p.strip()
        )
        question = render_text(ctx, cfg.user_prompt, "user_prompt")
        status.question = question
        status.history = resolve_history(ctx, cfg)
        status.plan_required = cfg.plan == "required" or plan_requested(question)
        if status.plan_required:
            system += "\n- The user asked for a plan: create it with update_plan before anything else."
        messages = [{"role": "system", "content": system}] + recent_turns(status.history, cfg.history)
        messages.append({"role": "user", "content": question})
        return fit_messages(messages, max_input_tokens=spec.max_context - max_tokens, node_id=ctx.node_id)

    async def run(self, ctx: NodeContext) -> NodeResult:
        async with mcp_tools(ctx, self.config) as mcp:
            return await self._run(ctx, mcp)

    async def _run(self, ctx: NodeContext, mcp: list[ToolSpec]) -> NodeResult:
        """The planning loop with the config's tools plus ``mcp`` (open while this runs)."""
        cfg = self.config
        settings, spec, max_tokens = self.settings(ctx)
        business, dropped = await self.build_tools(ctx, mcp)
        tools = business + internal_specs(cfg.ask)
        ctx.node_run.data.setdefault("planning", {})["dropped_tools"] = dropped
        messages: list[dict[str, Any]] | None = None
        loop: LoopState | None = None
        tool_result: ToolOutcome | None = None
        if ctx.resume is None:
            status = AgentStatus()
            messages = self.opening(ctx, spec, max_tokens, status)
        else:
            pending, loop, status = self._restore(ctx)
            tool_result = await self._answer(
                ctx, pending, loop, status, {t.name: t for t in business}, settings
            )
        hooks = PlanningHooks(
            ctx,
            status,
            RiskPolicy.from_config(cfg.allow_write_tools),
            parallel=cfg.parallel_tools,
            stream=cfg.stream,
        )
        if loop is not None:
            hooks.sync(loop)
        try:
            result = await run_agent_loop(
                ctx,
                settings=settings,
                messages=messages,
                tools=tools,
                hooks=hooks,
                state=loop,
                tool_result=tool_result,
            )
        except InterruptRequested as request:
            # Resuming, ``loop`` is the kernel's live state; the kernel refreshes
            # data["agent_state"] only for pauses in its main loop, not for a second pause
            # among the remaining calls of the resumed round.
            raw = loop.to_dict() if loop is not None else dict(ctx.node_run.data.get("agent_state") or {})
            self._pause(ctx, request, status, raw)
            raise
        ctx.node_run.pending = None
        return self._result(ctx, result, status, tools)

    # ------------------------------------------------------------------ pause / resume

    def _pause(
        self, ctx: NodeContext, request: InterruptRequested, status: AgentStatus, raw: dict[str, Any]
    ) -> None:
        """Keep the pending context (``raw``: the loop state as a dict) on the waiting node run
        and tag the interrupt with its id."""
        paused: dict[str, Any] = raw.get("pending") or {}
        call: dict[str, Any] = next(
            (c for c in paused.get("calls", []) if c.get("id") == paused.get("call_id")), {}
        )
        pending = PendingContext(
            kind=request.kind,
            pending_id=uuid.uuid4().hex,
            node_run_id=ctx.node_run.id,
            call_id=str(paused.get("call_id", "")),
            tool=str(paused.get("tool", "")),
            arguments=str(call.get("arguments", "{}")),
            payload=dict(request.payload),
            messages=list(raw.pop("messages", [])),
            loop_state=raw,
            plan=status.plan.to_dict() if status.plan is not None else None,
            counters=status.counters(),
            asks=list(status.asks),
            created_at=time.time(),
        )
        request.payload["pending_id"] = pending.pending_id
        pending.payload = dict(request.payload)
        ctx.node_run.pending = pending

    def _restore(self, ctx: NodeContext) -> tuple[PendingContext, LoopState, AgentStatus]:
        """The context this node run paused with, from its node run.

        Raises:
            NodeFailed: (``pending_context_missing``) the node run holds no context for the
                answered pause (a state edited by hand, or saved by an older version).
        """
        assert ctx.resume is not None
        pending = ctx.node_run.pending
        wanted = getattr(ctx.resume.payload, "pending_id", None)  # ask / confirm payloads carry it
        if (
            pending is None
            or pending.node_run_id != ctx.node_run.id
            or pending.loop_state is None
            or (wanted is not None and pending.pending_id != wanted)
        ):
            raise NodeFailed(
                "the paused agent's context is not in its node run; the run cannot continue this pause",
                node_id=ctx.node_id,
                reason="pending_context_missing",
            )
        loop = LoopState.from_dict({**pending.loop_state, "messages": pending.messages})
        status = AgentStatus.from_dict(loop.extra.get("planning") or {})
        return pending, loop, status

    async def _answer(
        self,
        ctx: NodeContext,
        pending: PendingContext,
        loop: LoopState,
        status: AgentStatus,
        business: dict[str, ToolSpec],
        settings: LoopSettings,
    ) -> ToolOutcome:
        """The pending call's result from the person's answer (module docstring)."""
        assert ctx.resume is not None
        answer = ctx.resume.answer
        ctx.node_run.inputs.setdefault("answers", []).append(answer)
        if pending.kind == "ask":
            text = resolve_answer(answer, pending.payload.get("options") or [])
            status.asks.append(
                {
                    "question": pending.payload.get("question", ""),
                    "options": [o.get("label") for o in pending.payload.get("options") or []],
                    "answer": text,
                }
            )
            return ToolOutcome(f"The user answered: {text}")
        decision = parse_confirmation(answer)
        if decision is None:
            payload = {**pending.payload, "error": f"{answer!r} is neither approve nor reject"}
            ctx.interrupt(CONFIRM_KIND, payload)  # same pending context, same pending_id
        status.confirmations.append(
            {"tool": pending.tool, "arguments": pending.arguments, "approved": decision}
        )
        if not decision:
            return ToolOutcome(rejection_message(pending.tool), is_error=True)
        spec = business.get(pending.tool)
        if spec is None:
            return ToolOutcome(f"tool {pending.tool} is no longer available", is_error=True)
        raw = next(c for c in (loop.pending or {}).get("calls", []) if c.get("id") == pending.call_id)
        call = ToolCallContext(
            ctx,
            raw["id"],
            raw["name"],
            raw.get("arguments", "{}"),
            raw.get("args") or {},
            raw.get("round", loop.round),
            raw["index"],
            loop,
            spec,
        )
        status.tool_since_update = True
        return await run_approved(call, spec, settings)

    # ------------------------------------------------------------------ outputs

    def _result(
        self, ctx: NodeContext, result: Any, status: AgentStatus, tools: list[ToolSpec]
    ) -> NodeResult:
        history = list(status.history) + [{"role": "user", "content": status.question}]
        for ask in status.asks:
            options = "\n".join(f"{i + 1}. {label}" for i, label in enumerate(ask["options"]))
            history.append({"role": "assistant", "content": f"{ask['question']}\n{options}"})
            history.append({"role": "user", "content": ask["answer"]})
        history.append({"role": "assistant", "content": result.answer})
        ctx.node_run.data["tools"] = [
            {"name": t.name, **t.meta, "risk": t.risk, "parallel_safe": t.parallel_safe} for t in tools
        ]
        return NodeResult(
            {
                "answer": result.answer,
                "plan": status.plan.to_dict() if status.plan is not None else None,
                "history": history,
                "asks": status.asks,
                "messages": result.trail,
                "usage": result.usage.model_dump(),
                "cost": result.cost,
                "trace": result.trace,
                "stop_reason": result.stop_reason,
                "rounds": result.rounds,
            }
        )
