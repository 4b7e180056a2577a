"""Free-text node ids (any printable text, reached with ``nodes["..."]``) and the size and
depth caps: a clear error naming the cap, never a traceback or a hang."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from engine import CompileError, RunDeps, run_workflow
from engine.documents import check_document_limits
from engine.settings import Settings
from tests.support.catalog import check_workflow, compile_workflow
from tests.support.workflows import build, chain_edges, edge, node, run_sync

ROOT = Path(__file__).resolve().parents[2]


def ref_to(node_id: str) -> str:
    """``nodes["<id>"].output`` (``nodes['<id>']`` when the id holds a double quote)."""
    return f"nodes['{node_id}'].output" if '"' in node_id else f'nodes["{node_id}"].output'


def codes(doc) -> list[str]:
    return [p.code for p in check_workflow(doc)]


@pytest.mark.parametrize("node_id", ["Résumé client", "étape 2", "提问", "a.b[0]", "say \"hi\"", "L#0:x", "50%"])
def test_printable_ids_run_and_are_reached_with_the_nodes_form(node_id):
    doc = build([node(node_id, "template", {"template": "v={{ inputs.q }}"}),
                 node("out", "answer", {"text": "{{ nodes[" + json.dumps(node_id, ensure_ascii=False) + "].output }}"}),
                 node("end", "end", {"outputs": [{"name": "o", "value": {"ref": ref_to(node_id)}}]})],
                chain_edges("start", node_id, "out", "end"), inputs=[{"name": "q"}])
    state, _ = run_sync(doc, {"q": "1"})
    assert state.status == "succeeded", state.error
    assert state.answer == "v=1" and state.outputs == {"o": "v=1"}


def test_node_run_ids_of_ids_with_separators_never_collide():
    # top-level node "L#0:x" against node "x" in item 0 of iteration "L"
    doc = build([node("L", "iteration", {"items": [1], "collect": {"ref": "x.output"}}),
                 node("x", "template", {"template": "in"}, parent="L"),
                 node("L#0:x", "template", {"template": "out"})],
                [edge("start", "L"), edge("L", "L#0:x")])
    state, events = run_sync(doc)
    assert state.status == "succeeded", state.error
    run_ids = [e.node_run_id for e in events if e.type == "node_started"]
    assert len(run_ids) == len(set(run_ids))
    assert state.node_runs["L#0:x"].id.endswith(":L%230%3Ax")


@pytest.mark.parametrize("bad", ["", " padded ", "tab\there", "line\nbreak", "x~loop"])
def test_ids_must_be_printable_and_not_reserved(bad):
    doc = build([node(bad, "template", {"template": "x"})], [edge("start", bad)])
    assert set(codes(doc)) & {"invalid_config", "invalid_document", "reserved_node_id"}


@pytest.mark.parametrize("reserved", ["inputs", "sys", "vars", "nodes"])
def test_ids_cannot_take_a_reference_scope(reserved):
    doc = build([node(reserved, "template", {"template": "x"})], [edge("start", reserved)])
    assert "reserved_node_id" in codes(doc)


@pytest.mark.parametrize("field", ["id", "name", "description"])
def test_megabyte_ids_and_names_are_refused_naming_the_cap(field):
    doc = build([node("t", "template", {"template": "x"})], [edge("start", "t")])
    doc["nodes"][1][field] = "n" * 2_000_000
    (problem,) = [p for p in check_workflow(doc) if p.code == "too_long"]
    assert "max_id_length" in problem.message or "max_name_length" in problem.message
    assert len(problem.message) < 300, "the value is not echoed back"


def test_a_long_name_is_refused_naming_path_length_and_cap_without_its_text():
    doc = build([node("t", "template", {"template": "x"})], [edge("start", "t")])
    doc["nodes"][1]["name"] = "N" * 600
    (problem,) = [p for p in check_workflow(doc) if p.code == "too_long"]
    assert problem.message == "nodes[1].name is 600 characters; the cap max_name_length is 512"
    assert problem.path == "nodes[1].name" and "NNN" not in problem.message


def test_long_names_are_found_among_values_that_are_not_text():
    # The length screen gives up on values without a length (a number) and the exact loop
    # decides: the long name is still named, the number is left to the schema's check.
    doc = build([node("t", "template", {"template": "x"}), node("u", "template", {"template": "y"})],
                chain_edges("start", "t", "u"))
    doc["nodes"][1]["name"] = 7
    doc["nodes"][2]["description"] = "D" * 600
    problems = check_workflow(doc)
    assert [(p.code, p.path) for p in problems if p.code == "too_long"] == [("too_long", "nodes[2].description")]


def test_duplicate_and_reserved_ids_are_all_named_in_document_order():
    doc = build([node("t", "template", {"template": "x"}), node("t", "template", {"template": "y"}),
                 node("vars", "template", {"template": "z"})], [edge("start", "t", edge_id="e"),
                                                                 edge("t", "vars", edge_id="e")])
    found = [(p.code, p.node_id or p.edge_id) for p in check_workflow(doc)
             if p.code in ("duplicate_node_id", "reserved_node_id", "duplicate_edge_id")]
    assert found == [("duplicate_node_id", "t"), ("reserved_node_id", "vars"), ("duplicate_edge_id", "e")]


def test_edge_ids_are_capped_too():
    doc = build([node("t", "template", {"template": "x"})], [edge("start", "t", edge_id="e" * 10_000)])
    assert "too_long" in codes(doc)


@pytest.mark.parametrize("depth", [100, 5000, 100_000])
def test_deeply_nested_documents_are_refused_naming_the_cap(depth):
    text = '{"id": "wf", "nodes": [], "edges": [], "x": ' + "[" * depth + "]" * depth + "}"
    with pytest.raises(CompileError) as info:
        compile_workflow(text)
    assert info.value.problems[0].code == "document_too_deep"
    assert "max_document_depth" in info.value.problems[0].message


def test_deeply_nested_config_values_are_refused():
    value: list = []
    for _ in range(3000):
        value = [value]
    doc = build([node("t", "template", {"template": "x", "variables": [{"name": "v", "value": value}]})],
                [edge("start", "t")])
    assert codes(doc) == ["document_too_deep"]


def test_too_many_nodes_and_too_large_documents_are_refused():
    doc = build([node(f"n{i}", "template", {"template": "x"}) for i in range(10_001)], [])
    assert "too_many_nodes" in codes(doc)
    with pytest.raises(CompileError) as info:
        compile_workflow("{" + " " * (9 * 1024 * 1024) + "}")
    assert info.value.problems[0].code == "document_too_large"


def test_a_parsed_document_over_the_size_cap_is_refused_like_its_text():
    # A document handed over as a dict (an API body, a file the CLI parsed) meets the same cap.
    doc = build([node("t", "template", {"template": "x" * (9 * 1024 * 1024)})], [edge("start", "t")])
    assert codes(doc) == ["document_too_large"]
    problems = check_document_limits(doc, Settings(max_document_bytes=1_000))
    assert [p.code for p in problems] == ["document_too_large"] and "max_document_bytes" in problems[0].message


def test_the_size_of_a_parsed_document_is_never_counted_above_its_json_text():
    # The count from parsed values is a lower bound: a document exactly at the cap as text passes.
    for path in sorted((ROOT / "examples").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        size = len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False))
        assert check_document_limits(doc, Settings(max_document_bytes=size)) == [], path.name
        # the size is the compact JSON text's, exactly: one character less is over the cap
        assert [p.code for p in check_document_limits(doc, Settings(max_document_bytes=size - 1))] == [
            "document_too_large"], path.name
        assert check_document_limits(doc, Settings(max_document_bytes=size // 3)) != [], path.name


def test_a_document_nested_too_deep_names_where():
    value: list = ["leaf"]
    for _ in range(40):
        value = [value]
    doc = build([node("t", "template", {"template": "x", "variables": [{"name": "v", "value": value}]})],
                [edge("start", "t")])
    (problem,) = check_document_limits(doc, Settings(max_document_depth=20))
    assert problem.code == "document_too_deep"
    assert problem.path is not None and problem.path.startswith("nodes[1].config.variables[0].value[0][0]"), problem


def test_thousands_of_nodes_within_the_cap_compile_and_run():
    ids = [f"n{i}" for i in range(3000)]
    doc = build([node(i, "template", {"template": "x"}) for i in ids], chain_edges("start", *ids))
    state, _ = run_sync(doc)
    assert state.status == "succeeded" and len(state.node_runs) == 3001


@pytest.mark.parametrize("template", ["{{ 'a' * 100000000 }}", "{{ 100000000 * 'ab' }}", "{{ [1] * 10**9 }}",
                                      "{{ 9 ** 999999999 }}", "{% for i in range(99999) %}{{ 'x' * 100 }}{% endfor %}"])
def test_huge_template_output_fails_the_node_naming_the_cap(template):
    doc = build([node("t", "template", {"template": template}), node("say", "answer", {"text": "{{ t.output }}"})],
                chain_edges("start", "t", "say"))
    events: list = []
    plan = compile_workflow(doc)
    settings = Settings(max_template_output_bytes=1_000_000)
    state = asyncio.run(run_workflow(plan, {}, deps=RunDeps(on_event=events.append, settings=settings)))
    assert state.status == "failed" and state.error.node_id == "t"
    assert state.error.reason == "output_too_large" and "max_template_output_bytes" in state.error.message
    assert len(state.model_dump_json()) < 100_000, "the run record stays small"


@pytest.mark.parametrize("size", [2_000, 50_000])
def test_node_outputs_over_the_cap_fail_the_node(size):
    doc = build([node("t", "template", {"template": f"{{{{ 'a' * {size} }}}}"})], [edge("start", "t")])
    plan = compile_workflow(doc)
    state = asyncio.run(run_workflow(plan, {}, deps=RunDeps(settings=Settings(max_node_output_bytes=1_000))))
    assert state.status == "failed" and state.error.reason == "output_too_large"
    assert "max_node_output_bytes" in state.error.message


def test_an_output_over_the_cap_takes_the_error_branch():
    doc = build([node("t", "template", {"template": "{{ 'a' * 5000 }}"}, error_strategy="error_branch"),
                 node("say", "answer", {"text": "too big"})], [edge("start", "t"), edge("t", "say", "error")])
    plan = compile_workflow(doc)
    state = asyncio.run(run_workflow(plan, {}, deps=RunDeps(settings=Settings(max_node_output_bytes=1_000))))
    assert state.status == "succeeded" and state.answer == "too big"


def test_the_outputs_of_a_whole_run_are_capped_with_a_reason_naming_the_cap():
    """Many nodes each under the per-node cap still cannot grow one run record without limit."""
    import asyncio

    from engine import RunDeps, Settings, run_workflow
    from tests.support.catalog import compile_workflow
    from tests.support.workflows import build, chain_edges, node

    ids = [f"t{i}" for i in range(6)]
    doc = build([node(i, "template", {"template": "{{ 'x' * 1000 }}"}) for i in ids], chain_edges("start", *ids))
    settings = Settings(max_node_output_bytes=2000, max_run_output_bytes=3500)
    state = asyncio.run(run_workflow(compile_workflow(doc), {}, deps=RunDeps(settings=settings)))
    assert state.status == "failed" and state.error.reason == "run_too_large"
    assert state.error.node_id == "t3" and "max_run_output_bytes" in state.error.message
    assert [state.node_runs[i].status for i in ids[:3]] == ["succeeded"] * 3
    roomy = asyncio.run(run_workflow(compile_workflow(doc), {}, deps=RunDeps(settings=Settings())))
    assert roomy.status == "succeeded"


@pytest.mark.parametrize("template", [
    "{{ ('x' ~ 'y') | center(100000000) | length }}",
    "{{ 'x'.center(3000000000) }}",
    "{{ 'x'.ljust(100000000) | length }}",
    "{{ 'x'.zfill(999999999) }}",
    "{{ 'x' | indent(100000000) }}",
    "{{ ('a' * 1000) | replace('a', 'bbbbbbbbbb' * 1000) | length }}",
    "{{ ('a' * 1000).replace('a', 'b' * 100000) | length }}",
    "{{ '%99999999s' | format('x') | length }}",
    "{{ '{:>3999999999}'.format(1) }}",
    "{{ '{a:>3999999999}'.format_map({'a': 1}) }}",
])
def test_padding_replacing_and_formatting_past_the_cap_are_refused_before_they_allocate(template):
    """Filters and str methods that build large strings from small ones are checked from
    their arguments; a node never allocates gigabytes to produce an output that is refused."""
    import asyncio
    import resource

    from engine import RunDeps, run_workflow
    from tests.support.catalog import compile_workflow
    from tests.support.workflows import build, chain_edges, node

    doc = build([node("t", "template", {"template": template})], chain_edges("start", "t"))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    state = asyncio.run(run_workflow(compile_workflow(doc), {}, deps=RunDeps()))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert state.status == "failed" and state.error.reason == "output_too_large", state.error
    assert "max_template_output_bytes" in state.error.message
    assert grown_kib < 64 * 1024, f"the process grew by {grown_kib} KiB"


def test_ordinary_padding_replacing_and_formatting_still_work():
    import asyncio

    from engine import RunDeps, run_workflow
    from tests.support.catalog import compile_workflow
    from tests.support.workflows import build, chain_edges, node

    template = "{{ 'ab' | center(6) }}|{{ 'a b' | replace(' ', '-') }}|{{ '%3d' | format(7) }}|{{ '{}!'.format('hi') }}"
    doc = build([node("t", "template", {"template": template})], chain_edges("start", "t"))
    state = asyncio.run(run_workflow(compile_workflow(doc), {}, deps=RunDeps()))
    assert state.node_runs["t"].outputs == {"output": "  ab  |a-b|  7|hi!"}
