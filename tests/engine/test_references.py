"""References and templates (engine/references.py rules 1-5)."""

from __future__ import annotations

import pytest

from engine.errors import ReferenceFailed, TemplateFailed
from engine.references import render_template, resolve_selector
from schemas.run import NodeRun, RunState
from schemas.types import NodeRunStatus, parse_selector
from tests.support import fake_nodes  # noqa: F401
from tests.support.workflows import build, chain_edges, edge, node, run_sync


def state_with(**outputs) -> RunState:
    state = RunState(run_id="r", workflow_id="w", workflow_hash="h", inputs={"q": "hi", "n": 3},
                     sys={"run_id": "r"}, variables={"count": 0})
    for nid, out in outputs.items():
        status = NodeRunStatus.skipped if out is None else NodeRunStatus.succeeded
        state.node_runs[nid] = NodeRun(id=nid, node_id=nid, kind="probe", status=status, outputs=out)
    return state


@pytest.mark.parametrize("text, expected", [
    ("p.value", {"items": [{"name": "a", "n": 1}, {"name": "b", "n": 2.5}]}),
    ("p.value.items[1].n", 2.5),
    ("p.value.items[-1].name", "b"),
    ('p.value["items"][0]["name"]', "a"),
    ("nodes.p.value.items[0].n", 1),
    ("inputs.n", 3),
    ("sys.run_id", "r"),
    ("vars.count", 0),
    ("skipped.anything", None),
    ("skipped.anything.deep[3]", None),
])
def test_resolve_keeps_types(text, expected):
    state = state_with(p={"value": {"items": [{"name": "a", "n": 1}, {"name": "b", "n": 2.5}]}}, skipped=None)
    assert resolve_selector(state, parse_selector(text)) == expected


@pytest.mark.parametrize("text, message", [
    ("ghost.value", "node 'ghost' has not run"),
    ("p.nope", "node 'p' has no field 'nope' (has: value)"),
    ("p.value.missing", "key 'missing' not found (keys: items)"),
    ("p.value.items[5]", "index [5] out of range (length 2)"),
    ("p.value.items.name", "cannot read key 'name' of list"),
    ("p.value.items[0][1]", "cannot index dict with [1]"),
    ("inputs.zzz", "the workflow inputs has no field 'zzz' (has: n, q)"),
])
def test_unresolvable_reference_is_loud_and_named(text, message):
    state = state_with(p={"value": {"items": [{"name": "a"}, {"name": "b"}]}})
    with pytest.raises(ReferenceFailed) as info:
        resolve_selector(state, parse_selector(text), node_id="reader")
    assert message in str(info.value) and text in str(info.value)
    assert info.value.node_id == "reader"


def test_template_is_sandboxed():
    state = state_with()
    with pytest.raises(TemplateFailed, match="sandbox|not allowed|unsafe"):
        render_template(state, "{{ ''.__class__.__mro__[1].__subclasses__() }}", node_id="t")


def test_a_template_naming_a_node_that_did_not_run_suggests_the_close_one_that_did():
    # what the compiler reports before a run (unknown_template_name), a template rendered
    # without that check (a graph tool's result) reports when it runs
    state = state_with(greet={"output": "hi"})
    with pytest.raises(TemplateFailed) as info:
        render_template(state, "{{ gret.output }}", node_id="t", field="config.template")
    assert str(info.value).endswith("reference 'gret': no such name (not a node that has run, nor inputs, "
                                    "sys, vars or nodes); did you mean 'greet'?")


def test_template_undefined_attribute_is_an_error_not_empty():
    state = state_with(p={"value": {"a": 1}})
    with pytest.raises(TemplateFailed, match=r"undefined value in template of node 't', reference 'p.value.b': "
                                             r"key 'b' not found \(keys: a\)"):
        render_template(state, "x{{ p.value.b }}y", node_id="t", field="config.template")


def test_template_reads_skipped_node_as_none():
    state = state_with(skipped=None)
    assert render_template(state, "[{{ skipped.output }}]") == "[]"  # null prints as empty text
    assert render_template(state, "{{ skipped.output or 'fallback' }}") == "fallback"


