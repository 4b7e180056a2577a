"""nodes.llm.json_scan: the first complete JSON value in a model reply."""

from __future__ import annotations

import time

import pytest

from nodes.llm.json_scan import JsonNotFound, candidate_spans, find_json, line_col, scan_json


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ("  [1, 2, 3]\n", [1, 2, 3]),
        ('Sure! Here it is:\n```json\n{"category": "billing"}\n```\nAnything else?', {"category": "billing"}),
        ('```\n[\n  "q1",\n  "q2"\n]\n```', ["q1", "q2"]),
        # brackets, braces and backticks inside string values
        ('{"code": "use `x[0]` and {y}", "ok": true}', {"code": "use `x[0]` and {y}", "ok": True}),
        ('{"s": "escaped \\" quote } and \\\\"}', {"s": 'escaped " quote } and \\'}),
        ('{"fence": "```json {\\"inner\\": 1} ```"}', {"fence": '```json {"inner": 1} ```'}),
        # json5 tolerance: trailing comma, single quotes, unquoted keys, comments
        ("{'name': 'Ann', age: 3,}", {"name": "Ann", "age": 3}),
        ('{\n  // why\n  "a": 1, /* } ] */ "b": [2,],\n}', {"a": 1, "b": [2]}),
        # prose after, with its own brackets and another value
        ('{"a": 1} - see [2] and {"b": 2}', {"a": 1}),
    ],
)
def test_finds_first_complete_value(text, value):
    match = find_json(text)
    assert match.value == value
    assert text[match.start : match.end].startswith(("{", "["))


def test_prose_brackets_before_the_value_are_skipped_when_shape_is_given():
    text = 'According to the docs (see [1]) and {placeholder}, the answer is:\n{"category": "refund"}'
    assert find_json(text, expect="object").value == {"category": "refund"}
    # without a shape, "[1]" is itself a complete JSON value, so the caller says what it wants
    assert find_json(text).value == [1]
    strings = find_json('Queries (see [1]): ["a", "b"]', accept=lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v))
    assert strings.value == ["a", "b"]


def test_unclosed_and_mismatched_prose_brackets_do_not_hide_the_value():
    assert find_json('smile :-[ then {"a": [1, 2]}').value == {"a": [1, 2]}
    assert find_json('bad (] {"a": 1}').value == {"a": 1}
    assert find_json("it's Bob's note [draft {\"a\": 1}", expect="object").value == {"a": 1}


def test_nested_value_found_inside_a_rejected_one():
    text = 'Result: [{"category": "x"}]'
    assert find_json(text, expect="object").value == {"category": "x"}


def test_positions_and_prefix_suffix():
    text = 'intro\n```json\n{"a": 1}\n```'
    match = find_json(text)
    assert match.prefix == "intro\n```json\n"
    assert match.suffix == "\n```"
    assert line_col(text, match.start) == (3, 1)


def test_empty_reply():
    with pytest.raises(JsonNotFound) as info:
        find_json("   ")
    assert info.value.reason == "empty" and info.value.position is None


def test_no_json_at_all():
    with pytest.raises(JsonNotFound) as info:
        find_json("I cannot help with that.")
    assert info.value.reason == "no_json"
    assert "contains no JSON" in str(info.value)


def test_invalid_json_reports_line_and_column():
    text = 'Here:\n{"a": 1,\n "b": tru}'
    with pytest.raises(JsonNotFound) as info:
        find_json(text)
    err = info.value
    assert err.reason == "invalid_json"
    assert (err.line, err.column) == (3, 10)  # json5 stops at the "}" after the bare word
    assert text[err.position] == "}"
    assert "near:" in err.hint(text) and "tru" in err.hint(text)


def test_unclosed_value_is_reported_where_it_opens():
    text = 'start {"a": [1, 2'
    with pytest.raises(JsonNotFound) as info:
        find_json(text)
    assert info.value.reason == "unclosed"
    assert (info.value.line, info.value.column) == (1, 7)


def test_wrong_shape_is_reported():
    with pytest.raises(JsonNotFound) as info:
        find_json("[1, 2]", expect="object")
    assert info.value.reason == "not_accepted"


def test_scan_json_returns_none():
    assert scan_json("nothing here") is None
    assert scan_json('{"x": 1}').value == {"x": 1}


def test_candidate_spans_are_string_aware():
    spans = list(candidate_spans('{"a": "}"} [1'))
    assert spans[0][:2] == (0, 10)
    assert spans[-1][1] is None


def test_hostile_reply_is_bounded_in_time():
    text = "[" * 20_000 + '{"a": 1}'
    started = time.perf_counter()
    with pytest.raises(JsonNotFound):
        find_json("{" * 3000 + "x" * 3000)
    with pytest.raises(JsonNotFound):
        find_json(text)  # the work budget stops the scan before the value: bounded, not hung
    assert time.perf_counter() - started < 20
