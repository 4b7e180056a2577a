"""Unit tests of the conversion rules: ids, references, templates, handles, models,
parsing and format detection (nodes/importers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2
import pytest

from engine.references import template_env
from nodes import builtin_catalog
from nodes.importers import ImportFailed, detect_format, parse_source
from nodes.importers.base import flowloom_ids, normalise_workflow
from nodes.importers.fastgpt import FastGPTImporter, signature_defaults
from nodes.importers.refs import Target, Unconvertible, interpolation, join_template, literal
from schemas.types import VarType
from tests.support.catalog import import_workflow

from . import dify_docs as dd
from . import fastgpt_docs as fg


def render(source: str, **names: Any) -> str:
    return template_env().from_string(source).render(**names)


# ------------------------------------------------------------------------ ids


def test_ids_keep_valid_ones_and_map_the_rest_deterministically():
    ids = flowloom_ids(["a b", "a_b", "448745", "inputs", "x.y", "x_y", "中文", "nodes"])
    assert ids == {"a_b": "a_b", "448745": "448745", "x_y": "x_y", "a b": "a_b_2", "inputs": "inputs_node",
                   "x.y": "x_y_2", "中文": "node", "nodes": "nodes_node"}
    assert flowloom_ids(["a b", "a_b", "448745", "inputs", "x.y", "x_y", "中文", "nodes"]) == ids


def test_renamed_node_ids_are_reported_and_references_follow():
    doc = fg.wrap([fg.start("start id"), fg.node("t.1", "textEditor", [fg.inp("system_textareaInput", "x {{q}}"),
                                                                       fg.inp("q", ["start id", "userChatInput"])]),
                   fg.node("a", "answerNode", [fg.inp("text", "{{$t.1.system_text$}}")])],
                  [fg.edge("start id", "t.1"), fg.edge("t.1", "a")])
    result = import_workflow(doc)
    assert [n["id"] for n in result.workflow["nodes"]] == ["start_id", "t_1", "a"]
    assert {(i.code, i.node_id, i.flowloom_id) for i in result.report} == {
        ("renamed_id", "start id", "start_id"), ("renamed_id", "t.1", "t_1")}
    assert result.workflow["nodes"][2]["config"]["text"] == "{{ t_1.output }}"
    assert [(e["source"], e["target"]) for e in result.workflow["edges"]] == [("start_id", "t_1"), ("t_1", "a")]


# ------------------------------------------------------------------------ templates


@pytest.mark.parametrize("text", [
    "plain", "{{x}}", "{% if %}", "{#c#}", "{{{a}}}", "a{", "}}", "{ {", "{%- raw -%}{{x}}{% endraw %}",
    "trailing {", "```json\n{\"a\": {\"b\": 1}}\n```", "line\n",
])
def test_literal_text_renders_as_itself(text):
    assert render(join_template([literal(text)])) == text


def test_escaping_across_a_piece_boundary():
    source = join_template([literal("a{"), ("expr", "{{ x }}"), literal("}")])
    assert source == "a{{ '{' }}{{ x }}}"
    assert render(source, x="b") == "a{b}"


@pytest.mark.parametrize("vtype, value, text", [
    (VarType.string, "hé", "hé"), (VarType.number, 5, "5"), (VarType.number, 0.5, "0.5"),
    (VarType.boolean, True, "true"), (VarType.array, ["a", 1], '["a", 1]'), (VarType.object, {"k": "v"}, '{"k": "v"}'),
    (None, "text", "text"), (None, {"k": [1]}, '{"k": [1]}'), (VarType.any, None, "null"),
])
def test_interpolation_writes_values_like_fastgpt_and_dify(vtype, value, text):
    target = Target("node", "n1", "out", type=vtype)
    assert render(interpolation(target), n1={"out": value}) == text


def test_interpolation_inside_a_json_string_keeps_the_body_valid():
    source = join_template([literal('{"q": "'), ("expr", interpolation(Target("sys", "query", type=VarType.string),
                                                                      in_json_string=True)), literal('", "n": '),
                            ("expr", interpolation(Target("inputs", "n", type=VarType.number))), literal("}")])
    body = render(source, sys={"query": 'say "hi"\n\\'}, inputs={"n": 3})
    assert json.loads(body) == {"q": 'say "hi"\n\\', "n": 3}


def test_target_references_and_expressions():
    assert Target("node", "17a", "json", ("data", "items", 0, "a.b")).ref() == '17a.json.data.items[0]["a.b"]'
    assert Target("node", "17a", "json", ("data", "items", 0)).expr() == "nodes['17a'].json.data[\"items\"][0]"
    assert Target("node", "llm", "answer").expr() == "llm.answer"
    assert Target("node", "if", "case").expr() == "nodes['if'].case"  # a Jinja keyword
    assert Target("node", "q", "output").expr({"q"}) == "nodes['q'].output"  # shadowed by a bound name
    assert Target("vars", "count").expr() == "vars.count"
    assert Target("node", "n", "items").expr() == 'n["items"]'  # dict method name
    assert Target("inputs", "城市").expr() == 'inputs["城市"]'
    assert Target("node", "n", "_private", ("_x",)).expr() == 'n["_private"]["_x"]'
    assert render("{{ " + Target("node", "n", "_private").expr() + " }}", n={"_private": "ok"}) == "ok"
    assert Target("node", "n", "json", ('a."b',)).ref() == """n.json['a."b']"""  # the other quote kind
    with pytest.raises(Unconvertible, match="both quote kinds"):
        Target("node", "n", "json", ('a."b\'',)).ref()
    with pytest.raises(Unconvertible):
        Target("local", "quote").ref()


def test_fastgpt_templates():
    doc = fg.branches()
    importer = FastGPTImporter(doc, catalog=builtin_catalog())
    importer.plan()
    importer.map_edges()
    importer._analyse()
    importer.reader = "te"
    importer._current = doc["workflow"]["nodes"][2]
    local = {"who": Target("local", "who", type=VarType.string)}
    assert importer.template("{{who}}/{{city}}/{{cTime}}/{{ who }}/{{nope}}", local) == \
        "{{ who }}/{{ vars.city }}/{{ sys.now }}/{{ '{' }}{ who }}/{{ '{' }}{nope}}"
    assert importer.template("{{$VARIABLE_NODE_ID.count$}} {{$start.userChatInput$}}") == \
        "{{ vars.count | json }} {{ sys.query }}"
    with pytest.raises(Unconvertible, match="not in the file"):
        importer.template("{{$ghost.out$}}")


# ------------------------------------------------------------------------ handles


@pytest.mark.parametrize("kind, raw, handle", [
    ("ifElseNode", "n-source-IF", "IF"), ("ifElseNode", "n-source-ELSE IF 2", "ELSE_IF_2"),
    ("ifElseNode", "n-source-ELSE", "else"), ("classifyQuestion", "n-source-wqre", "wqre"),
    ("classifyQuestion", "n-source-error", "error_"), ("userSelect", "n-source-option 1", "option_1"),
    ("chatNode", "n-source-right", "out"), ("code", "n-source_catch-right", "error"), ("code", "source-right", "out"),
    ("textEditor", "n-source-left", "out"),
])
def test_fastgpt_handles(kind, raw, handle):
    importer = FastGPTImporter(fg.wrap([fg.start(), fg.node("n", kind)], []), catalog=builtin_catalog())
    assert importer._handle("n", raw) == handle


def test_dify_handles():
    doc = dd.app([dd.node("s", "start", variables=[]),
                  dd.node("if", "if-else", cases=[{"case_id": "c-1", "logical_operator": "and", "conditions": [
                      {"variable_selector": ["sys", "query"], "comparison_operator": "empty", "value": ""}]}]),
                  dd.node("a", "answer", answer="a"), dd.node("b", "answer", answer="b"),
                  dd.node("h", "http-request", method="get", url="http://x", error_strategy="fail-branch"),
                  dd.node("c", "answer", answer="c")],
                 [dd.edge("s", "if"), dd.edge("if", "a", "c-1"), dd.edge("if", "h", "false"), dd.edge("h", "b"),
                  dd.edge("h", "c", "fail-branch")])
    result = import_workflow(doc)
    edges = {(e["source"], e["sourceHandle"], e["target"]) for e in result.workflow["edges"]}
    assert edges == {("s", "out", "if"), ("if", "c-1", "a"), ("if", "else", "h"), ("h", "out", "b"),
                     ("h", "error", "c")}
    assert result.workflow["nodes"][1]["config"]["cases"][0]["id"] == "c-1"


# ------------------------------------------------------------------------ code defaults


@pytest.mark.parametrize("language, code, defaults", [
    ("javascript", "function main({a, i=0, s = 'x', f=1.5, b=true, n=null, l=[]}){}", {"i": 0, "s": "x", "f": 1.5,
                                                                                        "b": True, "n": None,
                                                                                        "l": []}),
    ("javascript", "async function main({ chunks, currentIndex = 0 }) {}", {"currentIndex": 0}),
    ("javascript", "const main = async ({x = \"y\", z = foo()}) => ({})", {"x": "y"}),
    ("javascript", "function main(params) { return params }", {}),
    ("python", "def main(a, i: int = 0, *, k='v'):\n    return {}", {"i": 0, "k": "v"}),
    ("python", "def main(a, b=len('x')):\n    pass", {}),
    ("python", "not python (", {}),
])
def test_signature_defaults(language, code, defaults):
    assert signature_defaults(language, code) == defaults


def test_importing_never_runs_code(tmp_path):
    marker = tmp_path / "ran"
    code = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\ndef main():\n    return {{}}\n"
    doc = dd.app([dd.node("s", "start", variables=[]),
                  dd.node("c", "code", code_language="python3", code=code, variables=[], outputs={}),
                  dd.node("e", "end", outputs=[])], [dd.edge("s", "c"), dd.edge("c", "e")])
    result = import_workflow(doc)
    assert result.workflow["nodes"][1]["config"]["code"] == code
    assert not marker.exists()


# ------------------------------------------------------------------------ models


def test_model_names_map_onto_the_registry(scripted_registry):
    def model_of(name: str, **kw: Any) -> str:
        doc = fg.wrap([fg.start(), fg.node("c", "chatNode", [fg.inp("model", name),
                                                             fg.inp("userChatInput", ["start", "userChatInput"])])],
                      [fg.edge("start", "c")])
        return import_workflow(doc, models=scripted_registry, **kw).workflow["nodes"][1]["config"]["model"]

    assert model_of("tools-model") == "tools-model"
    assert model_of("TOOLS-MODEL") == "tools-model"
    assert model_of("upstream-tools") == "tools-model"  # the provider's model id
    assert model_of("gpt-4o", model_map={"gpt-4o": "plain-model"}) == "plain-model"
    assert model_of("anything", model_map={"*": "plain-model"}) == "plain-model"
    with pytest.raises(ImportFailed) as failed:
        model_of("gpt-5")
    (issue,) = failed.value.report
    assert issue.code == "unknown_model" and issue.node_id == "c" and issue.source_type == "chatNode"
    assert "'gpt-5'" in issue.message and "plain-model, tools-model" in issue.message
    with pytest.raises(ImportFailed, match="mapped to 'nope'"):
        model_of("gpt-5", model_map={"gpt-5": "nope"})


def test_unknown_model_without_a_default_model_becomes_a_placeholder(scripted_registry):
    doc = fg.wrap([fg.start(), fg.node("c", "chatNode", [fg.inp("model", "gpt-5")])], [fg.edge("start", "c")])
    result = import_workflow(doc, models=scripted_registry, allow_partial=True)
    assert result.workflow["nodes"][1]["type"] == "unsupported"
    assert [(i.code, i.node_id) for i in result.errors] == [("unknown_model", "c")]


# ------------------------------------------------------------------------ references


def test_reading_inside_a_loop_body_from_outside_is_reported():
    doc = fg.http_catch()
    answer = next(n for n in doc["workflow"]["nodes"] if n["nodeId"] == "ok")
    answer["inputs"][0]["value"] = "{{$inner.r1$}}"
    with pytest.raises(ImportFailed) as failed:
        import_workflow(doc)
    (issue,) = [i for i in failed.value.report if i.severity == "error"]
    assert issue.code == "unsupported_reference" and issue.node_id == "ok"
    assert "does not run before it" in issue.message


def test_a_node_that_does_not_compile_is_reported_and_replaced_in_a_partial_import():
    doc = fg.llm_kinds()
    cq = next(n for n in doc["workflow"]["nodes"] if n["nodeId"] == "cq")
    cq["inputs"][4]["value"] = [{"value": "Same", "key": "a"}, {"value": "same", "key": "b"}]
    with pytest.raises(ImportFailed) as failed:
        import_workflow(doc, model_map={"*": "gpt-4o-mini"})
    assert [(i.code, i.node_id) for i in failed.value.report if i.severity == "error"] == [
        ("compile_invalid_config", "cq")]
    result = import_workflow(doc, model_map={"*": "gpt-4o-mini"}, allow_partial=True)
    cq_node = next(n for n in result.workflow["nodes"] if n["id"] == "cq")
    assert cq_node["type"] == "unsupported" and "both read as" in cq_node["config"]["reason"]
    assert cq_node["config"]["handles"] == ["adult", "child"]
    assert cq_node["config"]["outputs"] == {"category_name": "string"}


# ------------------------------------------------------------------------ parsing


def test_formats_are_detected():
    assert detect_format(fg.llm_kinds()) == "fastgpt"
    assert detect_format(fg.llm_kinds()["workflow"]) == "fastgpt"
    assert detect_format(dd.support_chat()) == "dify"
    assert detect_format({"graph": dd.support_chat()["workflow"]["graph"]}) == "dify"
    assert detect_format({"id": "w", "nodes": [{"id": "s", "type": "start"}], "edges": []}) == "flowloom"
    with pytest.raises(ImportFailed, match="not a FastGPT workflow"):
        detect_format({"nodes": "x"})


def test_yaml_is_parsed_safely(tmp_path: Path):
    assert parse_source(b"a: 1\nb: [x, y]\n") == {"a": 1, "b": ["x", "y"]}
    with pytest.raises(ImportFailed, match="aliases"):
        parse_source("a: &x [1, 2]\nb: *x\n")
    with pytest.raises(ImportFailed, match="neither JSON"):
        parse_source("a: !!python/object/apply:os.system ['touch x']\n")
    with pytest.raises(ImportFailed, match="must hold an object"):
        parse_source("[1, 2]")
    with pytest.raises(ImportFailed, match="not UTF-8"):
        parse_source(b"\xff\xfe\x00a")
    with pytest.raises(ImportFailed, match="larger than"):
        parse_source(b" " * (20 * 1024 * 1024 + 1))


def test_a_flowloom_workflow_imports_as_itself():
    doc = {"id": "hello", "name": "Hello", "inputs": [{"name": "name", "type": "string", "required": True}],
           "nodes": [{"id": "start", "type": "start"},
                     {"id": "greet", "type": "template", "config": {"template": "Hello {{ inputs.name }}!"}},
                     {"id": "say", "type": "answer", "config": {"text": "{{ greet.output }}"}}],
           "edges": [{"id": "e1", "source": "start", "target": "greet"},
                     {"id": "e2", "source": "greet", "sourceHandle": "out", "target": "say"}]}
    result = import_workflow(doc)
    assert result.source_format == "flowloom" and result.report == []
    assert result.workflow == normalise_workflow(doc, builtin_catalog()) == normalise_workflow(result.workflow, builtin_catalog())
    assert result.workflow["edges"][0]["sourceHandle"] == "out"
    bad = {**doc, "edges": [{"id": "e1", "source": "start", "sourceHandle": "nope", "target": "greet"}]}
    with pytest.raises(ImportFailed) as failed:
        import_workflow(bad)
    assert "compile_unknown_handle" in [i.code for i in failed.value.report]


def test_jinja_parses_every_template_of_the_corpus_like_output():
    # every template field an import writes must parse (the compiler checks it; this is a smoke check)
    result = import_workflow(fg.branches())
    for node in result.workflow["nodes"]:
        for key in ("template", "text", "description"):
            source = (node.get("config") or {}).get(key)
            if isinstance(source, str):
                template_env().parse(source)
    with pytest.raises(jinja2.TemplateSyntaxError):
        template_env().parse("{{ unbalanced")
