"""Compiler rules (engine/compiler.py docstring): every problem, at once, located precisely."""

from __future__ import annotations

import pytest

from engine import CompileError
from engine.plain_errors import a_or_an
from engine.shapes import workflow_writes
from nodes import builtin_catalog
from tests.support import fake_nodes  # noqa: F401  (registers the probe kind)
from tests.support.catalog import check_workflow, compile_workflow
from tests.support.workflows import build, chain_edges, edge, node


def errors(doc):
    return sorted(
        ((p.code, p.node_id, p.edge_id, p.path) for p in check_workflow(doc) if p.severity == "error"),
        key=lambda row: tuple(x or "" for x in row),
    )


def tpl(node_id, text, **fields):
    return node(node_id, "template", {"template": text}, **fields)


CASES = {
    "unknown_kind": (
        build([node("x", "teleport", {})], [edge("start", "x")]),
        [("unknown_kind", "x", None, "type")],
    ),
    "missing_required_config": (
        build([node("t", "template", {})], [edge("start", "t")]),
        [("missing_config", "t", None, "config.template")],
    ),
    "invalid_config_deep_path": (
        build([node("c", "if_else", {"cases": [{"id": "a", "conditions": [{"left": 1, "operator": "nope", "right": 2}]}]})],
              [edge("start", "c")]),
        [("invalid_config", "c", None, "config.cases[0].conditions[0].operator")],
    ),
    "malformed_reference": (
        build([node("t", "template", {"template": "x", "variables": [{"name": "v", "value": {"ref": "t"}}]})],
              [edge("start", "t")]),
        [("invalid_config", "t", None, "config.variables[0].value")],
    ),
    "duplicate_ids": (
        build([tpl("a", "1"), tpl("a", "2")], [edge("start", "a", edge_id="e"), edge("start", "a", edge_id="e")]),
        [("duplicate_edge_id", None, "e", None), ("duplicate_node_id", "a", None, None)],
    ),
    "reserved_node_id": (
        build([tpl("inputs", "x")], [edge("start", "inputs")]),
        [("reserved_node_id", "inputs", None, None)],
    ),
    "dangling_edges": (
        build([tpl("a", "x")], [edge("start", "a"), edge("a", "ghost", edge_id="e2"), edge("nobody", "a", edge_id="e3")]),
        [("dangling_edge", None, "e2", "target"), ("dangling_edge", None, "e3", "source")],
    ),
    "dangling_edge_of_an_invalid_node": (  # a node's own problem does not hide its edge's
        build([node("t", "template", {"template": "x", "bogus": 1})],
              [edge("start", "t"), edge("t", "ghost", edge_id="e2"), edge("nobody", "t", edge_id="e3")]),
        [("invalid_config", "t", None, "config.bogus"), ("dangling_edge", None, "e2", "target"),
         ("dangling_edge", None, "e3", "source")],
    ),
    "unknown_handle": (
        build([node("c", "if_else", {"cases": [{"id": "yes", "conditions": [{"left": 1, "operator": "equals", "right": 1}]}]}),
               tpl("a", "x"), tpl("b", "y")],
              [edge("start", "c"), edge("c", "a", "yes"), edge("c", "b", "maybe", edge_id="bad"),
               edge("a", "b", "error", edge_id="bad2")]),
        [("unknown_handle", "a", "bad2", "sourceHandle"), ("unknown_handle", "c", "bad", "sourceHandle")],
    ),
    "cycle": (
        build([tpl("a", "1"), tpl("b", "2"), tpl("c", "3")], chain_edges("start", "a", "b", "c") + [edge("c", "a")]),
        [("cycle", "a", "c-out-a", None)],
    ),
    "self_loop": (
        build([tpl("a", "1")], [edge("start", "a"), edge("a", "a")]),
        [("cycle", "a", "a-out-a", None)],
    ),
    "references": (
        build([tpl("a", "1"), tpl("b", "2"),
               node("t", "template", {"template": "{{ ghost.x }} {{ a.nothing }} {{ b.output }} {{ inputs.nope }}",
                                      "variables": [{"name": "v", "value": {"ref": "sys.whatever"}},
                                                    {"name": "w", "value": {"ref": "vars.undeclared"}}]})],
              [edge("start", "a"), edge("a", "t"), edge("start", "b")]),
        [("not_ancestor", "t", None, "config.template"), ("unknown_input", "t", None, "config.template"),
         ("unknown_output", "t", None, "config.template"), ("unknown_sys", "t", None, "config.variables[0].value"),
         ("unknown_template_name", "t", None, "config.template"),
         ("unknown_variable", "t", None, "config.variables[1].value")],
    ),
    "structured_reference_to_unknown_node_and_non_ancestor": (
        build([node("j", "variable_aggregator", {"refs": [{"ref": "ghost.output"}, {"ref": "side.output"}]}),
               tpl("side", "s")],
              [edge("start", "j"), edge("start", "side")]),
        [("not_ancestor", "j", None, "config.refs[1]"), ("unknown_node", "j", None, "config.refs[0]")],
    ),
    "type_mismatch": (
        build([tpl("t", "text"),
               node("c", "if_else", {"cases": [{"id": "big", "conditions": [
                   {"left": {"ref": "t.output"}, "operator": "gt", "right": 3}]}]}),
               node("e", "end", {"outputs": [{"name": "n", "type": "number", "value": {"ref": "inputs.flag"}}]})],
              chain_edges("start", "t", "c") + [edge("c", "e", "big")],
              inputs=[{"name": "flag", "type": "boolean"}]),
        [("type_mismatch", "c", None, "config.cases[0].conditions[0].left"),
         ("type_mismatch", "e", None, "config.outputs[0].value")],
    ),
    "no_start": (
        {"id": "wf", "nodes": [tpl("a", "x")], "edges": []},
        [("no_start", None, None, None)],
    ),
    "multiple_start_and_edge_into_start": (
        build([node("start", "start"), node("s2", "start"), tpl("a", "x")],
              [edge("start", "a"), edge("a", "s2", edge_id="back")]),
        [("edge_into_start", "s2", "back", None), ("multiple_start", None, None, None)],
    ),
    "template_syntax": (
        build([tpl("t", "{{ unclosed ")], [edge("start", "t")]),
        [("template_syntax", "t", None, "config.template")],
    ),
    "default_output_policy": (
        build([tpl("t", "x", error_strategy="default_output", default_output={"nope": 1}, default_handle="zzz")],
              [edge("start", "t")]),
        [("invalid_default_output", "t", None, "default_output.nope"),
         ("unknown_default_handle", "t", None, "default_handle")],
    ),
    "invalid_document_top_level": (
        {"id": "has space", "nodes": [{"id": "start", "type": "start"}], "edges": [{"id": "e1", "source": "start"}]},
        [("invalid_document", None, None, "id"), ("invalid_document", None, "e1", "edges[0].target")],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_compile_reports_exact_problem_list(case):
    doc, expected = CASES[case]
    assert errors(doc) == sorted(expected, key=lambda row: tuple(x or "" for x in row))
    with pytest.raises(CompileError) as info:
        compile_workflow(doc, use_cache=False)
    assert {p.code for p in info.value.problems if p.severity == "error"} == {e[0] for e in expected}


def test_all_problems_reported_at_once():
    doc = build([node("x", "teleport"), node("t", "template", {}), tpl("a", "{{ ghost.out }}")],
                [edge("start", "a"), edge("a", "nowhere", edge_id="dangle")])
    codes = sorted(p.code for p in check_workflow(doc))
    assert codes == ["dangling_edge", "missing_config", "unknown_kind", "unknown_template_name"]


def test_unreachable_node_is_a_warning_not_an_error():
    doc = build([tpl("a", "x"), tpl("island", "y")], [edge("start", "a")])
    plan = compile_workflow(doc, use_cache=False)
    assert [(w.code, w.node_id, w.severity) for w in plan.warnings] == [("unreachable", "island", "warning")]


def test_problem_messages_say_how_to_fix():
    doc = build([tpl("a", "{{ b.output }}"), tpl("b", "x")], [edge("start", "a"), edge("start", "b")])
    (problem,) = check_workflow(doc)
    assert "not upstream" in problem.message and "connect it upstream" in problem.message
    assert str(problem).startswith("[not_ancestor] node 'a' config.template:")


def test_compile_is_cached_by_content_hash():
    doc = build([tpl("a", "x")], [edge("start", "a")])
    first = compile_workflow(doc)
    again = compile_workflow({**doc})  # equal content, different object
    assert first is again
    changed = compile_workflow(build([tpl("a", "y")], [edge("start", "a")]))
    assert changed is not first and changed.content_hash != first.content_hash


def test_reference_paths_and_nodes_scope_compile():
    doc = build([node("p", "probe", {"value": {"items": [{"name": "n"}]}}),
                 node("t", "template", {"template": "{{ nodes['p'].value['items'][0].name }} {{ p.value.items }}"})],
                chain_edges("start", "p", "t"))
    assert check_workflow(doc) == []


def test_invalid_start_node_is_not_also_reported_missing():
    doc = {"id": "wf", "nodes": [{"id": "start", "type": "start", "timeout": -1}], "edges": []}
    assert errors(doc) == [("invalid_config", "start", None, "timeout")]


def test_every_catalog_kind_has_an_importable_executor_and_its_own_config():
    from nodes import builtin_catalog

    catalog = builtin_catalog()
    for kind in catalog:
        spec = catalog[kind]
        assert spec.executor_class().kind == kind, kind
        assert spec.config.kind == kind, kind


def test_a_config_named_by_path_is_imported_on_first_read_and_fingerprinted_like_its_class():
    """A kind's config may be named ``module:Class`` (the built-in catalog does so for its
    LLM, agent, code and knowledge kinds): the catalog is built without importing it, the
    class is what ``config`` gives, and the plan cache's key is the same either way."""
    from engine.catalog import KindSpec, NodeCatalog
    from schemas.nodes import TemplateConfig

    by_path = NodeCatalog.of(KindSpec("template", "schemas.nodes:TemplateConfig", "nodes.template:TemplateNode"))
    by_class = NodeCatalog.of(KindSpec("template", TemplateConfig, "nodes.template:TemplateNode"))
    assert by_path.fingerprint == by_class.fingerprint
    assert by_path["template"].config is TemplateConfig
    assert by_path["template"].config_path == by_class["template"].config_path == "schemas.nodes:TemplateConfig"


def test_a_config_path_naming_another_kind_or_no_config_fails_when_it_is_read():
    from engine.catalog import KindSpec, NodeCatalog

    catalog = NodeCatalog.of(KindSpec("answer", "schemas.nodes:TemplateConfig", "nodes.template:TemplateNode"),
                             KindSpec("end", "schemas.nodes:FormField", "nodes.start:EndNode"))
    with pytest.raises(ValueError, match="kind 'answer': config class TemplateConfig declares kind 'template'"):
        _ = catalog["answer"].config
    with pytest.raises(ImportError, match="is not a node config class"):
        _ = catalog["end"].config


def test_only_unknown_kinds_are_reported_not_crashed_on():
    doc = {"id": "wf", "nodes": [{"id": "a", "type": "ghost"}], "edges": []}
    assert [p.code for p in check_workflow(doc)] == ["unknown_kind", "no_start"]


def test_a_bad_handle_or_bad_node_does_not_hide_other_problems_or_add_knock_on_ones():
    doc = build([tpl("greet", "hi"), tpl("ref", "{{ greet.nope }}"), tpl("tail", "x"),
                 node("gate", "if_else", {"cases": [{"id": "big", "conditions": [
                     {"left": 1, "operator": ">", "right": 0}]}]}), tpl("after_gate", "{{ greet.output }}")],
                [edge("start", "greet"), edge("greet", "ref", "bogus", edge_id="e4"), edge("ref", "tail"),
                 edge("greet", "gate"), edge("gate", "after_gate", "small", edge_id="e6")])
    assert errors(doc) == sorted([
        ("invalid_config", "gate", None, "config.cases[0].conditions[0].operator"),
        ("unknown_handle", "greet", "e4", "sourceHandle"),
        ("unknown_output", "ref", None, "config.template"),
    ], key=lambda row: tuple(x or "" for x in row))
    assert [p for p in check_workflow(doc) if p.severity == "warning"] == []


# ------------------------------------------------------- messages a person reads


def messages(doc, code):
    return [p.message for p in check_workflow(doc) if p.code == code]


@pytest.mark.parametrize("kind, suggestion", [("templat", "template"), ("If_Else", "if_else"), ("answr", "answer")])
def test_unknown_kind_suggests_the_closest_kind(kind, suggestion):
    (message,) = messages(build([node("x", kind, {})], [edge("start", "x")]), "unknown_kind")
    assert f"did you mean {suggestion!r}?" in message and "(known: " in message


def test_unknown_kind_far_from_every_kind_suggests_nothing():
    (message,) = messages(build([node("x", "teleport", {})], [edge("start", "x")]), "unknown_kind")
    assert "did you mean" not in message


def test_dangling_edge_suggests_the_node_meant():
    doc = build([tpl("greeting", "x")], [edge("start", "greeting"), edge("greeting", "greetng", edge_id="e2")])
    (message,) = messages(doc, "dangling_edge")
    assert message == "edge points to unknown node(s) 'greetng'; did you mean 'greeting'?"


def test_unknown_handle_suggests_and_lists_handles_without_python_lists():
    doc = build([node("c", "if_else", {"cases": [{"id": "yes", "conditions": [
                    {"left": 1, "operator": "equals", "right": 1}]}]}), tpl("a", "x")],
                [edge("start", "c"), edge("c", "a", "yse", edge_id="bad")])
    (message,) = messages(doc, "unknown_handle")
    assert "did you mean 'yes'?" in message and "(handles: yes, else)" in message and "[" not in message


def test_unknown_reference_node_output_and_input_suggest_close_names():
    doc = build([tpl("greet", "hi"),
                 node("j", "variable_aggregator", {"refs": [{"ref": "gret.output"}]}),
                 tpl("t", "{{ greet.outptu }} {{ inputs.nmae }}")],
                chain_edges("start", "greet", "j", "t"), inputs=[{"name": "name", "type": "string"}])
    assert messages(doc, "unknown_node") == ["reference to unknown node 'gret'; did you mean 'greet'?"]
    assert messages(doc, "unknown_output") == ["node 'greet' has no output 'outptu'; did you mean 'output'? "
                                               "(outputs: output)"]
    assert messages(doc, "unknown_input") == ["inputs.nmae is not declared; did you mean 'name'? (declared: name)"]


def test_unknown_template_name_suggests_a_node_id():
    doc = build([tpl("greet", "hi"), tpl("t", "{{ gret.output }}")], chain_edges("start", "greet", "t"))
    (message,) = messages(doc, "unknown_template_name")
    assert "did you mean 'greet'?" in message


def test_a_misspelt_chat_message_role_suggests_the_role_meant():
    doc = build([node("c", "chat", {"model": "default", "examples": [{"role": "usr", "text": "hi"}]})],
                [edge("start", "c")])
    (problem,) = [p for p in check_workflow(doc) if p.code == "invalid_config"]
    assert problem.path == "config.examples[0].role"
    assert problem.message == "must be 'user' or 'assistant' (got 'usr'); did you mean 'user'?"


@pytest.mark.parametrize("word, phrase", [("agent", "an agent"), ("if_else", "an if_else"), ("elf", "an elf"),
                                          ("iteration or loop", "an iteration or loop"), ("chat", "a chat"),
                                          ("user_select", "a user_select"), ("unsupported", "an unsupported"),
                                          ("ELF", "an ELF"), ("embedding", "an embedding")])
def test_kinds_and_types_in_sentences_take_their_article(word, phrase):
    assert a_or_an(word) == phrase


def test_a_workflow_that_may_write_names_its_node_kind_with_its_article():
    doc = build([node("helper", "agent", {"model": "default"})], [edge("start", "helper")])
    assert workflow_writes(doc, catalog=builtin_catalog()) == "node 'helper' is an agent node"


def test_unknown_config_field_suggests_and_lists_the_valid_fields():
    doc = build([node("t", "template", {"template": "x", "varibles": []})], [edge("start", "t")])
    (problem,) = [p for p in check_workflow(doc) if p.code == "invalid_config"]
    assert problem.path == "config.varibles"
    assert problem.message == "unknown field 'varibles'; did you mean 'variables'? (fields: template, variables)"


def test_unknown_field_deep_in_a_config_lists_that_objects_fields():
    doc = build([node("c", "if_else", {"cases": [{"id": "a", "conditions": [
        {"left": 1, "oprator": "equals", "right": 1}]}]})], [edge("start", "c")])
    messages_ = [p.message for p in check_workflow(doc) if p.path == "config.cases[0].conditions[0].oprator"]
    assert messages_ == ["unknown field 'oprator'; did you mean 'operator'? (fields: left, operator, right, type)"]


@pytest.mark.parametrize("config, path, expected", [
    ({"template": 5}, "config.template", "must be text (got '5')"),
    ({"template": "x", "variables": "nope"}, "config.variables", "must be a list (got 'nope')"),
])
def test_config_errors_are_in_plain_words(config, path, expected):
    doc = build([node("t", "template", config)], [edge("start", "t")])
    found = {p.path: p.message for p in check_workflow(doc) if p.code == "invalid_config"}
    assert found[path] == expected
    assert not any("Input should" in m or "Value error" in m for m in found.values())


def test_node_policy_errors_are_in_plain_words():
    doc = build([tpl("t", "x", max_retries="many", timeout=-1)], [edge("start", "t")])
    found = {p.path: p.message for p in check_workflow(doc) if p.code == "invalid_config"}
    assert found["max_retries"] == "must be a whole number (got 'many')"
    assert found["timeout"].startswith("must be greater than 0")


def test_top_level_unknown_field_and_bad_limit_in_plain_words():
    doc = build([], [], limits={"max_wall_tme": 5, "max_node_executions": "lots"})
    found = {p.path: p.message for p in check_workflow(doc) if p.code == "invalid_document"}
    assert "did you mean 'max_wall_time'?" in found["limits.max_wall_tme"]
    assert found["limits.max_node_executions"] == "must be a whole number (got 'lots')"


def test_cycle_is_named_in_edge_order_with_the_closing_edge():
    doc = build([tpl("c", "3"), tpl("a", "1"), tpl("b", "2")],
                chain_edges("start", "a", "b", "c") + [edge("c", "a", edge_id="back")])
    (problem,) = [p for p in check_workflow(doc) if p.code == "cycle"]
    assert problem.edge_id == "back" and problem.node_id == "a"
    assert "cycle a -> b -> c -> a (closed by edge 'back')" in problem.message


def test_cycle_entered_nowhere_names_its_closing_edge():
    doc = build([tpl("a", "x"), tpl("b", "y")], [edge("a", "b", edge_id="ab"), edge("b", "a", edge_id="ba")])
    (problem,) = [p for p in check_workflow(doc) if p.code == "cycle"]
    assert "nothing leads into it" in problem.message
    assert problem.edge_id in ("ab", "ba") and f"(closed by edge {problem.edge_id!r})" in problem.message


def test_self_loop_is_named_with_its_edge():
    doc = build([tpl("a", "1")], [edge("start", "a"), edge("a", "a", edge_id="again")])
    (problem,) = [p for p in check_workflow(doc) if p.code == "cycle"]
    assert "cycle a -> a (closed by edge 'again')" in problem.message and problem.edge_id == "again"


def _gate(condition, inputs=None):
    return build([node("g", "if_else", {"cases": [{"id": "yes", "conditions": [condition]}]}), tpl("y", "y")],
                 [edge("start", "g"), edge("g", "y", "yes")],
                 inputs=inputs or [{"name": "n", "type": "number"}])


@pytest.mark.parametrize("condition, words", [
    ({"left": {"ref": "inputs.n"}, "operator": "gt", "right": "5"}, "compares numbers, but the right operand is the text '5'"),
    ({"left": "ten", "operator": "lte", "right": {"ref": "inputs.n"}}, "the left operand is the text 'ten'"),
    ({"left": {"ref": "inputs.n"}, "operator": "lt", "right": True}, "the right operand is bool True"),
    ({"left": {"ref": "inputs.n"}, "operator": "gt", "right": "five", "type": "number"}, "'five' is not a number"),
    ({"left": {"ref": "inputs.n"}, "operator": "regex", "right": "(unclosed", "type": "string"},
     "is not a valid regular expression"),
])
def test_literal_if_else_operands_are_checked_when_compiling(condition, words):
    problems = [p for p in check_workflow(_gate(condition)) if p.severity == "error"]
    assert [(p.code, p.node_id, p.path) for p in problems] == [("invalid_config", "g", "config.cases[0].conditions[0]")]
    assert words in problems[0].message


@pytest.mark.parametrize("condition", [
    {"left": {"ref": "inputs.n"}, "operator": "gt", "right": 5},
    {"left": {"ref": "inputs.n"}, "operator": "gte", "right": 2.5},
    {"left": {"ref": "inputs.n"}, "operator": "gt", "right": " 5 ", "type": "number"},
    {"left": {"ref": "inputs.n"}, "operator": "equals", "right": "5"},
    {"left": {"ref": "inputs.n"}, "operator": "regex", "right": "^[0-9]+$", "type": "string"},
])
def test_literal_if_else_operands_that_fit_compile(condition):
    assert [p for p in check_workflow(_gate(condition)) if p.severity == "error"] == []
