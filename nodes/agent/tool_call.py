"""tool_call: a model calling tools in rounds until it answers.

The loop itself is the shared kernel :func:`nodes.agent.loop.run_agent_loop` with the
default :class:`~nodes.agent.loop.AgentHooks` (serial tools, stop when the model answers);
this module only gathers the tools (config: :class:`~schemas.nodes_agent.ToolCallConfig`):

- **Graph tools**: a nested run of the node's body with ``roots=(tool root,)`` (the
  frozen body plan copied with :func:`dataclasses.replace`), in a child scope where
  ``<this node>.args`` / ``.call_id`` / ``.tool`` / ``.round`` read the call. Each call is
  iteration ``k`` of this node (node runs and events carry ``loop_id`` = this node), and
  ``node_run.data["tool_runs"][call_id]`` keeps the sub-graph's node runs. The result is
  the configured ``result`` (reference / object / template, resolved in the call's
  scope), else the last node's outputs as JSON; a failing sub-graph is an error result
  (the model may correct itself) - except cancellation and run limits, which end the run.
  Costs of LLM nodes inside the sub-graph are the tool's cost.
- **HTTP tools**: the HTTP request node's executor (its SSRF guard, redirects, size
  cap, timeout - one HTTP stack) on a request built from the operation: path parameters
  are percent-encoded into their ``{segment}`` (``/`` included, so no path traversal),
  query parameters merged into the URL, header parameters sent as headers, ``body`` as
  JSON. Model-provided values are passed to the request as data, never rendered as
  templates. The result is ``{"status_code", "json"|"body"}``; a 4xx/5xx is an error result.
- **Workflow tools**: the run's workflow source (``RunDeps.workflows``: in the server the
  tenant's published workflow, or the pinned ``version``; on the command line the
  workflow files of :mod:`engine.workflow_files`) gives the document when the node
  starts; its declared inputs are the parameters, and it runs as a child run of this
  run's tenant sharing its settings, models, memory and cancel token
  (:mod:`engine.child_runs`); its answer (else its outputs as JSON) is the result, and
  its LLM costs the tool's cost. A failed or paused child is an error result. A workflow
  that cannot be found (another tenant's included) or compiled fails the node, naming
  the tool (``reason: workflow_tool_unavailable``).
- **Builtin tools** (:mod:`nodes.agent.builtin_tools`): run in-process with the call's
  arguments plus the fixed ``arguments`` of the config; bad arguments are an error result.
- **MCP tools** (:mod:`nodes.agent.mcp_tools`): the servers of ``mcp_servers`` are connected
  and listed when the node starts (:func:`mcp_tools`) and closed when it ends, pauses or
  is cancelled; their tools join the others.
- **The stop tool**: returns ``ToolOutcome(stop=True)``.

**Risk gate** (:class:`~nodes.agent.policy.RiskGate`, the planning agent's gate, on by
default): before a write-level call runs, the node pauses with a ``confirm`` interrupt;
on resume an approved call runs and its result goes back to the model, a refused one
gets :func:`~nodes.agent.policy.rejection_message`, and the SAME message chain continues
(the loop state is kept in ``node_run.data["agent_state"]``, part of the run state).
``allow_write_tools: true`` opts out; a list allows the named tools. Levels: the
declared ``risk``; an HTTP operation without one is read for GET/HEAD/OPTIONS; a graph
tool without one is read when every node of its sub-graph only reads
(:func:`graph_tool_risk`), else write; anything unknown is write.

Messages: the model's default system prompt and the rendered ``system_prompt`` (the
kernel appends the data-fence contract), the last ``history`` turns, then the task
(``user_prompt``); fitted to the model's window before the first round.

Outputs: ``answer``, ``messages`` (the assistant/tool trail), ``usage`` (summed model
usage), ``cost`` (model + tools), ``trace``, ``stop_reason`` (``answer`` / ``stop_tool``
/ ``max_rounds``), ``rounds``. ``node_run.data["agent"]`` keeps the trace, the full tool
results by call id (:func:`nodes.agent.loop.get_tool_result`), notes and checkpoints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import urllib.parse
from typing import Any

import httpx

from engine.catalog import NodeExecutor
from engine.child_runs import WorkflowRecursion, run_child
from engine.context import NodeContext, NodeResult
from engine.errors import NodeFailed, ReferenceFailed, RunCancelledError, RunError, RunLimitExceeded
from engine.plain_errors import a_or_an
from engine.ports import WorkflowNotFound
from engine.references import render_template, resolve_value
from engine.workflow_files import WorkflowFiles
from schemas.node_records import ConfirmationRecord, ToolRunRecord, WorkflowRunRecord
from schemas.nodes_agent import (
    BuiltinToolRef,
    GraphTool,
    HttpTool,
    ToolCallConfig,
    ToolLoopConfig,
    WorkflowTool,
)
from schemas.nodes_flow import HttpBody, HttpRequestConfig
from schemas.run import NodeRun, RunState
from schemas.types import NodeRunStatus, RunStatus, VarType
from schemas.workflow import NodeBase

from ..http.request import HttpRequestNode
from ..llm.call import fit_messages
from ..llm.chat import (
    SYSTEM_SEPARATOR,
    add_usage,
    model_spec,
    recent_turns,
    render_text,
    resolve_history,
    sampling,
)
from .calls import restore_calls, run_approved
from .loop import (
    AgentHooks,
    LoopSettings,
    LoopState,
    ToolCallContext,
    ToolOutcome,
    ToolSpec,
    run_agent_loop,
)
from .loop_types import Risk
from .policy import RiskGate, RiskPolicy, rejection_message

__all__ = [
    "GatedHooks",
    "ToolCallNode",
    "builtin_tool_spec",
    "graph_tool_risk",
    "graph_tool_spec",
    "http_tool_spec",
    "loop_tool_specs",
    "mcp_tools",
    "stop_tool_spec",
    "workflow_tool_spec",
]


_JSON_TYPES = {
    VarType.string: "string",
    VarType.number: "number",
    VarType.boolean: "boolean",
    VarType.object: "object",
    VarType.array: "array",
}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _cost_of(state: RunState) -> float:
    """What the model calls of a tool's run cost (nested bodies and loop rounds included)."""
    spent = state.spent()
    return spent.cost if spent is not None else 0.0


