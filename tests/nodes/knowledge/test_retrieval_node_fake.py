"""The knowledge_retrieval node and chat citations through the real engine, with the
real Retriever over an in-memory store (the SQLite store and the KnowledgeService are
exercised in test_retrieval_workflow.py): query extension -> retrieval -> chat."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import RunDeps, run_workflow
from engine.runner import new_run_state
from nodes.knowledge.quotes import answer_citations, cited_ids, quote_items, quote_role
from tests.support.catalog import check_workflow, compile_workflow
from tests.support.fake_knowledge import FakeKnowledge, FakeStore, WordEmbedder, chunk, dataset
from tests.support.openai_server import openai_server, scripted_registry, text_reply  # noqa: F401 (fixtures)
from tests.support.workflows import build, chain_edges, node

TEXTS = ["Refunds are paid within 14 days of a return.", "Shipping to Europe takes five working days.",
         "A refund needs the original receipt."]


def knowledge(tenant: str = "t1") -> FakeKnowledge:
    embedder = WordEmbedder(TEXTS + ["how long refund takes receipt"], models=("embed-model",))
    store = FakeStore()
    for i, text in enumerate(TEXTS):
        store.add(chunk(f"c{i + 1}", text, position=i, doc="policy", tenant=tenant), embedder)
    return FakeKnowledge(store, [dataset("ds1", "embed-model", tenant=tenant)], embedder)


def rag_workflow(**retrieval: Any) -> dict[str, Any]:
    return build([
        node("qe", "query_extension", {"model": "tools-model", "count": 3}),
        node("kr", "knowledge_retrieval", {"datasets": ["ds1"], "queries": {"ref": "qe.queries"}, "top_k": 2,
                                           **retrieval}),
        node("chat", "chat", {"model": "tools-model", "quote": {"ref": "kr.quote"}, "history": 0}),
        node("a", "answer", {"text": "{{ chat.answer }}"}),
    ], chain_edges("start", "qe", "kr", "chat", "a"))


async def run(doc, registry, know, tenant="t1", query="how long does a refund take?"):
    events: list[Any] = []
    plan = compile_workflow(doc, models=registry)
    state = new_run_state(plan, {}, query=query)
    state.tenant_id = tenant
    deps = RunDeps(on_event=events.append, models=registry, knowledge=know)
    return await run_workflow(plan, state, deps=deps), events


async def test_query_extension_retrieval_chat_answers_with_citations(openai_server, scripted_registry):
    openai_server.script(text_reply('["refund receipt", "refund days"]'),
                         text_reply("Refunds are paid within 14 days [2]; bring the receipt [1]."))
    know = knowledge()
    state, events = await run(rag_workflow(), scripted_registry, know)
    assert state.status == "succeeded", state.error
    kr = state.node_runs["kr"].outputs
    assert kr["queries"] == ["how long does a refund take?", "refund receipt", "refund days"]
    assert [c["citation_id"] for c in kr["chunks"]] == ["1", "2"]
    assert {c["chunk_id"] for c in kr["chunks"]} == {"c1", "c3"}
    assert kr["quote"].startswith("[1] source: policy.md\n")
    # One embedding call for the three queries; its tokens count in the node's usage.
    assert know.retriever.embedder.calls == [("embed-model", kr["queries"])]
    assert state.node_runs["kr"].usage.tokens_in > 0 and state.node_runs["kr"].usage.cost > 0
    # The chat prompt holds the numbered quote and asks for citations.
    system = openai_server.bodies[1]["messages"][0]["content"]
    assert kr["quote"] in system and "[1]" in system and "square brackets" in system
    chat = state.node_runs["chat"].outputs
    by_id = {c["citation_id"]: c for c in kr["chunks"]}
    assert [c["citation_id"] for c in chat["citations"]] == ["2", "1"]
    assert [c["chunk_id"] for c in chat["citations"]] == [by_id["2"]["chunk_id"], by_id["1"]["chunk_id"]]
    assert state.node_runs["chat"].data["chat"]["cited"] == ["2", "1"]
    finished = [e for e in events if getattr(e, "type", "") == "node_finished" and e.node_id == "chat"]
    assert finished[0].outputs["citations"] == chat["citations"]


async def test_chat_over_chunks_list_cites_all_when_answer_cites_none(openai_server, scripted_registry):
    doc = build([
        node("kr", "knowledge_retrieval", {"datasets": ["ds1"], "mode": "full_text", "top_k": 3}),
        node("chat", "chat", {"model": "tools-model", "quote": {"ref": "kr.chunks"}, "quote_role": "user"}),
    ], chain_edges("start", "kr", "chat"))
    openai_server.script(text_reply("Bring the receipt."))
    state, _ = await run(doc, scripted_registry, knowledge(), query="refund receipt")
    assert state.status == "succeeded", state.error
    user = openai_server.bodies[0]["messages"][-1]["content"]
    assert "[1] source: policy.md\nA refund needs the original receipt." in user
    assert 'Question: """refund receipt"""' in user
    chat = state.node_runs["chat"]
    assert [c["chunk_id"] for c in chat.outputs["citations"]] == ["c3"]
    assert chat.data["chat"]["cited"] == [] and chat.data["chat"]["quote_role"] == "user"


async def test_missing_knowledge_service_and_unknown_dataset_fail_the_node(openai_server, scripted_registry):
    doc = build([node("kr", "knowledge_retrieval", {"datasets": ["nope"]})], chain_edges("start", "kr"))
    state, _ = await run(doc, scripted_registry, None)
    assert state.status == "failed" and state.error.node_id == "kr"
    assert state.error.reason == "knowledge_unavailable" and "config.datasets" in state.error.message
    state, _ = await run(doc, scripted_registry, knowledge())
    assert state.error.reason == "unknown_dataset" and "'nope'" in state.error.message
    # Another tenant's dataset is as missing as one that does not exist.
    doc = build([node("kr", "knowledge_retrieval", {"datasets": ["ds1"]})], chain_edges("start", "kr"))
    state, _ = await run(doc, scripted_registry, knowledge(tenant="t2"), tenant="t1")
    assert state.error.reason == "unknown_dataset"


async def test_degraded_search_warns_and_queries_must_be_strings(openai_server, scripted_registry):
    know = knowledge()
    know.datasets[("t1", "ds1")] = dataset("ds1", None)
    doc = build([node("kr", "knowledge_retrieval", {"datasets": ["ds1"], "mode": "semantic"})],
                chain_edges("start", "kr"))
    state, events = await run(doc, scripted_registry, know, query="refund receipt")
    assert state.status == "succeeded"
    warnings = [e for e in events if getattr(e, "type", "") == "node_warning"]
    assert warnings and warnings[0].code == "retrieval_degraded" and "searched by full text" in warnings[0].message
    assert state.node_runs["kr"].data["retrieval"]["notes"]
    bad = build([node("t", "template", {"template": "x"}),
                 node("kr", "knowledge_retrieval", {"datasets": ["ds1"], "queries": {"ref": "t.output"}})],
                chain_edges("start", "t", "kr"))
    with pytest.raises(Exception) as info:
        compile_workflow(bad, models=scripted_registry)
    assert "queries" in str(info.value)


def test_compiler_checks_references_and_rerank_models(scripted_registry):
    doc = build([node("kr", "knowledge_retrieval", {"datasets": ["ds1"], "queries": {"ref": "ghost.queries"},
                                                    "rerank": {"model": "no-such-rerank"}})],
                chain_edges("start", "kr"))
    with pytest.raises(Exception) as info:
        compile_workflow(doc, models=scripted_registry)
    text = str(info.value)
    assert "ghost" in text and "no-such-rerank" in text


def test_quote_role_rule_and_citation_markers():
    assert quote_role("user", "{{ quote }}", {"quote"}) == "user"
    assert quote_role("system", "{{ quote }} {{ question }}", {"quote", "question"}) == "user"
    assert quote_role("system", "{{ quote }}", {"quote"}) == "system"
    assert cited_ids("a [2] b [1, 3][2] c [x] [10]") == ["2", "1", "3", "10"]
    items = quote_items([[{"chunk_id": "a", "text": "A", "source_name": "s.md", "score": 0.5}],
                         [{"chunk_id": "a", "text": "A"}, "plain"]])
    assert [(i.citation_id, i.text) for i in items] == [("1", "A"), ("2", "plain")]
    pieces, cited = answer_citations("see [2] and [9]", items)
    assert cited and [p.citation_id for p in pieces] == ["2"] and pieces[0].chunk_id == ""
    pieces, cited = answer_citations("no marks", items)
    assert not cited and [p.source_name for p in pieces] == ["s.md", ""]
    assert json.dumps([p.model_dump() for p in pieces])


def test_dataset_tools_are_checked_at_compile_time(scripted_registry):
    def flow(**tool: Any) -> dict[str, Any]:
        return build([node("agent", "tool_call", {"model": "tools-model", "dataset_tools": [
            {"datasets": ["ds1"], **tool}]})], chain_edges("start", "agent"))

    compile_workflow(flow(relevance_model="plain-model"), models=scripted_registry)
    with pytest.raises(Exception) as info:
        compile_workflow(flow(relevance_model="ghost-model"), models=scripted_registry)
    assert "dataset_tools[0].relevance_model" in str(info.value) and "ghost-model" in str(info.value)
    with pytest.raises(Exception) as info:
        compile_workflow(build([node("agent", "agent", {
            "model": "tools-model", "dataset_tools": [{"datasets": ["a"]}, {"datasets": ["b"]}]})],
            chain_edges("start", "agent")), models=scripted_registry)
    assert "search_knowledge" in str(info.value)  # two tools of one name


async def test_a_failing_embedding_endpoint_fails_a_semantic_search_naming_it(openai_server, scripted_registry):
    store = FakeStore()
    store.add(chunk("c1", TEXTS[0]))
    failing = FakeKnowledge(store, [dataset("ds1", "embed-model")],
                            WordEmbedder(TEXTS, models=("embed-model",), fail=True))
    doc = build([node("kr", "knowledge_retrieval", {"datasets": ["ds1"], "mode": "semantic"})],
                chain_edges("start", "kr"))
    state, _ = await run(doc, scripted_registry, failing)
    assert state.status == "failed" and state.error.reason == "embedding_failed"
    assert "embed-model" in state.error.message and "config.datasets" in state.error.message


def test_rerank_and_relevance_models_are_checked_for_their_type(scripted_registry):
    def problems(rerank: dict[str, Any], where: str = "kr") -> list[tuple[str, str]]:
        kr = node("kr", "knowledge_retrieval", {"datasets": ["ds1"], "rerank": rerank})
        agent = node("agent", "tool_call", {"model": "tools-model", "dataset_tools": [
            {"datasets": ["ds1"], "rerank": rerank}]})
        doc = build([kr if where == "kr" else agent], chain_edges("start", where))
        return [(p.path, p.message) for p in check_workflow(doc, models=scripted_registry) if p.code == "unknown_model"]

    assert problems({"model": "rerank-model", "llm": "plain-model"}) == []
    assert problems({"model": "rerank-model"}, "agent") == []
    ((path, message),) = problems({"model": "tools-model"})
    assert path == "config.rerank.model"
    assert message.startswith("model 'tools-model' is a chat model, not a rerank model (known rerank models: "
                              "rerank-model)")
    ((path, message),) = problems({"llm": "embed-model"})
    assert path == "config.rerank.llm" and "not in the model registry" not in message
    assert message.startswith("model 'embed-model' is an embedding model, not a chat model (known: ")
    ((path, message),) = problems({"model": "embed-model"}, "agent")
    assert path == "config.dataset_tools[0].rerank.model" and "is an embedding model, not a rerank model" in message
    ((path, message),) = problems({"model": "rerank-modl"})
    assert "not in the model registry (did you mean 'rerank-model'?)" in message or "rerank-model" in message

