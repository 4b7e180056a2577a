"""The corpus' knowledge-base files imported with a dataset map and run against a dataset
filled from a test document (the real SQLite knowledge store and KnowledgeService, the
scripted server's embeddings and chat): FastGPT's simple dataset chat and Dify's
knowledge chat answer from the document and cite it."""

from __future__ import annotations

from typing import Any

from nodes.importers import API_MODEL_HINTS
from tests.support.openai_server import openai_server, scripted_registry, text_reply  # noqa: F401  (fixtures)
from tests.support.policy_kb import open_policy_kb

from .helpers import DIFY, FASTGPT, load, needs_corpus, run

pytestmark = needs_corpus

QUESTION = "refunds paid to the original card within how many days after the returned item arrives"


def search_and_chat(state: Any, search_id: str, chat_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    assert state.status == "succeeded", state.error
    return state.node_runs[search_id].outputs["chunks"], state.node_runs[chat_id].outputs


async def test_fastgpt_simple_dataset_chat_answers_from_the_mapped_dataset(openai_server, scripted_registry, tmp_path):
    result = load(FASTGPT / "simpleDatasetChat_template.json", models=scripted_registry,
                  model_map={"gpt-4o-mini": "tools-model"}, dataset_map={"*": "policies"})
    assert not result.errors
    openai_server.script(text_reply("Within 14 days [1]."))
    async with open_policy_kb(tmp_path, scripted_registry, tenant="default") as kb:
        state, _ = await run(result, registry=scripted_registry, tmp_path=tmp_path, knowledge=kb, query=QUESTION)
    chunks, chat = search_and_chat(state, "iKBoX2vIzETU", "7BdojPlukIQw")
    assert chunks and "14 days" in chunks[0]["text"] and chunks[0]["dataset_id"] == "policies"
    assert all(c["score"] > 0 for c in chunks)
    assert chat["answer"] == "Within 14 days [1]." and chat["citations"][0]["source_name"] == "returns.md"
    system = openai_server.bodies[0]["messages"][0]["content"]
    assert "[1] source: returns.md" in system and "14 days" in system  # FastGPT's quote role: system


async def test_dify_knowledge_chat_answers_from_the_mapped_dataset(openai_server, scripted_registry, tmp_path):
    source_id = "2516f4a8-9329-4845-a914-7965090ee2e2"
    result = load(DIFY / "knowledge_chat_retrieval.yml", models=scripted_registry,
                  model_map={"deepseek-v3-241226": "tools-model"}, dataset_map={source_id: "policies"})
    assert not result.errors and result.datasets == {source_id: "policies"}
    openai_server.script(text_reply("参考 [1]：14 天内退款。"))
    async with open_policy_kb(tmp_path, scripted_registry, tenant="default") as kb:
        state, _ = await run(result, registry=scripted_registry, tmp_path=tmp_path, knowledge=kb, query=QUESTION)
    chunks, chat = search_and_chat(state, "1743994832383", "1743994891832")
    assert len(chunks) <= 4 and "14 days" in chunks[0]["text"]
    # Dify's prompt places the context itself ({{#context#}} -> {{ quote }}): the numbered chunks are there
    system = openai_server.bodies[0]["messages"][0]["content"]
    assert "<info>\n[1] source: returns.md" in system
    assert [c["citation_id"] for c in chat["citations"]] == ["1"]
    assert state.answer == "参考 [1]：14 天内退款。"


async def test_fastgpt_search_merge_runs_as_a_sandboxed_rrf_over_both_searches(openai_server, scripted_registry,
                                                                                tmp_path):
    from engine.settings import Settings

    from .fastgpt_docs import edge, inp, node, out, start, wrap

    def search(nid: str, dataset: str, query: Any, y: float) -> dict[str, Any]:
        return node(nid, "datasetSearchNode", [
            inp("datasets", [{"datasetId": dataset}], "selectDataset"), inp("similarity", 0.0, "number"),
            inp("limit", 2000, "number"), inp("searchMode", "fullTextRecall"), inp("userChatInput", query)],
            [out("quoteQA", value_type="datasetQuote")], y=y)

    doc = wrap([
        start(),
        search("s1", "kb-refunds", ["start", "userChatInput"], 0),
        search("s2", "kb-hours", "shop opens closes Monday Saturday", 200),
        node("merge", "datasetConcatNode", [inp("limit", 3000, "number"),
                                            inp("a1", ["s1", "quoteQA"], "datasetQuote"),
                                            inp("a2", ["s2", "quoteQA"], "datasetQuote")],
             [out("quoteQA", value_type="datasetQuote")]),
        node("chat", "chatNode", [inp("model", "gpt-4o-mini"), inp("userChatInput", ["start", "userChatInput"]),
                                  inp("quoteQA", ["merge", "quoteQA"], "datasetQuote"),
                                  inp("aiChatQuoteRole", "user")], [out("answerText")]),
    ], [edge("start", "s1"), edge("start", "s2"), edge("s1", "merge"), edge("s2", "merge"), edge("merge", "chat")])
    result = load_doc(doc, scripted_registry, {"*": "policies"})
    merge = next(n for n in result.workflow["nodes"] if n["id"] == "merge")
    assert merge["type"] == "code" and merge["config"]["outputs"] == [{"name": "chunks", "type": "array"}]
    openai_server.script(text_reply("14 days [1]; open nine to six [2]."))
    settings = Settings(code_sandbox="bwrap", allow_unsandboxed_code=False)
    async with open_policy_kb(tmp_path, scripted_registry, tenant="default") as kb:
        state, _ = await run(result, registry=scripted_registry, tmp_path=tmp_path, knowledge=kb, query=QUESTION,
                             settings=settings)
    assert state.status == "succeeded", state.error
    merged = state.node_runs["merge"].outputs["chunks"]
    texts = [c["text"] for c in merged]
    assert any("14 days" in t for t in texts) and any("opens at nine" in t for t in texts)
    assert len({c["chunk_id"] for c in merged}) == len(merged), "each chunk once"
    user = openai_server.bodies[0]["messages"][-1]["content"]
    assert "[1] source: returns.md" in user and "[2] source: returns.md" in user
    assert [c["citation_id"] for c in state.node_runs["chat"].outputs["citations"]] == ["1", "2"]


def load_doc(doc: dict[str, Any], registry: Any, dataset_map: dict[str, str]) -> Any:
    import json

    from tests.support.catalog import import_workflow

    result = import_workflow(json.dumps(doc), models=registry, model_map={"gpt-4o-mini": "tools-model"},
                             dataset_map=dataset_map)
    assert not result.errors, result.report
    return result



def test_a_dataset_map_source_no_search_names_is_a_warning_naming_it(scripted_registry):
    source_id = "2516f4a8-9329-4845-a914-7965090ee2e2"
    result = load(DIFY / "knowledge_chat_retrieval.yml", models=scripted_registry,
                  model_map={"deepseek-v3-241226": "tools-model"},
                  dataset_map={source_id: "policies", "foo": "emb2", "*": "fallback"})
    assert not result.errors and result.datasets == {source_id: "policies"}
    (warning,) = [i for i in result.report if i.code == "unmatched_dataset"]
    assert warning.severity == "warning" and "'foo'" in warning.message and source_id in warning.message
    assert "'*'" not in warning.message  # the fallback matches every unmapped source, used or not
    mapped = load(DIFY / "knowledge_chat_retrieval.yml", models=scripted_registry,
                  model_map={"deepseek-v3-241226": "tools-model"}, dataset_map={source_id: "policies"})
    assert not [i for i in mapped.report if i.code == "unmatched_dataset"]


def test_a_mapping_to_a_dataset_the_tenant_lacks_is_a_warning_naming_the_closest_one(scripted_registry):
    def imported(target: str, datasets: set[str] | None, **kw: Any) -> list[Any]:
        result = load(DIFY / "knowledge_chat_retrieval.yml", models=scripted_registry, dataset_map={"*": target},
                      model_map={"deepseek-v3-241226": "tools-model"}, datasets=datasets, **kw)
        assert not result.errors
        return [i for i in result.report if i.code == "unknown_dataset"]

    (typo,) = imported("ofice-sem", {"office", "office-sem"})
    assert typo.severity == "warning" and "dataset 'ofice-sem' (mapped from '*') does not exist" in typo.message
    assert "did you mean 'office-sem'?" in typo.message and "--dataset '*=office-sem'" in typo.message
    assert "flowloom datasets create NAME --id ofice-sem" in typo.message
    (far,) = imported("zzz", {"office"}, hints=API_MODEL_HINTS)
    assert "did you mean" not in far.message and '"dataset_map": {"*": "ID"}' in far.message
    assert 'POST /v1/datasets {"name": "NAME", "id": "zzz"}' in far.message
    assert imported("office", {"office"}) == [] and imported("ofice", None) == []  # None: the tenant is not known


def test_a_source_rerank_model_maps_to_a_rerank_model_of_the_registry_only(scripted_registry):
    from tests.support.catalog import import_workflow

    text = (DIFY / "knowledge_chat_retrieval.yml").read_text().replace("reranking_enable: false",
                                                                        "reranking_enable: true")

    def imported(target: str) -> Any:
        return import_workflow(text, models=scripted_registry, dataset_map={"*": "policies"},
                               model_map={"deepseek-v3-241226": "tools-model", "BAAI/bge-reranker-v2-m3": target})

    result = imported("rerank-model")
    (search,) = [n for n in result.workflow["nodes"] if n["type"] == "knowledge_retrieval"]
    assert not result.errors and search["config"]["rerank"]["model"] == "rerank-model"
    chat = imported("tools-model")  # a chat model: not a rerank model, so no rerank (and a warning)
    (search,) = [n for n in chat.workflow["nodes"] if n["type"] == "knowledge_retrieval"]
    assert not chat.errors and not (search["config"].get("rerank") or {}).get("model")
    assert any(i.code == "not_carried_over" and "BAAI/bge-reranker-v2-m3" in i.message for i in chat.report)