# ----------------------------------------------------------------- graph tools


def graph_tool_risk(body: Any, root: str) -> tuple[Risk, str]:
    """``(level, why)`` of the graph tool starting at ``root`` of ``body`` (a compiled body
    plan): ``read`` when every node reachable from ``root`` is of a kind the catalog marks
    ``reads_only`` and its config writes nothing (an HTTP request with a read method),
    else ``write`` naming the first node that writes. Read from the workflow's own config,
    so a run cannot change it; a kind the catalog does not mark counts as writing."""
    catalog = body.catalog
    seen, todo = set(), [root]
    while todo:
        nid = todo.pop()
        if nid in seen or nid not in body.nodes:
            continue
        seen.add(nid)
        plan = body.nodes[nid]
        kind = plan.node.type
        spec = catalog.get(kind) if catalog is not None else None
        if spec is None or not spec.reads_only:
            return "write", f"node {nid!r} is {a_or_an(kind)} node"
        reason = plan.node.config.writes()
        if reason is not None:
            return "write", f"node {nid!r} {reason}"
        todo += [target for _, _, target in plan.out_edges]
    return "read", "every node of the sub-graph only reads"


def graph_tool_spec(ctx: NodeContext, tool: GraphTool, default_timeout: float | None) -> ToolSpec:
    """The :class:`ToolSpec` running body root ``tool.node`` and its descendants."""
    node_id = ctx.node_id
    body = ctx.plan.nodes[node_id].body
    if body is None or tool.node not in body.nodes:
        raise NodeFailed(
            f"config.tools: tool {tool.name!r} names node {tool.node!r}, which is not in this node's "
            f"body (set its parent to {node_id!r})",
            node_id=node_id,
        )
    if tool.node not in body.roots:
        raise NodeFailed(
            f"config.tools: tool {tool.name!r} names node {tool.node!r}, which has incoming edges; a "
            "tool starts at a body root (a body node with no incoming edge)",
            node_id=node_id,
        )
    sub = dataclasses.replace(body, roots=(tool.node,))

    async def run(args: dict[str, Any], call: ToolCallContext) -> ToolOutcome:
        data = ctx.node_run.data
        index = data.get("tool_run_count", 0)
        data["tool_run_count"] = index + 1
        state = ctx.child_scope({"args": args, "call_id": call.id, "tool": tool.name, "round": call.round})
        nested = await ctx.scheduler.run_nested(sub, state, node_id, index)
        runs = {nid: r for nid, r in state.node_runs.items() if nid != node_id}
        record: ToolRunRecord = {
            "index": index,
            "tool": tool.name,
            "node_runs": [r.model_dump(mode="json") for r in runs.values()],
        }
        data.setdefault("tool_runs", {})[call.id] = record
        cost = _cost_of(state)
        error = nested.ending
        if error is not None:
            if isinstance(error, (RunCancelledError, RunLimitExceeded)):
                raise error
            where = f" at node {error.node_id!r}" if error.node_id else ""
            record["error"] = str(error)
            return ToolOutcome(f"the tool failed{where}: {error}", is_error=True, cost=cost)
        try:
            if tool.result is None:
                ran = [
                    nid for nid in sub.order if nid in runs and runs[nid].status is NodeRunStatus.succeeded
                ]
                content = _json(runs[ran[-1]].outputs) if ran else "{}"
            elif isinstance(tool.result, str):
                content = render_template(
                    state, tool.result, node_id=node_id, field=f"config.tools.{tool.name}.result"
                )
            else:
                value = resolve_value(state, tool.result, node_id=node_id)
                content = value if isinstance(value, str) else _json(value)
        except (ReferenceFailed, RunError) as exc:
            return ToolOutcome(
                f"the tool ran but its result could not be read: {exc}", is_error=True, cost=cost
            )
        return ToolOutcome(content, cost=cost, data={"node_runs": len(runs)})

    risk, why = (tool.risk, "declared") if tool.risk is not None else graph_tool_risk(body, tool.node)
    return ToolSpec(
        tool.name,
        tool.description,
        tool.json_schema(),
        run,
        risk=risk,
        timeout=tool.timeout or default_timeout,
        meta={"kind": "graph", "node": tool.node, "risk_why": why},
    )


