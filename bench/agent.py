"""Agent-loop benchmark: per-round cost of the tool loop kernel beside LangGraph's ReAct agent.

Prints exactly one JSON line on stdout (progress, with ``-v``, goes to stderr)::

    python bench/agent.py            # full run (~1 min on 2 cores)
    python bench/agent.py --quick    # smoke run (a few seconds)

Three views of the same 100-round loop (99 rounds of one tool call, then an answer):

- ``kernel``: :func:`nodes.agent.loop.run_agent_loop` with an in-process, zero-delay
  fake model (``AgentHooks.call_model`` returns a prebuilt :class:`~nodes.llm.call.LLMResponse`
  per round - no HTTP, no SDK) and a tool returning a short string. Everything else is
  the real kernel: context fitting check, request building, argument parsing and schema
  validation, truncation, fences, repeat detection, trace, usage summing.
- ``langgraph``: ``langgraph.prebuilt.create_react_agent`` with an equivalent fake chat
  model (a ``BaseChatModel`` returning the same tool-call ``AIMessage`` s, zero delay,
  ``bind_tools`` a no-op) and the same tool, ``ainvoke`` with a recursion limit above
  the 200 steps the loop takes. Same event loop, runs interleaved.
- ``http``: the kernel with its real model call (``call_llm``: the openai SDK, streaming)
  against the scripted OpenAI-compatible server (``tests/support/openai_server.py``) in a
  child process answering with a tool call until the conversation has 99 tool results;
  beside it a bare openai-SDK loop doing the same 100 requests (append the assistant
  message and the tool result, nothing else). Shows how much of a real round is HTTP.

Figures are µs per round: wall time of one whole loop / 100, median over the timed runs
(``*_best``: the minimum); ``*_cpu_*`` use ``time.process_time``. ``ratio`` = kernel /
LangGraph (target: at most 0.2).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

from _checkout import ROOT as _ROOT

from engine.context import CancelToken, NodeContext, RunDeps
from nodes.agent.loop import AgentHooks, LoopSettings, ToolSpec, run_agent_loop
from nodes.llm.call import LLMResponse, ToolCall
from nodes.llm.model_registry import ModelRegistry, ModelSpec, Pricing, ProviderSpec
from schemas.run import NodeRun, RunState, Usage

SCHEMA = "flowloom-bench-agent/1"
ROUNDS = 100
TARGET_RATIO = 0.2
MESSAGES = [{"role": "system", "content": "You are a benchmark agent."},
            {"role": "user", "content": "Add the numbers one by one, then answer."}]
TOOL_SCHEMA = {"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]}


# ---------------------------------------------------------------- flowloom side


def _registry(base_url: str = "http://127.0.0.1:9/v1") -> ModelRegistry:
    provider = ProviderSpec(name="bench", base_url=base_url, api_key_env=None)
    spec = ModelSpec(name="bench", provider="bench", max_context=1_000_000, max_output_tokens=4096,
                     pricing=Pricing(input_per_1k=0.001, output_per_1k=0.002))
    return ModelRegistry([provider], [spec])


def _ctx(registry: ModelRegistry) -> NodeContext:
    node = SimpleNamespace(id="agent", type="tool_call", description="")
    state = RunState(run_id="bench", workflow_id="bench", workflow_hash="h")
    run = NodeRun(id="bench:agent", node_id="agent", kind="tool_call")
    return NodeContext(node, None, state, RunDeps(models=registry), CancelToken(), run,  # type: ignore[arg-type]
                       lambda *a, **k: None, None, None)


async def _add(args: dict[str, Any], call: Any) -> str:
    return f"sum so far: {args['i'] * (args['i'] + 1) // 2}"


TOOLS = [ToolSpec("add", "add the next number", TOOL_SCHEMA, _add)]


class _FakeModel(AgentHooks):
    """Zero-delay in-process model: a tool call per round, the answer on the last round."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self.calls = 0

    async def call_model(self, ctx, request, loop, on_answer, settings):  # type: ignore[override]
        i = self.calls
        self.calls += 1
        usage = Usage(model="bench", tokens_in=100, tokens_out=10, cost=0.0002, calls=1)
        if i >= self.rounds - 1:
            return LLMResponse("The total is 4950.", "", [], "stop", usage, {})
        return LLMResponse("", "", [ToolCall(f"call_{i}", "add", json.dumps({"i": i}))], "tool_calls", usage, {})


