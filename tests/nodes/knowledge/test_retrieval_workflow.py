"""Knowledge retrieval in workflows over the real parts: the SQLite knowledge store, the
KnowledgeService ingesting a document through the scripted server's /v1/embeddings, the
real engine. Query extension -> retrieval -> chat answering with citations; the planning
agent and the tool-call node answering from a dataset tool (with the LLM relevance pass)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import nodes  # noqa: F401  - registers the executors
from engine import RunDeps, run_workflow
from engine.knowledge.service import KnowledgeService
from engine.runner import new_run_state
from schemas.types import RunStatus
from tests.support.catalog import compile_workflow
from tests.support.openai_server import (  # noqa: F401  (fixtures)
    Finish,
    Reply,
    Text,
    ToolDelta,
    Usage,
    openai_server,
    scripted_registry,
    text_reply,
)
from tests.support.policy_kb import open_policy_kb
from tests.support.workflows import build, chain_edges, edge, node


@pytest.fixture
async def knowledge(tmp_path: Path, scripted_registry: Any) -> AsyncIterator[KnowledgeService]:
    """Dataset ``policies`` of tenant ``t1`` holding the returns policy, ingested."""
    async with open_policy_kb(tmp_path, scripted_registry) as service:
        yield service


async def run(doc: dict[str, Any], registry: Any, know: Any, *, query: str, tenant: str = "t1",
              inputs: dict[str, Any] | None = None) -> tuple[Any, list[Any]]:
    events: list[Any] = []
    plan = compile_workflow(doc, models=registry)
    state = new_run_state(plan, inputs or {}, query=query)
    state.tenant_id = tenant
    return await run_workflow(plan, state, deps=RunDeps(on_event=events.append, models=registry,
                                                        knowledge=know)), events


def rag_flow(**retrieval: Any) -> dict[str, Any]:
    return build([
        node("qe", "query_extension", {"model": "tools-model", "count": 2}),
        node("kr", "knowledge_retrieval", {"datasets": ["policies"], "queries": {"ref": "qe.queries"},
                                           "top_k": 2, **retrieval}),
        node("chat", "chat", {"model": "tools-model", "quote": {"ref": "kr.quote"}}),
        node("a", "answer", {"text": "{{ chat.answer }}"}),
    ], chain_edges("start", "qe", "kr", "chat", "a"))


async def test_extension_retrieval_chat_cites_the_ingested_document(openai_server, scripted_registry, knowledge):
    openai_server.script(text_reply('["refund receipt card"]'),
                         text_reply("Refunds reach your card within 14 days [1]."))
    embedded_before = openai_server.embedding_calls
    state, events = await run(rag_flow(), scripted_registry, knowledge, query="How long does a refund take?")
    assert state.status is RunStatus.succeeded, state.error
    kr = state.node_runs["kr"]
    chunks = kr.outputs["chunks"]
    assert chunks and chunks[0]["source_name"] == "returns.md" and "14 days" in chunks[0]["text"]
    assert chunks[0]["heading_path"][-1] == "Refunds" and chunks[0]["dataset_id"] == "policies"
    assert kr.outputs["quote"].startswith("[1] source: returns.md > Returns policy > Refunds\n")
    assert openai_server.embedding_calls == embedded_before + 1, "one embedding call for both queries"
    assert kr.usage is not None and kr.usage.tokens_in > 0 and kr.usage.cost > 0
    assert set(kr.data["retrieval"]["passes"]) == {"semantic[policies, q1]", "semantic[policies, q2]",
                                                   "full_text[q1]", "full_text[q2]"}
    chat = state.node_runs["chat"].outputs
    assert [c["citation_id"] for c in chat["citations"]] == ["1"]
    assert chat["citations"][0]["chunk_id"] == chunks[0]["chunk_id"]
    assert state.answer == "Refunds reach your card within 14 days [1]."
    assert kr.outputs["quote"] in openai_server.bodies[1]["messages"][0]["content"]


@pytest.mark.slow
async def test_extension_retrieval_chat_on_postgresql_with_pgvector(openai_server, scripted_registry, tmp_path,
                                                                    pgvector_database_url):
    openai_server.script(text_reply('["refund receipt card"]'), text_reply("Within 14 days [1]."))
    async with open_policy_kb(tmp_path, scripted_registry, database_url=pgvector_database_url) as kb:
        state, _ = await run(rag_flow(), scripted_registry, kb, query="How long does a refund take?")
    assert state.status is RunStatus.succeeded, state.error
    kr = state.node_runs["kr"]
    assert "14 days" in kr.outputs["chunks"][0]["text"] and kr.outputs["chunks"][0]["source_name"] == "returns.md"
    assert "semantic[policies, q1]" in kr.data["retrieval"]["passes"] and kr.data["retrieval"]["notes"] == []
    assert [c["citation_id"] for c in state.node_runs["chat"].outputs["citations"]] == ["1"]


async def test_full_text_retrieval_and_tenant_scoping(openai_server, scripted_registry, knowledge):
    doc = build([node("kr", "knowledge_retrieval", {"datasets": ["policies"], "mode": "full_text", "top_k": 5})],
                chain_edges("start", "kr"))
    state, _ = await run(doc, scripted_registry, knowledge, query="express shipping")
    assert state.status is RunStatus.succeeded, state.error
    assert "Express shipping" in state.node_runs["kr"].outputs["chunks"][0]["text"]
    other, _ = await run(doc, scripted_registry, knowledge, query="express shipping", tenant="t2")
    assert other.status is RunStatus.failed and other.error.reason == "unknown_dataset"


def calls(*items: tuple[str, str, Any]) -> Reply:
    steps: list[Any] = [ToolDelta(i, cid, name, json.dumps(args)) for i, (cid, name, args) in enumerate(items)]
    return Reply(steps + [Finish("tool_calls"), Usage(20, 10)])


def answer(text: str) -> Reply:
    return Reply([Text(text), Finish("stop"), Usage(30, 5)])


@pytest.mark.parametrize("kind", ["agent", "tool_call"])
async def test_agents_answer_from_a_dataset_tool_with_the_relevance_pass(openai_server, scripted_registry, knowledge,
                                                                          kind):
    tool = {"datasets": ["policies"], "name": "search_policies", "relevance_model": "plain-model", "top_k": 3,
            "mode": "full_text"}
    doc = build([node("agent", kind, {"model": "tools-model", "dataset_tools": [tool]}),
                 node("say", "answer", {"text": "{{ agent.answer }}"})],
                [edge("start", "agent"), edge("agent", "say")])
    openai_server.script(calls(("c1", "search_policies", {"query": "refund receipt"})),
                         text_reply("[1]"),  # the relevance pass keeps the first passage only
                         answer("You need the original receipt [1]."))
    state, _ = await run(doc, scripted_registry, knowledge, query="What do I need for a refund?")
    assert state.status is RunStatus.succeeded, state.error
    assert state.answer == "You need the original receipt [1]."
    judge_body, final_body = openai_server.bodies[1], openai_server.bodies[2]
    assert judge_body["model"] != final_body["model"] and "<passage 1>" in judge_body["messages"][1]["content"]
    tool_result = next(m["content"] for m in final_body["messages"] if m["role"] == "tool")
    assert "[1] source: returns.md" in tool_result and "original receipt" in tool_result
    assert "tool_observation" in tool_result, "fenced like every tool result"
    assert "[2]" not in tool_result, "the relevance pass dropped the other passages"
    agent = state.node_runs["agent"]
    assert agent.data["relevance"][0]["kept"] == 1
    assert "plain-model" in (agent.usage.model or "")


async def test_dataset_tool_on_an_unknown_dataset_is_a_failed_call_the_model_sees(openai_server, scripted_registry,
                                                                                  knowledge):
    doc = build([node("agent", "tool_call", {"model": "tools-model", "dataset_tools": [{"datasets": ["ghost"]}]})],
                chain_edges("start", "agent"))
    openai_server.script(calls(("c1", "search_knowledge", {"query": "x"})), answer("I cannot search that."))
    state, _ = await run(doc, scripted_registry, knowledge, query="?")
    assert state.status is RunStatus.succeeded, state.error
    tool_result = next(m["content"] for m in openai_server.bodies[1]["messages"] if m["role"] == "tool")
    assert "config.dataset_tools[0]" in tool_result and "ghost" in tool_result


class _AnyModel:
    """A model catalog that knows every name: the registry changed between validation and run."""

    fingerprint = "any"

    def has(self, name: str, kind: str | None = "chat") -> bool:
        return True

    def names(self, kind: str | None = "chat") -> list[str]:
        return []

    def required_key_env(self, name: str) -> str | None:
        return None

    def base_url_env(self, name: str) -> str | None:
        return None


@pytest.mark.parametrize("rerank, path, says", [
    ({"model": "tools-model"}, "config.rerank.model", "model 'tools-model' is a chat model, not a rerank model"),
    ({"llm": "embed-model"}, "config.rerank.llm", "model 'embed-model' is an embedding model, not a chat model"),
])
async def test_a_rerank_model_of_the_wrong_type_fails_the_run_naming_its_field_before_any_model_call(
        openai_server, scripted_registry, knowledge, rerank, path, says):
    doc = build([node("kr", "knowledge_retrieval", {"datasets": ["policies"], "rerank": rerank})],
                chain_edges("start", "kr"))
    plan = compile_workflow(doc, models=_AnyModel())
    state = new_run_state(plan, {}, query="How long does a refund take?")
    state.tenant_id = "t1"
    embedded, sent = openai_server.embedding_calls, len(openai_server.requests)
    state = await run_workflow(plan, state, deps=RunDeps(models=scripted_registry, knowledge=knowledge))
    assert state.status is RunStatus.failed and state.error.reason == "unknown_model", state.error
    assert state.error.message.startswith(f"{path}: {says}"), state.error.message
    assert openai_server.embedding_calls == embedded and len(openai_server.requests) == sent
