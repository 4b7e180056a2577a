"""Every file of the corpus (real FastGPT templates, Dify DSL files) imports and compiles.

Each file imports fully, or - where it uses kinds or models Flowloom does not have -
fails listing exactly those problems, and imports with ``allow_partial`` with each of
them in the report. The imported workflows compile against the bundled model registry,
and importing an exported (imported) workflow gives the same workflow.
"""

from __future__ import annotations

import json

import pytest

from nodes.importers import ImportFailed
from nodes.llm.model_registry import load_registry
from tests.support.catalog import compile_workflow, import_workflow

from .helpers import CORPUS, corpus_files, load, needs_corpus

pytestmark = needs_corpus

#: file -> the problems of a plain import: (code, source node id)
EXPECTED_ERRORS: dict[str, list[tuple[str, str]]] = {
    "fastgpt/CQ_template.json": [("unmapped_dataset", "MNMMMIjjWyMU")],
    "fastgpt/TranslateRobot_template.json": [("unknown_model", "loOvhld2ZTKa")],
    "fastgpt/google_template.json": [("unknown_model", "NOgbnBzUwDgT")],
    "fastgpt/simpleDatasetChat_template.json": [("unmapped_dataset", "iKBoX2vIzETU")],
    "fastgpt/srt-translate_template.json": [],
    "dify/basic_chatflow.yml": [("unknown_model", "llm")],
    "dify/conditional_hello_branching_workflow.yml": [],
    "dify/dual_switch_variable_aggregator_workflow.yml": [],
    "dify/increment_loop_with_break_condition_workflow.yml": [],
    "dify/iteration_flatten_output_enabled_workflow.yml": [],
    "dify/knowledge_chat_retrieval.yml": [("unknown_model", "1743994891832")],
}
#: the templates' search nodes have no dataset selected: every one is mapped to one dataset
DATASET_MAP = {"*": "handbook"}
#: model names the templates use that the bundled registry does not have
MODEL_MAP = {"claude-3-5-sonnet-20240620": "gpt-4o", "FastAI-plus": "gpt-4o-mini", "*": "default"}

FILES = [str(p.relative_to(CORPUS)) for p in corpus_files()]


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.delenv("FLOWLOOM_MODELS", raising=False)
    return load_registry()


def test_the_expectations_cover_the_whole_corpus():
    assert sorted(FILES) == sorted(EXPECTED_ERRORS)


@pytest.mark.parametrize("name", FILES)
def test_imports_and_compiles(name, registry):
    path = CORPUS / name
    expected = EXPECTED_ERRORS[name]
    if expected:
        with pytest.raises(ImportFailed) as failed:
            load(path, models=registry)
        got = [(i.code, i.node_id) for i in failed.value.report if i.severity == "error"]
        assert got == expected
        result = load(path, models=registry, allow_partial=True)
        assert [(i.code, i.node_id) for i in result.errors] == expected
        assert result.partial
    else:
        result = load(path, models=registry)
        assert not result.errors
    assert result.source_format == name.split("/")[0]
    plan = compile_workflow(result.workflow, models=registry, use_cache=False)
    assert plan.start_id
    # placeholders: exactly the unsupported nodes (and searches without a dataset), each naming its
    # original kind and reason
    placeholders = {n["id"]: n["config"] for n in result.workflow["nodes"] if n["type"] == "unsupported"}
    assert sorted(placeholders) == sorted(nid for code, nid in expected if code in ("unsupported_node",
                                                                                    "unmapped_dataset"))
    for config in placeholders.values():
        assert config["original_type"] and config["reason"]


@pytest.mark.parametrize("name", [n for n, errors in EXPECTED_ERRORS.items() if errors and
                                  all(code == "unknown_model" for code, _ in errors)])
def test_unknown_models_import_fully_once_mapped(name, registry):
    result = load(CORPUS / name, models=registry, model_map=MODEL_MAP)
    assert not result.errors
    compile_workflow(result.workflow, models=registry, use_cache=False)


@pytest.mark.parametrize("name", FILES)
def test_round_trip(name, registry):
    first = load(CORPUS / name, models=registry, allow_partial=True)
    exported = json.dumps(first.workflow, ensure_ascii=False, indent=2)
    second = import_workflow(exported, models=registry)
    assert second.source_format == "flowloom"
    assert second.workflow == first.workflow
    assert import_workflow(json.dumps(second.workflow), models=registry).workflow == first.workflow