async def _kernel_once(rounds: int) -> str:
    registry = _registry()
    settings = LoopSettings(model="bench", max_rounds=rounds + 1, tool_only_cap=0)
    result = await run_agent_loop(_ctx(registry), settings=settings, messages=MESSAGES, tools=TOOLS,
                                  hooks=_FakeModel(rounds))
    assert result.rounds == rounds and result.stop_reason == "answer", result.stop_reason
    return result.answer


# ---------------------------------------------------------------- langgraph side


def _langgraph_agent(rounds: int) -> Callable[[], Awaitable[str]]:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    @tool
    async def add(i: int) -> str:
        """add the next number"""
        return f"sum so far: {i * (i + 1) // 2}"

    class FakeChat(BaseChatModel):
        """Zero-delay chat model: a tool call per round (counted from the ToolMessages), then the answer."""

        @property
        def _llm_type(self) -> str:
            return "bench-fake"

        def bind_tools(self, tools: Any, **kwargs: Any) -> FakeChat:
            return self

        def _reply(self, messages: list[Any]) -> ChatResult:
            i = sum(1 for m in messages if m.type == "tool")
            usage = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
            if i >= rounds - 1:
                message = AIMessage(content="The total is 4950.", usage_metadata=usage)
            else:
                message = AIMessage(content="", tool_calls=[{"name": "add", "args": {"i": i}, "id": f"call_{i}"}],
                                    usage_metadata=usage)
            return ChatResult(generations=[ChatGeneration(message=message)])

        def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
            return self._reply(messages)

        async def _agenerate(self, messages: list[Any], stop: Any = None, run_manager: Any = None,
                             **kw: Any) -> ChatResult:
            return self._reply(messages)

    with warnings.catch_warnings():  # create_react_agent is deprecated in favour of langchain.agents (not installed)
        warnings.simplefilter("ignore")
        graph = create_react_agent(FakeChat(), [add], prompt=MESSAGES[0]["content"])

    async def once() -> str:
        out = await graph.ainvoke({"messages": [("user", MESSAGES[1]["content"])]},
                                  {"recursion_limit": 4 * rounds + 10})
        assert sum(1 for m in out["messages"] if m.type == "tool") == rounds - 1
        return out["messages"][-1].content

    return once


# ---------------------------------------------------------------- HTTP side


def agent_responder(body: dict[str, Any]) -> Any:
    """Scripted-server responder: a tool call until the chat holds ROUNDS-1 tool results, then the answer."""
    from tests.support.openai_server import Finish, Reply, Text, ToolDelta
    from tests.support.openai_server import Usage as U

    done = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
    if done >= ROUNDS - 1:
        return Reply([Text("The total is 4950."), Finish("stop"), U(100, 10)])
    return Reply([ToolDelta(0, f"call_{done}", "add", json.dumps({"i": done})), Finish("tool_calls"), U(100, 10)])


def _serve() -> None:  # pragma: no cover - child process
    from tests.support.openai_server import ScriptedOpenAIServer

    server = ScriptedOpenAIServer(responder=agent_responder).start()
    print(server.url, flush=True)
    try:
        sys.stdin.read()
    finally:
        server.stop()


def _start_server() -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": _ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve"], cwd=_ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"scripted server did not start (got {url!r})")
    return proc, url


async def _kernel_http_once(registry: ModelRegistry) -> str:
    settings = LoopSettings(model="bench", max_rounds=ROUNDS + 1, tool_only_cap=0)
    result = await run_agent_loop(_ctx(registry), settings=settings, messages=MESSAGES, tools=TOOLS)
    assert result.rounds == ROUNDS, result.rounds
    return result.answer


async def _raw_sdk_once(client: Any) -> str:
    """The least a caller does over the SDK: stream, join tool-call fragments, append, repeat."""
    messages: list[dict[str, Any]] = list(MESSAGES)
    tools = [{"type": "function", "function": {"name": "add", "description": "add the next number",
                                               "parameters": TOOL_SCHEMA}}]
    while True:
        stream = await client.chat.completions.create(model="bench", messages=messages, tools=tools, stream=True,
                                                      temperature=0.7, max_tokens=4096,
                                                      stream_options={"include_usage": True})
        text: list[str] = []
        calls: dict[int, list[str]] = {}
        async for chunk in stream:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                text.append(delta.content)
            for tc in delta.tool_calls or ():
                slot = calls.setdefault(tc.index, ["", "", ""])
                slot[0] = slot[0] or (tc.id or "")
                if tc.function is not None:
                    slot[1] = slot[1] or (tc.function.name or "")
                    slot[2] += tc.function.arguments or ""
        if not calls:
            return "".join(text)
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c[0], "type": "function", "function": {"name": c[1], "arguments": c[2]}} for c in calls.values()]})
        for c in calls.values():
            messages.append({"role": "tool", "tool_call_id": c[0], "content": await _add(json.loads(c[2]), None)})


