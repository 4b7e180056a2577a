"""A run's detail answer built straight from its rows (:mod:`api.detail_rows`) is the models'
answer byte for byte whenever it is built, and leaves the rows to the models (None)
wherever they would give something else or refuse the rows."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from api.detail_rows import detail_body_of_rows
from api.responses import JsonBody, run_detail_body
from workers.sql.run_reads import RunReads

CITATION = {"citation_id": "1", "chunk_id": "c1", "dataset_id": "d", "document_id": "doc", "source_name": "a.md",
            "position": 0, "score": 0.5, "text": "quoted"}

#: per column of the run's row: the value of a plain run first, then others a row may hold
RUN_VALUES: dict[str, list[Any]] = {
    "run_id": ["r1"], "tenant_id": ["default", 3], "workflow_id": ["w", None], "workflow_hash": ["h"],
    "workflow_version": ["3", None, 3],
    "status": ["succeeded", "running", "paused", "bogus", 1],
    "chat_id": ["r1", None, "c1", 5], "user_id": ["", None, "u", 7],
    "created_at": [1.0, 1, None, True], "started_at": [2.0, None, 2], "finished_at": [5.5, None, 5],
    "deadline": [None, 9.0, 9, "x"], "wall_time_left": [None, 3.0, 3, "x"], "paused_at": [None, 4.0, False, "x"],
    "waited_s": [0.0, 0, 0.5, None], "tokens_in": [0, 3, 3.0, True, None], "tokens_out": [0, 4, None],
    "cost": [0.0, 0.25, 0, None], "usage_estimated": [False, True, 0, None],
    "node_executions": [3, 3.0, True], "seq": [9, None, False], "answer": ["Hello, Ada!", "", None, 3],
    "error": [None, {"type": "X", "message": "boom"}, {"bad": 1}],
    "interrupts": [{}, None, [], {"i1": {"id": "i1", "node_id": "ask", "node_run_id": "r1:ask", "kind": "ask",
                                         "payload": {"question": "which city?"}, "created_at": 4.5}},
                   {"i1": {"id": "i1", "node_id": "ask", "node_run_id": "r1:ask", "kind": "ask",
                           "payload": {"question": "which city?"}, "created_at": 4.5, "answered": True,
                           "answer": "Paris"}}],
    "inputs": [{"name": "Ada"}, None, {}, {"n": 10**19 + 1, "q": [1, {"a": None}]}, [], [1]],
    "sys": [{"chat_id": "r1", "user_id": ""}, None, {}, {"rerun_of": "r0", "rerun_from": "body", "query": "hi " * 60},
            {"run_kind": "single_node", "single_node": "n"}, {"run_kind": 5}, {"single_node": 7}, {"query": 3}, "x"],
    "variables": [{}, None, {"k": 1}, "x"], "conversation": [{}, None, {"k": [1]}, 2],
    "outputs": [{}, None, {"x": [1.5, True, None]}, ["a"]],
    "owner_id": [None, "o", 4], "owner_host": [None, "h", 3], "owner_pid": [None, 12, "p"],
    "lease_until": [None, 9.0, 9, "soon"],
}
#: the same for a node run's row
NODE_VALUES: dict[str, list[Any]] = {
    "node_id": ["greet", 3], "kind": ["template", None], "status": ["succeeded", "pending", "waiting", "nope"],
    "inputs": [{"who": "Ada"}, None, {}, {"q": "é ✓"}, []],
    "outputs": [{"output": "Hello"}, None, {}, {"citations": [CITATION]}, {"citations": "none"}, [1]],
    "handles": [["out"], None, [], [1], "out"],
    "error": [None, {"type": "T", "message": "m", "node_id": "greet"}, {"nope": 1}],
    "attempts": [1, 0, 2.0, True], "retries": [0, 1, None], "started_at": [2.0, None, 3],
    "finished_at": [2.5, None, 4], "waited_s": [0.0, 0, 0.5],
    "usage": [None, {"model": "m", "tokens_in": 7, "cost": 0.25, "estimated": True},
              {"model": "m", "tokens_in": 7, "tokens_out": 1, "cost": 1}],
    "data": [{}, None, {"reused_from": {"node_run_id": "old", "run_id": "r0"}}, {"raw": [1, None, 2.5]}, []],
    "loop_id": [None, "L", 3], "iteration": [None, 0, 4, 1.0, True], "pending": [None, {"bogus": 1}],
}


def plain(values: dict[str, list[Any]]) -> dict[str, Any]:
    return {name: options[0] for name, options in values.items()}


def node_row(number: int, **values: Any) -> dict[str, Any]:
    row = {**plain(NODE_VALUES), "node_run_id": f"r1:n{number}", "current": True, "seq": number}
    row.update(values)
    return row


def models_answer(row: dict[str, Any], nodes: list[dict[str, Any]]) -> bytes | ValidationError:
    """The answer made from the models, or what they raise for the rows."""
    try:
        return JsonBody(run_detail_body(*RunReads.detail_of_rows(row, nodes))).body
    except ValidationError as error:
        return error


def check(row: dict[str, Any], nodes: list[dict[str, Any]]) -> bool:
    """The rows' answer is the models' when built; where the models refuse the rows, the
    rows' way leaves them to the models (None) or raises what they raise. True: built."""
    with mock.patch("time.time", return_value=100.0):  # a run not finished lasts until now
        expected = models_answer(row, nodes)
        try:
            got = detail_body_of_rows(row, nodes)
        except ValidationError as error:  # a node run not plain, made from its model
            assert isinstance(expected, ValidationError) and error.errors() == expected.errors()
            return False
    if isinstance(expected, ValidationError):
        assert got is None
        return False
    if got is not None:
        assert JsonBody(got).body == expected
    return got is not None


