"""examples/support_triage.json against the scripted OpenAI server, one test per branch.

The example names the model ``default``; the bundled registry points it at
``FLOWLOOM_LLM_BASE_URL`` / ``FLOWLOOM_LLM_API_KEY`` / ``FLOWLOOM_LLM_MODEL``, which
these tests aim at the scripted server (and, in the last test, ``FLOWLOOM_MODELS``
at a registry file of a model without native tools).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import nodes.llm.chat
import nodes.llm.classify
import nodes.llm.extract
import nodes.llm.query_extension  # noqa: F401
from engine import RunDeps, run_workflow
from nodes.llm.classify import TOOL_NAME as CLASSIFY_TOOL
from nodes.llm.extract import TOOL_NAME as EXTRACT_TOOL
from nodes.llm.model_registry import load_registry
from schemas.types import NodeRunStatus, RunStatus
from tests.support.catalog import compile_workflow
from tests.support.openai_server import openai_server, text_reply, tool_args_split_reply  # noqa: F401
from workers.memory import FileNodeMemory

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_triage.json"
BRANCH_NODES = {"order_issue": ["ticket", "order_reply"], "product_question": ["product_answer"],
                "other": ["other_reply"]}
COMMON = ["start", "expand", "triage", "reply_text", "reply", "finish"]


@pytest.fixture
def registry(openai_server, monkeypatch):
    monkeypatch.delenv("FLOWLOOM_MODELS", raising=False)
    monkeypatch.setenv("FLOWLOOM_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("FLOWLOOM_LLM_API_KEY", "sk-example-test")
    monkeypatch.setenv("FLOWLOOM_LLM_MODEL", "scripted-upstream")
    return load_registry()


async def run_example(registry: Any, query: str, tmp_path: Path) -> tuple[Any, list[Any]]:
    events: list[Any] = []
    plan = compile_workflow(EXAMPLE.read_text(), models=registry, use_cache=False)
    deps = RunDeps(on_event=events.append, models=registry, memory=FileNodeMemory(tmp_path / "memory"))
    state = await run_workflow(plan, {"query": query}, deps=deps)
    return state, events


def assert_path(state: Any, branch: str) -> None:
    ran = {nid for nid, run in state.node_runs.items() if run.status is NodeRunStatus.succeeded}
    skipped = {nid for nid, run in state.node_runs.items() if run.status is NodeRunStatus.skipped}
    assert ran == set(COMMON) | set(BRANCH_NODES[branch])
    assert skipped == {n for b, nodes_ in BRANCH_NODES.items() if b != branch for n in nodes_}
    assert state.node_runs["triage"].handles == [branch]


def streamed_answer(events: list[Any]) -> str:
    return "".join(e.text for e in events if e.type == "node_delta" and e.channel == "answer")


def test_example_compiles_against_the_bundled_registry(registry):
    plan = compile_workflow(EXAMPLE.read_text(), models=registry, use_cache=False)
    assert not plan.warnings
    models = {n.config.model for n in plan.workflow.nodes if hasattr(n.config, "model")}
    assert models == {"default"}


async def test_order_issue_branch_extracts_a_ticket(openai_server, registry, tmp_path):
    openai_server.script(
        text_reply('["order A-1234 damaged", "broken item refund"]'),
        tool_args_split_reply(CLASSIFY_TOOL, '{"category": "order_issue"}'),
        tool_args_split_reply(EXTRACT_TOOL, '{"order_id": "A-1234", "problem": "Damaged", "email": "ada@example.com"}'),
    )
    query = "My order A-1234 arrived broken. Mail me at ada@example.com"
    state, events = await run_example(registry, query, tmp_path)
    assert state.status is RunStatus.succeeded, state.error
    assert_path(state, "order_issue")
    reply = "Thanks! We opened a ticket for order A-1234 (damaged) and will write to ada@example.com."
    assert state.outputs == {
        "category": "order_issue",
        "reply": reply,
        "queries": [query, "order A-1234 damaged", "broken item refund"],
        "ticket": {"order_id": "A-1234", "problem": "damaged", "email": "ada@example.com"},
    }
    assert streamed_answer(events) == reply
    expand, triage, ticket = openai_server.bodies
    assert all(b["model"] == "scripted-upstream" for b in openai_server.bodies)
    assert "order A-1234 damaged; broken item refund" in triage["messages"][0]["content"]
    assert triage["tool_choice"]["function"]["name"] == CLASSIFY_TOOL
    assert ticket["tool_choice"]["function"]["name"] == EXTRACT_TOOL
    assert all("temperature" in b and "max_tokens" in b for b in openai_server.bodies)


async def test_product_question_branch_is_answered_by_the_model(openai_server, registry, tmp_path):
    openai_server.script(
        text_reply('```json\n["X200 battery life", "X200 charging time"]\n```'),
        tool_args_split_reply(CLASSIFY_TOOL, '{"category": "product_question"}'),
        text_reply("The X200 runs 12 hours on one charge.", usage=(80, 12)),
    )
    state, events = await run_example(registry, "How long does the X200 battery last?", tmp_path)
    assert state.status is RunStatus.succeeded, state.error
    assert_path(state, "product_question")
    assert state.outputs["category"] == "product_question"
    assert state.outputs["reply"] == "The X200 runs 12 hours on one charge."
    assert state.outputs["ticket"] is None  # the extract branch was skipped
    # the chat node does not stream (stream: false); the answer node streams the reply once
    assert streamed_answer(events) == "The X200 runs 12 hours on one charge."
    chat = openai_server.bodies[2]
    assert (chat["temperature"], chat["max_tokens"]) == (0.3, 400)
    assert "X200 battery life; X200 charging time" in chat["messages"][0]["content"]
    assert chat["messages"][-1] == {"role": "user", "content": "How long does the X200 battery last?"}
    usage = state.node_runs["product_answer"].usage
    assert (usage.tokens_in, usage.tokens_out, usage.model) == (80, 12, "default")


async def test_other_branch_and_unusable_classification_take_the_canned_reply(openai_server, registry, tmp_path):
    openai_server.script(
        text_reply("no JSON here"),
        tool_args_split_reply(CLASSIFY_TOOL, '{"category": "complaint about the weather"}'),
    )
    state, events = await run_example(registry, "Lovely weather today!", tmp_path)
    assert state.status is RunStatus.succeeded, state.error
    assert_path(state, "other")
    assert state.outputs["reply"].startswith("Thanks for your message!")
    assert state.outputs["queries"] == ["Lovely weather today!"]
    assert state.node_runs["expand"].data["query_extension"]["reason"] == "no_json"
    assert state.node_runs["triage"].data["classify"]["fallback_reason"] == "no_match"
    assert len(openai_server.bodies) == 2  # no model call on the canned branch


async def test_registry_file_from_flowloom_models_without_native_tools(openai_server, monkeypatch, tmp_path):
    registry_file = tmp_path / "models.toml"
    registry_file.write_text(
        "[providers.local]\n"
        f'base_url = "{openai_server.base_url}"\n\n'
        "[models.default]\n"
        'provider = "local"\nmodel = "small-local"\nmax_context = 8192\nmax_output_tokens = 512\n'
        "capabilities = { tool_calling = false, tool_choice = false }\n"
    )
    monkeypatch.setenv("FLOWLOOM_MODELS", str(registry_file))
    from engine.settings import Settings

    registry = load_registry(Settings().models)  # FLOWLOOM_MODELS is read by Settings
    openai_server.script(
        text_reply('["where is order B-9"]'),
        text_reply('{"category": "order_issue"}'),
        text_reply('Here you go: {"order_id": "B-9", "problem": "late"}'),
    )
    state, _ = await run_example(registry, "Order B-9 is late", tmp_path)
    assert state.status is RunStatus.succeeded, state.error
    assert_path(state, "order_issue")
    assert state.outputs["ticket"] == {"order_id": "B-9", "problem": "late"}
    assert state.outputs["reply"] == "Thanks! We opened a ticket for order B-9 (late)."
    assert all("tools" not in b for b in openai_server.bodies)  # prompt protocols throughout
    assert json.loads(json.dumps(state.outputs))  # plain JSON outputs


async def test_order_issue_without_readable_details_asks_for_the_order_number(openai_server, registry, tmp_path):
    openai_server.script(
        text_reply('["late order"]'),
        tool_args_split_reply(CLASSIFY_TOOL, '{"category": "Order problem"}'),  # the name works as well as the id
        tool_args_split_reply(EXTRACT_TOOL, '{"order_id": '),  # cut short: no ticket, no exception
    )
    state, _ = await run_example(registry, "Where is my stuff??", tmp_path)
    assert state.status is RunStatus.succeeded, state.error
    assert_path(state, "order_issue")
    assert state.outputs["ticket"] == {}
    assert state.outputs["reply"] == "Sorry about your order. Please reply with your order number so we can open a ticket."
    assert state.node_runs["ticket"].outputs["success"] is False
    assert state.node_runs["ticket"].data["extract"]["raw"] == '{"order_id": '