# ---------------------------------------------------------------- timing


async def _time(fn: Callable[[], Awaitable[str]]) -> tuple[float, float]:
    """(wall µs, CPU µs) per round of one loop."""
    gc.collect()
    w0, c0 = time.perf_counter(), time.process_time()
    answer = await fn()
    cpu = (time.process_time() - c0) * 1e6 / ROUNDS
    wall = (time.perf_counter() - w0) * 1e6 / ROUNDS
    assert answer == "The total is 4950.", answer
    return wall, cpu


async def _compare(named: dict[str, Callable[[], Awaitable[str]]], runs: int, verbose: bool,
                   label: str, warm_up: bool = True) -> dict[str, dict[str, list[float]]]:
    samples: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in named}
    for fn in named.values() if warm_up else ():  # warm-up: imports, caches, connections
        await _time(fn)
    order = list(named)
    for r in range(runs):
        for name in (order if r % 2 == 0 else order[::-1]):
            wall, cpu = await _time(named[name])
            samples[name]["wall"].append(wall)
            samples[name]["cpu"].append(cpu)
        if verbose:
            print(f"  {label} run {r + 1}/{runs}: " + ", ".join(
                f"{n} {samples[n]['wall'][-1]:.1f} µs/round" for n in order), file=sys.stderr)
    return samples


def _med(values: list[float]) -> float:
    return round(statistics.median(values), 2)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    runs = 3 if args.quick else 9
    http_runs = 1 if args.quick else 5
    started = time.perf_counter()
    if args.verbose:
        print("in-process: kernel vs LangGraph create_react_agent", file=sys.stderr)
    local = await _compare({"kernel": lambda: _kernel_once(ROUNDS), "langgraph": _langgraph_agent(ROUNDS)}, runs,
                           args.verbose, "in-process")
    kernel, lang = local["kernel"], local["langgraph"]
    ratio = statistics.median(kernel["wall"]) / statistics.median(lang["wall"])
    proc, url = _start_server()
    try:
        registry = _registry(url + "/v1")
        client = registry.client_for(registry.get("bench"))
        if args.verbose:
            print("over HTTP: kernel + call_llm vs a bare openai SDK loop", file=sys.stderr)
        remote = await _compare({"kernel_http": lambda: _kernel_http_once(registry),
                                 "raw_sdk": lambda: _raw_sdk_once(client)}, http_runs, args.verbose, "http",
                                warm_up=not args.quick)
        await registry.aclose()
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
    http_k, raw = remote["kernel_http"], remote["raw_sdk"]
    kernel_wall, http_wall = statistics.median(kernel["wall"]), statistics.median(http_k["wall"])
    return {
        "schema": SCHEMA,
        "quick": bool(args.quick),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpu_count": os.cpu_count()},
        "rounds": ROUNDS,
        "runs": {"in_process": runs, "http": http_runs},
        "kernel": {"us_per_round_median": _med(kernel["wall"]), "us_per_round_best": round(min(kernel["wall"]), 2),
                   "cpu_us_per_round_median": _med(kernel["cpu"])},
        "langgraph": {"us_per_round_median": _med(lang["wall"]), "us_per_round_best": round(min(lang["wall"]), 2),
                      "cpu_us_per_round_median": _med(lang["cpu"])},
        "ratio_median": round(ratio, 4),
        "ratio_best": round(min(kernel["wall"]) / min(lang["wall"]), 4),
        "ratio_cpu_median": round(statistics.median(kernel["cpu"]) / statistics.median(lang["cpu"]), 4),
        "http": {
            "kernel_us_per_round_median": _med(http_k["wall"]),
            "kernel_cpu_us_per_round_median": _med(http_k["cpu"]),
            "raw_sdk_us_per_round_median": _med(raw["wall"]),
            "raw_sdk_cpu_us_per_round_median": _med(raw["cpu"]),
            "kernel_share": round(kernel_wall / http_wall, 4),
            "http_and_sdk_share": round(1 - kernel_wall / http_wall, 4),
        },
        "target": {"ratio_at_most": TARGET_RATIO, "value": round(ratio, 4), "met": ratio <= TARGET_RATIO},
        "elapsed_s": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer timed runs")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve()
        return
    print(json.dumps(asyncio.run(main_async(args)), separators=(",", ":")))


if __name__ == "__main__":
    main()