# ----------------------------------------------------------------- HTTP tools


class _HttpToolContext(NodeContext):
    """Context of the HTTP request executor run on a tool's behalf: templates get the
    call's values as variables (never as template source)."""

    __slots__ = ("tool_vars",)
    tool_vars: dict[str, Any]

    def render(self, source: str, *, field: str = "template", extra: Any = None) -> str:
        return render_template(
            self.state, source, extra={**self.tool_vars, **(extra or {})}, node_id=self.node.id, field=field
        )


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)) and not (
        isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value)
    ):
        return _json(value)
    return value


def http_tool_spec(ctx: NodeContext, op: HttpTool, default_timeout: float | None) -> ToolSpec:
    """The :class:`ToolSpec` calling ``op`` through the HTTP request node's guarded client."""
    header_params = [p for p in op.parameters if p.in_ == "header"]
    headers = dict(op.headers)
    for i, p in enumerate(header_params):
        headers[p.name] = f"{{{{ tool_h{i} }}}}"
    has_body = op.body_schema() is not None
    config = HttpRequestConfig(
        method=op.method,
        url="{{ tool_url }}",
        headers=headers,
        body=HttpBody(type="raw", raw="{{ tool_body }}", content_type="application/json")
        if has_body
        else HttpBody(),
        timeout=op.timeout,
        max_response_bytes=op.max_response_bytes,
        follow_redirects=True,
        raise_for_status=False,
    )
    # a node of the agent's id (its record and errors name the agent), built, not validated
    executor = HttpRequestNode(NodeBase.model_construct(id=ctx.node_id, type="http_request", config=config))

    async def run(args: dict[str, Any], call: ToolCallContext) -> ToolOutcome:
        base = ctx.render(op.base_url, field=f"config.http_tools.{op.operationId}.base_url").rstrip("/")
        values = _http_values(op, base, args, header_params, has_body)
        if isinstance(values, ToolOutcome):
            return values
        run_record = NodeRun(
            id=f"{ctx.node_run.id}:{call.id}",
            node_id=ctx.node_id,
            kind="http_request",
            status=NodeRunStatus.running,
            started_at=time.time(),
        )
        sub = _HttpToolContext(
            executor.node,
            ctx.plan,
            ctx.state,
            ctx.deps,
            ctx.cancel,
            run_record,
            ctx._emit,
            None,
            ctx.scheduler,
        )
        sub.tool_vars = values
        result = await executor.run(sub)
        return _http_outcome(op, result.outputs, run_record)

    description = op.description or op.summary
    return ToolSpec(
        op.operationId,
        description,
        op.json_schema(),
        run,
        risk=op.tool_risk,
        timeout=op.timeout + 5 if default_timeout is None else max(default_timeout, op.timeout + 5),
        meta={"kind": "http", "method": op.method, "path": op.path},
    )


