"""start / answer / end / if_else / template / variable_update / variable_aggregator edge cases."""

from __future__ import annotations

import pytest

from nodes.if_else import coerce, evaluate
from schemas.nodes_flow import ConditionOp as Op
from schemas.types import VarType
from tests.support import fake_nodes  # noqa: F401
from tests.support.catalog import check_workflow
from tests.support.workflows import build, chain_edges, edge, node, run_sync

# ------------------------------------------------------------------------- if-else


@pytest.mark.parametrize("op, left, right, expected", [
    (Op.equals, 5, 5.0, True),
    (Op.equals, 5, "5", False),
    (Op.equals, 1, True, False),
    (Op.equals, None, None, True),
    (Op.not_equals, "a", "b", True),
    (Op.contains, "hello world", "lo w", True),
    (Op.contains, ["a", 1], 1, True),
    (Op.contains, ["a", 1], True, False),
    (Op.contains, {"k": 1}, "k", True),
    (Op.contains, None, "x", False),
    (Op.not_contains, "abc", "z", True),
    (Op.starts_with, "prefix-x", "prefix", True),
    (Op.ends_with, "x.json", ".json", True),
    (Op.starts_with, None, "a", False),
    (Op.empty, "", None, True),
    (Op.empty, [], None, True),
    (Op.empty, {}, None, True),
    (Op.empty, 0, None, False),
    (Op.empty, False, None, False),
    (Op.not_empty, "x", None, True),
    (Op.gt, 10, 9.5, True),
    (Op.gte, 3, 3, True),
    (Op.lt, -1, 0, True),
    (Op.lte, 2, 1, False),
    (Op.gt, None, 1, False),
    (Op.regex, "order #1234", r"#\d{4}$", True),
    (Op.regex, None, "x", False),
    (Op.in_list, "b", ["a", "b"], True),
    (Op.in_list, 1, [True], False),
    (Op.not_in_list, "z", ["a"], True),
])
def test_operators(op, left, right, expected):
    assert evaluate(op, left, right) is expected


@pytest.mark.parametrize("op, left, right, message", [
    (Op.gt, "10", 9, "gt needs numbers"),
    (Op.lt, True, 2, "lt needs numbers"),
    (Op.contains, 5, 1, "contains needs a string, array or object"),
    (Op.contains, "abc", 1, "a string can only contain a string"),
    (Op.regex, "x", "(", "invalid regex"),
    (Op.starts_with, 1, "a", "starts_with needs strings"),
])
def test_operator_type_errors_are_loud(op, left, right, message):
    with pytest.raises(ValueError, match=message):
        evaluate(op, left, right)


def test_catastrophic_regex_times_out_instead_of_hanging():
    with pytest.raises(ValueError, match="took longer than"):
        evaluate(Op.regex, "x" * 5000, r"(x+x+)+y")


@pytest.mark.parametrize("value, to, expected", [
    ("42", VarType.number, 42),
    (" 4.5 ", VarType.number, 4.5),
    (7, VarType.string, "7"),
    (True, VarType.string, "true"),
    ({"b": 1, "a": 2}, VarType.string, '{"a": 2, "b": 1}'),
    ("YES", VarType.boolean, True),
    (0, VarType.boolean, False),
    ("[1, 2]", VarType.array, [1, 2]),
    ('{"a": 1}', VarType.object, {"a": 1}),
    (None, VarType.number, None),
])
def test_coercion_is_explicit_and_deterministic(value, to, expected):
    assert coerce(value, to) == expected


@pytest.mark.parametrize("value, to", [("abc", VarType.number), (True, VarType.number), ("nan", VarType.number),
                                       ("maybe", VarType.boolean), (2, VarType.boolean), ("[1", VarType.array),
                                       ("[1]", VarType.object)])
def test_coercion_refuses_what_does_not_convert(value, to):
    with pytest.raises(ValueError):
        coerce(value, to)


def grade_flow(score_type="number", cond_type=None):
    cond = {"left": {"ref": "inputs.score"}, "operator": "gte", "right": 90}
    if cond_type:
        cond["type"] = cond_type
    return build(
        [node("c", "if_else", {"cases": [
            {"id": "a", "conditions": [cond]},
            {"id": "b_or_vip", "logic": "or", "conditions": [
                {"left": {"ref": "inputs.score"}, "operator": "gte", "right": 80, **({"type": cond_type} if cond_type else {})},
                {"left": {"ref": "inputs.name"}, "operator": "in", "right": ["vip", "boss"]}]},
            {"id": "c", "logic": "and", "conditions": [
                {"left": {"ref": "inputs.score"}, "operator": "gte", "right": 50, **({"type": cond_type} if cond_type else {})},
                {"left": {"ref": "inputs.name"}, "operator": "not_empty"}]},
        ]}),
         node("ta", "answer", {"text": "A"}), node("tb", "answer", {"text": "B"}),
         node("tc", "answer", {"text": "C"}), node("tf", "answer", {"text": "F"})],
        [edge("start", "c"), edge("c", "ta", "a"), edge("c", "tb", "b_or_vip"), edge("c", "tc", "c"),
         edge("c", "tf", "else")],
        inputs=[{"name": "score", "type": score_type}, {"name": "name", "type": "string", "default": ""}],
    )