def test_template_json_filter_does_not_html_escape():
    state = state_with(p={"value": {"a": "<b>&"}})
    assert render_template(state, "{{ p.value | json }}") == '{"a": "<b>&"}'


# --------------------------------------------------- skipped references through the engine


def branchy(binding: dict) -> dict:
    return build(
        [node("c", "if_else", {"cases": [{"id": "yes", "conditions": [{"left": {"ref": "inputs.go"}, "operator": "equals",
                                                                           "right": True}]}]}),
         node("a", "probe", {"value": "from a"}),
         node("j", "template", {"template": "[{{ v }}]", "variables": [binding]})],
        [edge("start", "c"), edge("c", "a", "yes"), edge("c", "j", "else"), edge("a", "j")],
        inputs=[{"name": "go", "type": "boolean", "required": True}],
    )


def test_reference_to_skipped_node_resolves_to_null():
    state, _ = run_sync(branchy({"name": "v", "value": {"ref": "a.value"}}), {"go": False})
    assert state.status == "succeeded"
    assert state.node_runs["j"].outputs == {"output": "[]"}


def test_reference_to_skipped_node_uses_the_input_default():
    state, _ = run_sync(branchy({"name": "v", "value": {"ref": "a.value"}, "default": "dflt"}), {"go": False})
    assert state.node_runs["j"].outputs == {"output": "[dflt]"}
    assert state.node_runs["j"].inputs == {"v": "dflt"}


def test_required_input_from_skipped_node_is_a_clear_error():
    state, _ = run_sync(branchy({"name": "v", "value": {"ref": "a.value"}, "required": True}), {"go": False})
    assert state.status == "failed"
    assert state.error.node_id == "j"
    assert "input 'v' is required but resolved to null (reference 'a.value' - was its node skipped?)" in state.error.message


def test_binding_type_is_checked_at_run_time():
    doc = build([node("p", "probe", {"value": "text"}),
                 node("t", "template", {"template": "x", "variables": [{"name": "n", "type": "number",
                                                                          "value": {"ref": "p.value"}}]})],
                chain_edges("start", "p", "t"))
    state, _ = run_sync(doc)
    assert state.status == "failed" and "input 'n' must be number, got str" in state.error.message


def test_numbers_stay_numbers_through_references():
    doc = build([node("p", "probe", {"value": {"ref": "inputs.n"}}),
                 node("e", "end", {"outputs": [{"name": "n", "value": {"ref": "p.value"}},
                                               {"name": "nested", "value": {"k": [{"ref": "inputs.n"}]}}]})],
                chain_edges("start", "p", "e"), inputs=[{"name": "n", "type": "number"}])
    state, _ = run_sync(doc, {"n": 7})
    assert state.outputs == {"n": 7, "nested": {"k": [7]}}
    assert isinstance(state.outputs["n"], int)


# --------------------------------------------------- data keys over methods; how values print

DICT_METHODS = [m for m in dir(dict) if not m.startswith("_")]


@pytest.mark.parametrize("name", DICT_METHODS)
def test_a_data_key_named_like_a_dict_method_reads_the_data(name):
    state = state_with(r={"json": {name: [1, {"a": None}], "other": 1}})
    assert render_template(state, f"{{{{ r.json.{name} }}}}") == '[1, {"a": null}]'
    assert render_template(state, f"{{{{ r.json.{name} }}}}") == render_template(state, f"{{{{ r.json['{name}'] }}}}")
    assert resolve_selector(state, parse_selector(f"r.json.{name}")) == [1, {"a": None}]  # the ref form agrees


@pytest.mark.parametrize("name", ["items", "keys", "values", "get", "count", "index", "copy"])
def test_a_method_is_never_printed(name):
    state = state_with(r={"obj": {"a": 1}, "list": [1, 2]})
    for holder in ("obj", "list"):
        with pytest.raises(TemplateFailed) as info:
            render_template(state, f"{{{{ r.{holder}.{name} }}}}", node_id="t", field="config.template")
        message = str(info.value)
        assert f"reference 'r.{holder}.{name}'" in message and "node 't'" in message and "built-in" not in message