def test_the_same_file_always_gives_the_same_workflow(registry):
    path = CORPUS / "fastgpt/srt-translate_template.json"
    assert load(path, models=registry).workflow == load(path, models=registry).workflow


def test_a_search_without_dataset_is_a_placeholder_keeping_what_the_chat_reads(registry):
    result = load(CORPUS / "fastgpt/CQ_template.json", models=registry, allow_partial=True)
    nodes = {n["id"]: n for n in result.workflow["nodes"]}
    search = nodes["MNMMMIjjWyMU"]
    assert search["type"] == "unsupported"
    assert search["config"]["original_type"] == "datasetSearchNode"
    assert search["config"]["outputs"] == {"chunks": "array"}
    assert search["config"].get("handles", ["out"]) == ["out"]
    assert nodes["7BdojPlukIQw"]["config"]["quote"] == {"ref": "MNMMMIjjWyMU.chunks"}
    issue = next(i for i in result.report if i.node_id == "MNMMMIjjWyMU")
    assert issue.source_type == "datasetSearchNode" and "--dataset '*=ID'" in issue.message
    assert "flowloom datasets create" in issue.message and "flowloom datasets add" in issue.message


@pytest.mark.parametrize("name", ["fastgpt/CQ_template.json", "fastgpt/simpleDatasetChat_template.json"])
def test_dataset_searches_import_fully_once_mapped(name, registry):
    result = load(CORPUS / name, models=registry, dataset_map=DATASET_MAP)
    assert not result.errors and result.datasets == {"*": "handbook"}
    search = next(n for n in result.workflow["nodes"] if n["type"] == "knowledge_retrieval")
    assert search["config"]["datasets"] == ["handbook"]
    assert search["config"]["mode"] == "semantic" and search["config"]["score_threshold"] == 0.4
    assert search["config"]["max_quote_tokens"] == 5000
    chat = next(n for n in result.workflow["nodes"] if n["type"] == "chat")
    assert chat["config"]["quote"] == {"ref": f"{search['id']}.chunks"}
    # FastGPT extends the query with a model the template leaves unset: named, not silently dropped
    assert any(i.code == "not_carried_over" and "datasetSearchUsingExtensionQuery" in i.message
               for i in result.report)
    compile_workflow(result.workflow, models=registry, use_cache=False)


def test_dify_knowledge_retrieval_keeps_its_dataset_id_and_says_how_to_create_it(registry):
    result = load(CORPUS / "dify/knowledge_chat_retrieval.yml", models=registry, model_map=MODEL_MAP)
    search = next(n for n in result.workflow["nodes"] if n["type"] == "knowledge_retrieval")
    source_id = "2516f4a8-9329-4845-a914-7965090ee2e2"
    assert search["config"]["datasets"] == [source_id] and search["config"]["top_k"] == 4
    issue = next(i for i in result.report if i.code == "unmapped_dataset")
    assert issue.severity == "warning"
    assert f"flowloom datasets add {source_id} FILES --wait" in issue.message
    assert f"--dataset '{source_id}=ID'" in issue.message
    llm = next(n for n in result.workflow["nodes"] if n["type"] == "chat")
    assert llm["config"]["quote"] == {"ref": "1743994832383.chunks"} and "{{ quote }}" in llm["config"]["system_prompt"]
    # Its LLM has no memory and only a system prompt: Dify sends it no question, and so do we, but say so.
    assert any(i.code == "behaviour_difference" and "user's question does not reach it" in i.message
               for i in result.report)
    mapped = load(CORPUS / "dify/knowledge_chat_retrieval.yml", models=registry, model_map=MODEL_MAP,
                  dataset_map={source_id: "handbook"})
    assert not any(i.code == "unmapped_dataset" for i in mapped.report)
    assert mapped.datasets == {source_id: "handbook"}


def test_unknown_model_report_names_the_model_and_the_way_out(registry):
    with pytest.raises(ImportFailed) as failed:
        load(CORPUS / "fastgpt/TranslateRobot_template.json", models=registry)
    issue = failed.value.report[[i.severity for i in failed.value.report].index("error")]
    assert "claude-3-5-sonnet-20240620" in issue.message and "--model" in issue.message
    assert "gpt-4o-mini" in issue.message  # the known models are listed
    partial = load(CORPUS / "fastgpt/TranslateRobot_template.json", models=registry, allow_partial=True)
    chat = next(n for n in partial.workflow["nodes"] if n["id"] == "loOvhld2ZTKa")
    assert chat["config"]["model"] == "default"
    assert "using 'default' instead" in partial.errors[0].message