@pytest.mark.parametrize("score, name, answer", [(95, "x", "A"), (85, "x", "B"), (10, "vip", "B"), (60, "x", "C"),
                                                 (60, "", "F"), (10, "x", "F")])
def test_if_else_first_matching_case_wins_with_and_or(score, name, answer):
    state, _ = run_sync(grade_flow(), {"score": score, "name": name})
    assert state.status == "succeeded" and state.answer == answer
    assert state.node_runs["c"].outputs == {"case": {"A": "a", "B": "b_or_vip", "C": "c", "F": "else"}[answer]}


def test_if_else_declared_string_compared_as_number_is_a_compile_error():
    from tests.support.catalog import check_workflow
    problems = check_workflow(grade_flow(score_type="string"))
    assert [(p.code, p.path) for p in problems][:1] == [("type_mismatch", "config.cases[0].conditions[0].left")]


def test_if_else_string_number_at_run_time_fails_with_hint():
    doc = build([node("p", "probe", {"value": "95"}),
                 node("c", "if_else", {"cases": [{"id": "a", "conditions": [
                     {"left": {"ref": "p.value"}, "operator": "gte", "right": 90}]}]})],
                chain_edges("start", "p", "c"))
    state, _ = run_sync(doc)
    assert state.status == "failed"
    assert state.error.node_id == "c"
    assert "config.cases[0].conditions[0]: gte needs numbers, got str '95'" in state.error.message
    assert "set the condition's type to 'number'" in state.error.message


def test_if_else_explicit_coercion_converts_strings():
    state, _ = run_sync(grade_flow(score_type="string", cond_type="number"), {"score": "95", "name": "x"})
    assert state.answer == "A"


def test_if_else_records_resolved_operands():
    state, _ = run_sync(grade_flow(), {"score": 95, "name": "x"})
    assert state.node_runs["c"].inputs == {"cases[0].conditions[0].left": 95, "cases[0].conditions[0].right": 90}


def test_if_else_condition_needs_right_operand():
    from tests.support.catalog import check_workflow
    doc = build([node("c", "if_else", {"cases": [{"id": "x", "conditions": [{"left": 1, "operator": "equals"}]}]})],
                [edge("start", "c")])
    (problem,) = check_workflow(doc)
    assert problem.code == "invalid_config" and "needs a right operand" in problem.message


# ------------------------------------------------------------- template / answer / end


def test_template_binds_variables_and_references():
    doc = build([node("t", "template", {"template": "{% for i in items %}{{ i }},{% endfor %} {{ inputs.who | upper }}",
                                        "variables": [{"name": "items", "value": [1, {"ref": "inputs.n"}]}]}),
                 node("ans", "answer", {"text": "{{ t.output }}"})],
                chain_edges("start", "t", "ans"), inputs=[{"name": "who"}, {"name": "n", "type": "number"}])
    state, events = run_sync(doc, {"who": "ada", "n": 2})
    assert state.answer == "1,2, ADA"
    deltas = [e.text for e in events if e.type == "node_delta"]
    assert deltas == ["1,2, ADA"]


def test_template_error_names_node_and_field():
    doc = build([node("t", "template", {"template": "{{ inputs.who.nope }}"})], [edge("start", "t")],
                inputs=[{"name": "who"}])
    state, _ = run_sync(doc, {"who": "x"})
    assert state.status == "failed" and state.error.node_id == "t"
    assert state.error.message.startswith("config.template: undefined value in template")


def test_multiple_answers_concatenate_in_finish_order_and_end_declares_outputs():
    doc = build([node("a1", "answer", {"text": "one "}), node("a2", "answer", {"text": "two"}),
                 node("e", "end", {"outputs": [{"name": "first", "value": {"ref": "a1.answer"}},
                                               {"name": "lit", "value": 3}]})],
                chain_edges("start", "a1", "a2", "e"))
    state, events = run_sync(doc)
    assert state.answer == "one two"
    assert state.outputs == {"first": "one ", "lit": 3}
    assert events[-1].outputs == {"first": "one ", "lit": 3} and events[-1].answer == "one two"


# ---------------------------------------------------------------------- variables

VARS = [{"name": "total", "type": "number", "default": 1}, {"name": "log", "type": "array", "default": []},
        {"name": "label", "type": "string", "default": "x"}]


def test_variable_update_operations_and_downstream_reads():
    doc = build([node("u", "variable_update", {"updates": [
        {"variable": "total", "operation": "add", "value": {"ref": "inputs.n"}},
        {"variable": "log", "operation": "append", "value": "first"},
        {"variable": "log", "operation": "extend", "value": ["b", "c"]},
        {"variable": "label", "operation": "set", "value": "changed"}]}),
        node("t", "template", {"template": "{{ vars.total }} {{ vars.log | join('|') }} {{ vars.label }}"}),
        node("u2", "variable_update", {"updates": [{"variable": "log", "operation": "clear"}]})],
        chain_edges("start", "u", "t", "u2"), variables=VARS, inputs=[{"name": "n", "type": "number"}])
    state, _ = run_sync(doc, {"n": 4})
    assert state.node_runs["u"].outputs == {"total": 5, "log": ["first", "b", "c"], "label": "changed"}
    assert state.node_runs["t"].outputs["output"] == "5 first|b|c changed"
    assert state.variables == {"total": 5, "log": [], "label": "changed"}