def test_a_plain_run_is_answered_from_its_rows():
    nodes = [node_row(0, kind="start", outputs={"name": "Ada"}), node_row(1),
             node_row(2, kind="answer", inputs={}, outputs={"answer": "Hello, Ada!"})]
    assert check(plain(RUN_VALUES), nodes)
    assert check(plain(RUN_VALUES), [])


def test_node_runs_that_are_not_plain_are_made_from_their_models():
    nodes = [node_row(0), node_row(1, error=NODE_VALUES["error"][1], status="failed"),
             node_row(2, usage=NODE_VALUES["usage"][1], data=NODE_VALUES["data"][2]),
             node_row(3, loop_id="L", iteration=0, current=False, attempts=2.0, waited_s=0)]
    assert check(plain(RUN_VALUES), nodes)


def test_a_run_citing_or_not_plain_goes_through_the_models():
    assert not check(plain(RUN_VALUES), [node_row(0, outputs={"citations": [CITATION]})])
    for name, value in (("cost", 0), ("error", RUN_VALUES["error"][1]), ("interrupts", RUN_VALUES["interrupts"][3])):
        assert not check({**plain(RUN_VALUES), name: value}, [node_row(0)])


@pytest.mark.parametrize("name", sorted(RUN_VALUES))
def test_each_value_of_the_run_row_alone(name):
    """A plain run with one value of its row changed, for every value of the table."""
    nodes = [node_row(0), node_row(1, kind="answer")]
    for value in RUN_VALUES[name]:
        check({**plain(RUN_VALUES), name: value}, nodes)


@pytest.mark.parametrize("name", sorted(NODE_VALUES))
def test_each_value_of_a_node_row_alone(name):
    """A plain run with one value of a node run's row changed, for every value of the table."""
    for value in NODE_VALUES[name]:
        check(plain(RUN_VALUES), [node_row(0), node_row(1, **{name: value})])


def _pick(values: dict[str, list[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({name: st.sampled_from(options) for name, options in values.items()})


@settings(max_examples=400, deadline=None)
@given(run=_pick(RUN_VALUES), nodes=st.lists(_pick(NODE_VALUES), max_size=3), currents=st.lists(st.booleans(),
       min_size=3, max_size=3))
def test_rows_answer_as_the_models_or_leave_it_to_them(run, nodes, currents):
    rows = [{**node, "node_run_id": f"r1:n{i}", "current": currents[i], "seq": i} for i, node in enumerate(nodes)]
    check(run, rows)


@settings(max_examples=200, deadline=None)
@given(run=st.fixed_dictionaries({name: st.sampled_from(options[:2]) for name, options in RUN_VALUES.items()}),
       nodes=st.lists(st.fixed_dictionaries({name: st.sampled_from(options[:2])
                                            for name, options in NODE_VALUES.items()}), max_size=3))
def test_nearly_plain_rows(run, nodes):
    """Mostly values of plain runs, so the rows' answer is built and compared often."""
    rows = [{**node, "node_run_id": f"r1:n{i}", "current": True, "seq": i} for i, node in enumerate(nodes)]
    check(run, rows)