def test_methods_still_work_when_the_data_has_no_such_key():
    state = state_with(r={"obj": {"b": 2, "a": 1}})
    assert render_template(state, "{% for k, v in r.obj.items() %}{{ k }}={{ v }};{% endfor %}") == "b=2;a=1;"
    assert render_template(state, "{{ r.obj.get('a') }}|{{ r.obj.keys() | list | join(',') }}") == "1|b,a"


@pytest.mark.parametrize(("value", "printed"), [
    (None, ""),
    ({"a": 1}, '{"a": 1}'),
    ([1, "x", None], '[1, "x", null]'),
    ({"k": [{"z": True}]}, '{"k": [{"z": true}]}'),
    (True, "true"),
    (False, "false"),
    ("text", "text"),
    (3, "3"),
    (2.5, "2.5"),
    ("中文", "中文"),
])
def test_values_print_as_builders_read_them(value, printed):
    state = state_with(p={"v": value})
    assert render_template(state, "{{ p.v }}") == printed
    assert render_template(state, "<{{ 'x' ~ p.v ~ 'y' }}>") == f"<x{printed}y>"  # concatenation too
    assert render_template(state, "{{ p.v | string }}") == printed
    assert render_template(state, "{{ [p.v, p.v] | join('|') }}") == f"{printed}|{printed}"


def test_no_python_repr_anywhere_in_a_mixed_template():
    state = state_with(p={"v": {"a": None, "b": [True]}, "n": None})
    out = render_template(state, "{{ p.v }} {{ p.n }} {{ p.v.a }} {{ p.v.b }} {{ p.v.b[0] }}")
    assert out == '{"a": null, "b": [true]}   [true] true'
    assert "None" not in out and "'" not in out


# --------------------------------------------------- template errors name node, config path, reference path


@pytest.mark.parametrize(("template", "path", "why"), [
    ("{{ p.value.items[0] }}", "p.value.items[0]", "index [0] out of range (empty list)"),
    ("{{ p.value.rows[5].name }}", "p.value.rows[5]", "index [5] out of range (length 2)"),
    ("{{ p.value.rows[0].nope }}", "p.value.rows[0].nope", "key 'nope' not found (keys: name)"),
    ("{{ p.value.missing }}", "p.value.missing", "key 'missing' not found (keys: items, label, rows)"),
    ("{{ p.value.label.x }}", "p.value.label.x", "cannot read key 'x' of str"),
    ("{{ p.value.rows.name }}", "p.value.rows.name", "cannot read key 'name' of list"),
    ("{{ nodes['p'].value.items[-1] }}", "nodes.p.value.items[-1]", "index [-1] out of range (empty list)"),
    ("{{ inputs.q.deep }}", "inputs.q.deep", "cannot read key 'deep' of str"),
    ("a {{ p.value.label }} b {{ p.value['rows'][9] }}", 'p.value.rows[9]', "index [9] out of range (length 2)"),
    ("{{ p.value.missing | default('x') }}{{ p.value.items[1] }}", "p.value.items[1]", "out of range"),
])
def test_template_errors_name_the_node_the_config_path_and_the_reference(template, path, why):
    state = state_with(p={"value": {"items": [], "rows": [{"name": "a"}, {"name": "b"}], "label": "L"}})
    with pytest.raises(TemplateFailed) as info:
        render_template(state, template, node_id="reader", field="config.body.raw")
    message = str(info.value)
    assert message.startswith("config.body.raw: ") and "node 'reader'" in message
    assert f"reference {path!r}: " in message and why in message, message
    assert "has no element" not in message and info.value.node_id == "reader"


def test_a_template_error_in_a_run_names_the_node_and_field():
    doc = build([node("t", "template", {"template": "{{ inputs.rows[3].name }}"})], [edge("start", "t")],
                inputs=[{"name": "rows", "type": "array"}])
    state, _ = run_sync(doc, {"rows": [{"name": "a"}]})
    assert state.status == "failed" and state.error.reason == "template_error" and state.error.node_id == "t"
    assert state.error.message == ("config.template: undefined value in template of node 't', reference "
                                   "'inputs.rows[3]': index [3] out of range (length 1)")