@pytest.mark.parametrize("update, message", [
    ({"variable": "total", "operation": "set", "value": "text"}, "'total' is number, cannot hold str"),
    ({"variable": "total", "operation": "add", "value": "1"}, "add needs numbers"),
    ({"variable": "log", "operation": "extend", "value": 3}, "extend needs an array"),
])
def test_variable_update_refuses_bad_updates(update, message):
    doc = build([node("u", "variable_update", {"updates": [update]})], [edge("start", "u")], variables=VARS)
    state, _ = run_sync(doc)
    assert state.status == "failed" and state.error.node_id == "u" and message in state.error.message
    assert state.variables == {"total": 1, "log": [], "label": "x"}


def test_variable_update_of_an_undeclared_variable_does_not_compile():
    doc = build([node("u", "variable_update", {"updates": [{"variable": "ghost", "value": 1}]})], [edge("start", "u")],
                variables=VARS)
    [problem] = [p for p in check_workflow(doc) if p.severity == "error"]
    assert (problem.code, problem.node_id, problem.path) == ("unknown_variable", "u", "config.updates[0].variable")
    assert "vars.ghost is not declared" in problem.message


@pytest.mark.parametrize("go, expected", [(True, "from a"), (False, "from b")])
def test_variable_aggregator_takes_first_non_empty_from_branch_taken(go, expected):
    doc = build([node("c", "if_else", {"cases": [{"id": "yes", "conditions": [
        {"left": {"ref": "inputs.go"}, "operator": "equals", "right": True}]}]}),
        node("a", "probe", {"value": "from a"}), node("b", "probe", {"value": "from b"}),
        node("agg", "variable_aggregator", {"type": "string", "refs": [{"ref": "a.value"}, {"ref": "b.value"}]})],
        [edge("start", "c"), edge("c", "a", "yes"), edge("c", "b", "else"), edge("a", "agg"), edge("b", "agg")],
        inputs=[{"name": "go", "type": "boolean"}])
    state, _ = run_sync(doc, {"go": go})
    assert state.node_runs["agg"].outputs == {"output": expected}


def test_variable_aggregator_zero_and_false_are_values():
    doc = build([node("p", "probe", {"value": ""}), node("q", "probe", {"value": 0}),
                 node("agg", "variable_aggregator", {"refs": [{"ref": "p.value"}, {"ref": "q.value"}]})],
                chain_edges("start", "p", "q", "agg"))
    state, _ = run_sync(doc)
    assert state.node_runs["agg"].outputs == {"output": 0}


def test_variable_aggregator_type_is_enforced():
    doc = build([node("p", "probe", {"value": 5}),
                 node("agg", "variable_aggregator", {"type": "string", "refs": [{"ref": "p.value"}]})],
                chain_edges("start", "p", "agg"))
    state, _ = run_sync(doc)
    assert state.status == "failed" and "must be string, got int" in state.error.message


def test_start_rejects_bad_inputs_listing_all():
    from engine import InvalidInputs, new_run_state
    from tests.support.catalog import compile_workflow
    plan = compile_workflow(build([], [], inputs=[{"name": "a", "type": "number", "required": True},
                                                  {"name": "b", "type": "boolean"}]))
    with pytest.raises(InvalidInputs) as info:
        new_run_state(plan, {"b": "yes", "c": 1})
    assert info.value.problems == ["'c' is not an input of workflow 'wf' (inputs: a, b)",
                                   "'a' is required (number)", "'b' must be boolean, got str"]


def test_an_empty_text_for_a_required_input_is_missing_and_a_misspelt_input_is_told_the_close_one():
    from engine import InvalidInputs, new_run_state
    from tests.support.catalog import compile_workflow
    plan = compile_workflow(build([], [], inputs=[{"name": "query", "type": "string", "required": True},
                                                  {"name": "note", "type": "string"}]))
    with pytest.raises(InvalidInputs) as info:
        new_run_state(plan, {"query": "", "nots": "x"})
    assert info.value.problems == ["'nots' is not an input of workflow 'wf'; did you mean 'note'? (inputs: note, query)",
                                   "'query' is required (string), but it was given empty"]
    # as in Dify: only the empty text is missing; blank text, and an empty optional input, are taken
    assert new_run_state(plan, {"query": " ", "note": ""}).inputs == {"query": " ", "note": ""}


def test_a_chat_message_sent_as_an_input_is_told_where_it_goes():
    from engine import InvalidInputs, new_run_state
    from tests.support.catalog import compile_workflow
    plan = compile_workflow(build([], []))
    with pytest.raises(InvalidInputs) as info:
        new_run_state(plan, {"query": "hi"})
    assert info.value.problems == ["'query' is not an input of workflow 'wf' (inputs: none); the user's message "
                                   "is the run's `message` (--message)"]