def _http_values(
    op: HttpTool, base: str, args: dict[str, Any], header_params: list[Any], has_body: bool
) -> dict[str, Any] | ToolOutcome:
    """The template variables of one call of ``op`` with the model's ``args``: the URL
    (path parameters quoted, query parameters merged), each header parameter
    (``tool_h<i>``) and the JSON body; an error outcome when the URL is invalid."""
    path = op.path
    query: dict[str, Any] = {}
    values: dict[str, Any] = {}
    for p in op.parameters:
        if p.name not in args:
            continue
        value = args[p.name]
        if p.in_ == "path":
            text = value if isinstance(value, str) else _json(value)
            path = path.replace(f"{{{p.name}}}", urllib.parse.quote(text, safe=""))
        elif p.in_ == "query":
            query[p.name] = _query_value(value)
    for i, p in enumerate(header_params):
        value = args.get(p.name, "")
        values[f"tool_h{i}"] = value if isinstance(value, str) else _json(value)
    try:
        url = httpx.URL(base + path)
    except httpx.InvalidURL as exc:
        return ToolOutcome(f"invalid URL for {op.operationId}: {exc}", is_error=True)
    if query:
        url = url.copy_merge_params({k: v for k, v in query.items() if v is not None})
    values["tool_url"] = str(url)
    values["tool_body"] = (
        _json(args.get("body")) if has_body and "body" in args else ("{}" if has_body else "")
    )
    return values


def _http_outcome(op: HttpTool, out: dict[str, Any], run_record: NodeRun) -> ToolOutcome:
    """What the model is told of a response (status and JSON or body; an error from
    400 up) and what the call's record keeps."""
    status = out["status_code"]
    content: dict[str, Any] = {"status_code": status}
    if out.get("json") is not None:
        content["json"] = out["json"]
    else:
        content["body"] = out.get("body", "")
    record = {
        "method": op.method,
        "url": run_record.data.get("url"),
        "status_code": status,
        "response_bytes": run_record.data.get("response_bytes"),
    }
    return ToolOutcome(_json(content), is_error=status >= 400, data=record)


# ----------------------------------------------------------------- workflow tools


def _inputs_schema(plan: Any) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    for var in plan.workflow.inputs:
        schema: dict[str, Any] = {}
        if var.type in _JSON_TYPES:
            schema["type"] = _JSON_TYPES[var.type]
        if var.description:
            schema["description"] = var.description
        props[var.name] = schema
        if var.required and var.default is None:
            required.append(var.name)
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


