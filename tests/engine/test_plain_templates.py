"""Plain templates (text and ``{{ name.key }}`` lookups) render without compiling them
with Jinja, exactly as the Jinja path renders them: same text, same errors, same names
and selectors for the compiler's checks."""

from __future__ import annotations

import pytest

from engine import references
from engine.errors import TemplateFailed
from engine.references import render_template, template_names, template_selectors
from schemas.run import NodeRun, RunState
from schemas.types import NodeRunStatus


def state_with(**outputs) -> RunState:
    state = RunState(run_id="r", workflow_id="w", workflow_hash="h",
                     inputs={"q": "hi", "n": 3, "f": 2.5, "big": 10**20, "t": True, "none": None, "uni": "héllo ✓",
                             "obj": {"a": [1, "x", None], "b": {"c": "deep"}}, "items": [1, 2]},
                     sys={"run_id": "r"}, variables={"count": 0})
    for nid, out in outputs.items():
        status = NodeRunStatus.skipped if out is None else NodeRunStatus.succeeded
        state.node_runs[nid] = NodeRun(id=nid, node_id=nid, kind="probe", status=status, outputs=out)
    return state


STATE = dict(p={"output": "P!", "json": {"items": {"k": 1}, "keys": "data"}}, skipped=None)

PLAIN = ["Hello, {{ inputs.q }}!", "{{inputs.n}}", "{{ inputs.f }} {{ inputs.big }} {{ inputs.t }}",
         "[{{ inputs.none }}]", "{{ inputs.uni }}", "{{ inputs.obj }}", "{{ inputs.obj.a }}", "{{ inputs.obj.b.c }}",
         "{{ inputs.items }}", "{{ inputs }}", "{{ p.output }}{{ p.output }}", "line\n{{ p.output }}\n",
         "{{\n  p.output\t}}", "{{ p.json.items }}", "{{ p.json.keys }}", "{{ nodes.p.output }}", "{{ vars.count }}",
         "{{ sys.run_id }} }} {", "{ {{ p.output }}", "no tags at all", "", "{{ skipped.anything }}",
         "{{ skipped }}", "{{ p }}"]
NOT_PLAIN = ["{{{ p.output }}", "{{ p.output | upper }}", "{% if true %}x{% endif %}", "{# note #}{{ p.output }}",
             "{{ true }}", "{{ range }}", "{{ p['output'] }}", "{{ p.output ~ 'x' }}", "a\r\n{{ p.output }}",
             "{{- p.output }}", "{{ loop }}", "{{ p.items() }}"]


@pytest.fixture
def jinja_only(monkeypatch):
    """Render with the Jinja path alone (what the plain path must equal)."""
    def render(source: str, **kwargs):
        with monkeypatch.context() as patch:
            patch.setattr(references, "_plain", lambda _source: None)
            return render_template(state_with(**STATE), source, **kwargs)
    return render


@pytest.mark.parametrize("source", PLAIN)
def test_a_plain_template_renders_as_jinja_does(source, jinja_only):
    assert references._plain(source) is not None
    assert render_template(state_with(**STATE), source) == jinja_only(source)


@pytest.mark.parametrize("source", NOT_PLAIN)
def test_anything_else_is_not_plain(source):
    assert references._plain(source) is None


@pytest.mark.parametrize("source", PLAIN + ["{{ nodes.p }}", "{{ nodes.p.json.items }}", "{{ a.b.c }} {{ d }}"])
def test_names_and_selectors_are_jinja_s(source, monkeypatch):
    plain_names, plain_selectors = template_names(source), list(template_selectors(source))
    monkeypatch.setattr(references, "_plain", lambda _source: None)
    assert plain_names == template_names(source)
    assert plain_selectors == list(template_selectors(source))


@pytest.mark.parametrize("source", ["{{ p.missing }}", "{{ p.json.items.k.z }}", "{{ ghost.output }}",
                                    "{{ inputs.obj.a.b }}"])
def test_a_missing_value_fails_with_the_jinja_message(source, jinja_only):
    with pytest.raises(TemplateFailed) as expected:
        jinja_only(source, node_id="t")
    with pytest.raises(TemplateFailed) as plain:
        render_template(state_with(**STATE), source, node_id="t")
    assert str(plain.value) == str(expected.value) and "undefined value" in str(plain.value)


def test_the_output_cap_holds_for_a_plain_template(jinja_only):
    source = "{{ p.output }}" * 3
    with pytest.raises(TemplateFailed) as expected:
        jinja_only(source, max_bytes=5)
    with pytest.raises(TemplateFailed) as plain:
        render_template(state_with(**STATE), source, max_bytes=5)
    assert plain.value.reason == expected.value.reason == "output_too_large"
    with pytest.raises(TemplateFailed, match="output too large"):
        render_template(state_with(p={"output": "x" * 100}), "{{ p.output }}", max_bytes=50)