async def workflow_tool_spec(ctx: NodeContext, tool: WorkflowTool, default_timeout: float | None) -> ToolSpec:
    """The :class:`ToolSpec` running workflow ``tool.workflow`` of the run's tenant (its
    published version, or ``tool.version``) from the run's workflow source as a child run.

    Raises:
        NodeFailed: (``workflow_tool_unavailable``) the source has no such workflow for
            this tenant, none published, no such version, or it does not compile; the
            message names the tool and the workflow.
    """
    from engine.compiler import compile_workflow
    from engine.errors import DefinitionError

    source = ctx.deps.workflows or WorkflowFiles.from_settings(ctx.deps.settings)
    try:
        assert ctx.plan.catalog is not None, "plans are compiled with a catalog"
        doc = await source.load(ctx.state.tenant_id, tool.workflow, tool.version)
        plan = compile_workflow(doc, catalog=ctx.plan.catalog, models=ctx.deps.models)
    except (WorkflowNotFound, DefinitionError) as exc:  # CompileError is a DefinitionError
        raise NodeFailed(
            f"config.workflow_tools: tool {tool.tool_name!r}: {exc}",
            node_id=ctx.node_id,
            reason="workflow_tool_unavailable",
        ) from None

    async def run(args: dict[str, Any], call: ToolCallContext) -> ToolOutcome:
        try:
            child = await run_child(
                plan,
                args,
                parent_deps=ctx.deps,
                cancel=ctx.cancel,
                caller=ctx.state.workflow_id,
                tenant_id=ctx.state.tenant_id,
                run_id=f"{ctx.state.run_id}.{ctx.node_id}.{call.id}",
                chat_id=ctx.state.sys.get("chat_id"),
                user_id=ctx.state.sys.get("user_id"),
            )
        except WorkflowRecursion as exc:
            return ToolOutcome(str(exc), is_error=True)
        spent = child.spent()
        if spent is not None:  # the child run is not stored: its model calls count in this node run
            add_usage(ctx, spent)
        cost = _cost_of(child)
        record: WorkflowRunRecord = {
            "workflow": tool.workflow,
            "run_id": child.run_id,
            "status": child.status.value,
        }
        if tool.version is not None:
            record["version"] = tool.version
        ctx.node_run.data.setdefault("workflow_runs", {})[call.id] = record
        if child.status is RunStatus.cancelled:
            raise RunCancelledError(f"workflow tool {tool.tool_name!r} was cancelled", node_id=ctx.node_id)
        if child.status is not RunStatus.succeeded:
            why = child.error.message if child.error is not None else f"it ended {child.status.value}"
            if child.status is RunStatus.paused:
                why = "it asks a person a question, which a workflow used as a tool cannot do"
            record["error"] = why
            return ToolOutcome(
                f"workflow {tool.workflow} failed: {why}", is_error=True, cost=cost, data=record
            )
        content = child.answer if child.answer else _json(child.outputs)
        return ToolOutcome(content, cost=cost, data=record)

    description = (
        tool.description or plan.workflow.description or plan.workflow.name or f"run workflow {tool.workflow}"
    )
    return ToolSpec(
        tool.tool_name,
        description,
        _inputs_schema(plan),
        run,
        risk=tool.risk,
        timeout=tool.timeout or default_timeout,
        meta={"kind": "workflow", "workflow": tool.workflow},
    )


# ----------------------------------------------------------------- builtin tools


def builtin_tool_spec(ref: BuiltinToolRef, default_timeout: float | None) -> ToolSpec:
    """The :class:`ToolSpec` of a builtin tool (:mod:`nodes.agent.builtin_tools`): its parameters
    without the fixed ``arguments``, which are merged into every call; risk ``read``."""
    from .builtin_tools import ToolArgumentError, builtin_tool

    tool = builtin_tool(ref.name)
    schema = dict(tool.parameters)
    schema["properties"] = {k: v for k, v in tool.parameters["properties"].items() if k not in ref.arguments}
    schema["required"] = [k for k in tool.parameters["required"] if k not in ref.arguments]

    async def run(args: dict[str, Any], call: ToolCallContext) -> ToolOutcome:
        try:
            return ToolOutcome(tool.call({**args, **ref.arguments}).text)
        except ToolArgumentError as exc:
            return ToolOutcome(f"{ref.tool_name}: {exc}", is_error=True)

    return ToolSpec(
        ref.tool_name,
        ref.description or tool.description,
        schema,
        run,
        parallel_safe=True,
        risk="read",
        timeout=ref.timeout or default_timeout,
        meta={"kind": "builtin", "tool": tool.name, "provider": tool.provider},
    )


# ----------------------------------------------------------------- stop tool


def stop_tool_spec(name: str, description: str) -> ToolSpec:
    """A tool that only signals: the loop ends after its round."""

    async def run(args: dict[str, Any], call: ToolCallContext) -> ToolOutcome:
        return ToolOutcome("stopped", stop=True)

    return ToolSpec(
        name,
        description,
        {"type": "object", "properties": {}, "additionalProperties": False},
        run,
        risk="read",
        meta={"kind": "stop"},
    )


# ----------------------------------------------------------------- the node


async def loop_tool_specs(ctx: NodeContext, cfg: ToolLoopConfig) -> list[ToolSpec]:
    """Specs of the business tools both tool-loop kinds have: graph tools (body roots),
    HTTP/OpenAPI operations, builtin tools, dataset searches and workflows, each with the
    node's ``tool_timeout``.

    Raises:
        NodeFailed: a graph tool's node is not a body root; a workflow tool cannot be found.
    """
    specs = [graph_tool_spec(ctx, t, cfg.tool_timeout) for t in cfg.tools]
    specs += [http_tool_spec(ctx, op, cfg.tool_timeout) for op in cfg.http_operations()]
    specs += [builtin_tool_spec(t, cfg.tool_timeout) for t in cfg.builtin_tools]
    if cfg.dataset_tools:
        from ..knowledge.dataset_tool import dataset_tool_spec

        specs += [dataset_tool_spec(ctx, t, i, cfg.tool_timeout) for i, t in enumerate(cfg.dataset_tools)]
    return specs + [await workflow_tool_spec(ctx, t, cfg.tool_timeout) for t in cfg.workflow_tools]


def mcp_tools(
    ctx: NodeContext, cfg: ToolLoopConfig
) -> contextlib.AbstractAsyncContextManager[list[ToolSpec]]:
    """The tools of the node's MCP servers, connected while the returned context is open
    (:func:`nodes.agent.mcp_tools.open_mcp_tools`; the SDK is imported only by nodes that use it).

    Raises (on entering):
        NodeFailed: a server is refused, unreachable, or lacks a tool the config names.
    """
    if not cfg.mcp_servers:
        return contextlib.nullcontext([])
    from .mcp_tools import open_mcp_tools

    named = {server.tool_name(t) for server in cfg.mcp_servers for t in server.tools or ()}
    return open_mcp_tools(ctx, cfg.mcp_servers, cfg.tool_timeout, set(cfg.tool_names()) - named)


class GatedHooks(AgentHooks):
    """The default hooks with the risk gate in front of every tool call (module docstring)."""

    def __init__(self, ctx: NodeContext, gate: RiskGate) -> None:
        self.ctx = ctx
        self.gate = gate

    async def run_tool(self, call: ToolCallContext, spec: ToolSpec, loop: LoopState) -> ToolOutcome:
        self.gate.check(self.ctx, spec.name, spec.risk, call.arguments, spec.description)
        return await super().run_tool(call, spec, loop)


class ToolCallNode(NodeExecutor[ToolCallConfig], kind="tool_call"):
    """Runs the tool loop (module docstring)."""

    async def build_tools(self, ctx: NodeContext) -> list[ToolSpec]:
        """Every tool of this node for this run.

        Raises:
            NodeFailed: a graph tool's node is not a body root; a workflow tool cannot be found.
        """
        cfg = self.config
        tools = await loop_tool_specs(ctx, cfg)
        if cfg.stop_tool is not None:
            tools.append(stop_tool_spec(cfg.stop_tool.name, cfg.stop_tool.description))
        return tools

    def opening(self, ctx: NodeContext, spec: Any, max_tokens: int) -> list[dict[str, Any]]:
        """System prompt (model default + node prompt), history turns, the task; fitted to the window."""
        cfg = self.config
        node_prompt = ctx.render(cfg.system_prompt, field="config.system_prompt") if cfg.system_prompt else ""
        system = SYSTEM_SEPARATOR.join(
            p for p in (spec.default_system_prompt, node_prompt) if p and p.strip()
        )
        question = render_text(ctx, cfg.user_prompt, "user_prompt")
        history = recent_turns(resolve_history(ctx, cfg), cfg.history)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        messages += history + [{"role": "user", "content": question}]
        return fit_messages(messages, max_input_tokens=spec.max_context - max_tokens, node_id=ctx.node_id)

    async def resumed(
        self, ctx: NodeContext, gate: RiskGate, tools: list[ToolSpec], settings: LoopSettings
    ) -> tuple[LoopState, ToolOutcome]:
        """The paused loop and the result of its pending call, from the person's answer: the
        tool's own result when approved, :func:`~nodes.agent.policy.rejection_message` when
        refused. The loop state is the one the kernel saved in ``node_run.data["agent_state"]``.

        Raises:
            InterruptRequested: the answer is neither yes nor no (the question is asked again).
            NodeFailed: (``pending_context_missing``) there is no paused call to resume.
        """
        raw = ctx.node_run.data.get("agent_state")
        if not isinstance(raw, dict) or not raw.get("pending"):
            raise NodeFailed(
                "resumed, but the node run holds no paused tool call (data.agent_state)",
                node_id=ctx.node_id,
                reason="pending_context_missing",
            )
        state = LoopState.from_dict(raw)
        pending = state.pending or {}
        assert ctx.resume is not None
        ctx.node_run.inputs.setdefault("answers", []).append(ctx.resume.answer)
        approved = gate.decide(ctx, ctx.resume.payload.model_dump(exclude_none=True))
        ctx.node_run.data.setdefault("confirmations", []).append(
            ConfirmationRecord(tool=pending.get("tool"), call_id=pending.get("call_id"), approved=approved)
        )
        if not approved:
            return state, ToolOutcome(rejection_message(str(pending.get("tool"))), is_error=True)
        call = next(
            (
                c
                for c in restore_calls(ctx, state, {t.name: t for t in tools})
                if c.id == pending.get("call_id")
            ),
            None,
        )
        if call is None or call.spec is None:
            return state, ToolOutcome(f"tool {pending.get('tool')} is no longer available", is_error=True)
        return state, await run_approved(call, call.spec, settings)

    async def run(self, ctx: NodeContext) -> NodeResult:
        async with mcp_tools(ctx, self.config) as mcp:
            return await self._run(ctx, mcp)

    async def _run(self, ctx: NodeContext, mcp: list[ToolSpec]) -> NodeResult:
        """The loop with the config's tools plus ``mcp`` (open while this runs)."""
        cfg = self.config
        spec = model_spec(ctx, cfg.model)
        temperature, max_tokens = sampling(cfg, spec, None)
        tools = await self.build_tools(ctx) + mcp
        ctx.node_run.data["tools"] = [{"name": t.name, **t.meta, "risk": t.risk} for t in tools]
        settings = LoopSettings(
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
            stream=cfg.stream,
        )
        gate = RiskGate(RiskPolicy.from_config(cfg.allow_write_tools))
        gate.check_scope(ctx, [(t.name, t.risk) for t in tools])
        messages, state, tool_result = None, None, None
        if ctx.resume is None:
            messages = self.opening(ctx, spec, max_tokens)
        else:
            state, tool_result = await self.resumed(ctx, gate, tools, settings)
        result = await run_agent_loop(
            ctx,
            settings=settings,
            messages=messages,
            tools=tools,
            hooks=GatedHooks(ctx, gate),
            state=state,
            tool_result=tool_result,
        )
        return NodeResult(
            {
                "answer": result.answer,
                "messages": result.trail,
                "usage": result.usage.model_dump(),
                "cost": result.cost,
                "trace": result.trace,
                "stop_reason": result.stop_reason,
                "rounds": result.rounds,
            }
        )
