"""Builtin tools (Dify's account-free providers): the shape of each result (text and value),
timezones, and the errors bad arguments give - called directly, no engine."""

from __future__ import annotations

import json
import time

import pytest

from nodes.agent import builtin_tools
from nodes.agent.builtin_tools import BUILTIN_TOOLS, ToolArgumentError, ToolResult, dify_builtin, run_builtin


def test_every_tool_gives_text_and_a_value():
    out = run_builtin("weekday", {"year": 2000, "month": 2, "day": 29})
    assert out == ToolResult("February 29, 2000 is Tuesday.", "February 29, 2000 is Tuesday.")


# ------------------------------------------------------------------ time


@pytest.mark.parametrize(
    "local,zone,stamp",
    [
        ("2024-07-01 12:00:00", "Europe/Berlin", 1719828000),  # summer time, UTC+2
        ("2024-01-15 12:00:00", "Europe/Berlin", 1705316400),  # winter time, UTC+1
        ("2024-01-15 12:00:00", "Asia/Kolkata", 1705300200),  # a half-hour offset
        ("2024-01-15 12:00:00", "UTC", 1705320000),
    ],
)
def test_localtime_and_timestamp_convert_both_ways_in_a_timezone(local, zone, stamp):
    out = run_builtin("localtime_to_timestamp", {"localtime": local, "timezone": zone})
    assert out == ToolResult(str(stamp), stamp)
    assert run_builtin("timestamp_to_localtime", {"timestamp": stamp, "timezone": zone}).text == local


def test_timezone_conversion_follows_summer_time():
    args = {
        "current_time": "2024-03-31 00:30:00",
        "current_timezone": "UTC",
        "target_timezone": "Europe/London",
    }
    assert run_builtin("timezone_conversion", args).text == "2024-03-31 00:30:00"
    args["current_time"] = "2024-03-31 01:30:00"  # the clocks went forward at 01:00 UTC
    assert run_builtin("timezone_conversion", args).text == "2024-03-31 02:30:00"


def test_current_time_is_now_in_the_zone():
    before = int(time.time())
    stamp = int(run_builtin("current_time", {"format": "%s", "timezone": "UTC"}).text)
    assert before - 1 <= stamp <= int(time.time()) + 1
    assert run_builtin("current_time", {"format": "%Z", "timezone": "America/New_York"}).text in (
        "EST",
        "EDT",
    )


@pytest.mark.parametrize(
    "tool,args,said",
    [
        (
            "timezone_conversion",
            {"current_time": "2024-01-01 00:00:00", "target_timezone": "Nowhere/City"},
            "invalid timezone: Nowhere/City",
        ),
        ("localtime_to_timestamp", {"localtime": "01/02/2024"}, "not in the format YYYY-MM-DD HH:MM:SS"),
        ("weekday", {"year": 2023, "month": 2, "day": 29}, "2023-2-29 is not a valid date"),
        ("timestamp_to_localtime", {}, "argument 'timestamp' must be an integer"),
    ],
)
def test_time_tools_name_what_is_wrong(tool, args, said):
    with pytest.raises(ToolArgumentError, match=said):
        run_builtin(tool, args)


# ------------------------------------------------------------------ JSON


def test_json_parse_gives_the_parsed_object_not_text():
    doc = json.dumps({"user": {"name": "Ada", "tags": ["a", "b"]}, "n": 3})
    out = run_builtin("json_parse", {"content": doc, "json_filter": "$.user"})
    assert out.value == {"name": "Ada", "tags": ["a", "b"]}
    assert json.loads(out.text) == out.value
    assert run_builtin("json_parse", {"content": doc, "json_filter": "$.n"}).value == 3
    assert run_builtin("json_parse", {"content": doc, "json_filter": "$.user.tags[*]"}).value == ["a", "b"]
    assert run_builtin("json_parse", {"content": doc, "json_filter": "$.missing"}).value == []


def test_json_tools_take_an_object_as_well_as_text():
    out = run_builtin("json_parse", {"content": {"a": [1, 2]}, "json_filter": "$.a[0]"})
    assert out == ToolResult("1", 1)


def test_json_edits_give_the_edited_document():
    doc = '{"items": [{"id": 1}, {"id": 2}], "meta": {"v": 1}}'
    inserted = run_builtin(
        "json_insert", {"content": doc, "query": "$.items", "new_value": '{"id": 3}', "index": 0}
    )
    assert inserted.value["items"] == [{"id": 3}, {"id": 1}, {"id": 2}]
    deleted = run_builtin("json_delete", {"content": doc, "query": "$.meta"})
    assert deleted.value == {"items": [{"id": 1}, {"id": 2}]}
    replaced = run_builtin(
        "json_replace",
        {
            "content": doc,
            "query": "$.meta.v",
            "replace_model": "value",
            "replace_value": "2",
            "value_decode": True,
        },
    )
    assert replaced.value["meta"] == {"v": 2} and json.loads(replaced.text) == replaced.value


@pytest.mark.parametrize(
    "tool,args,said",
    [
        ("json_parse", {"content": "[1,", "json_filter": "$"}, "content is not valid JSON"),
        ("json_parse", {"content": "{}"}, "argument 'json_filter' is required"),
        (
            "json_replace",
            {"content": "{}", "query": "$.a", "replace_model": "other"},
            "replace_model must be pattern, key or value",
        ),
        (
            "json_insert",
            {"content": '{"a": {}}', "query": "$.a", "new_value": "1"},
            "cannot insert a value that is not an object into an object",
        ),
    ],
)
def test_json_tools_name_what_is_wrong(tool, args, said):
    with pytest.raises(ToolArgumentError, match=said):
        run_builtin(tool, args)


# ------------------------------------------------------------------ maths


@pytest.mark.parametrize(
    "expression,value",
    [
        ("(3 + 4) * 2 ** 3", 56),
        ("1 / 4", 0.25),
        ("max(2, 7) - abs(-1)", 6),
        ("round(pi, 2)", 3.14),
        ("2 > 1", True),
        ("10 ** 3", 1000),
    ],
)
def test_eval_expression_gives_the_number(expression, value):
    out = run_builtin("eval_expression", {"expression": expression})
    assert out.value == value and out.text == str(value)


@pytest.mark.parametrize(
    "expression,said",
    [
        ("1 / 0", "cannot be computed: division by zero"),
        ("x + 1", "'x' is not defined"),
        ("__import__('os').system('true')", "arithmetic only"),
        ("(1).__class__", "arithmetic only"),
        ("2 ** 5000", "the power is too large"),
        ("'a' * 3", "gives str, not a number"),
        ("1 +", "does not parse"),
    ],
)
def test_eval_expression_refuses_what_is_not_arithmetic(expression, said):
    with pytest.raises(ToolArgumentError, match=said):
        run_builtin("eval_expression", {"expression": expression})


# ------------------------------------------------------------------ regex


def test_regex_extract_gives_the_matches():
    out = run_builtin("regex_extract", {"content": "order 12, then 345", "expression": r"\d+"})
    assert out == ToolResult('["12", "345"]', ["12", "345"])
    groups = run_builtin("regex_extract", {"content": "a=1; b=2", "expression": r"(\w)=(\d)"})
    assert groups.value == [["a", "1"], ["b", "2"]]
    assert run_builtin("regex_extract", {"content": "价格: 5元", "expression": r"\d+元"}).text == '["5元"]'
    assert run_builtin("regex_extract", {"content": "none", "expression": r"\d"}).value == []


def test_regex_extract_names_a_bad_pattern():
    with pytest.raises(ToolArgumentError, match=r"'\(a' is not a valid regular expression"):
        run_builtin("regex_extract", {"content": "a", "expression": "(a"})
    with pytest.raises(ToolArgumentError, match="argument 'content' is required"):
        run_builtin("regex_extract", {"content": "", "expression": "a"})


def test_regex_extract_stops_a_pattern_that_backtracks_for_ever(monkeypatch):
    monkeypatch.setattr(builtin_tools, "_REGEX_TIMEOUT_S", 0.2)  # 2 s in use; shorter here
    with pytest.raises(ToolArgumentError, match="took longer than 0.2 s"):
        run_builtin("regex_extract", {"content": "a" * 60 + "!", "expression": "(a|aa)+$"})


# ------------------------------------------------------------------ Dify names


@pytest.mark.parametrize(
    "provider,tool,found",
    [
        ("regex", "regex_extract", "regex_extract"),
        ("langgenius/regex/regex", "regex_extract", "regex_extract"),
        ("maths", "eval_expression", "eval_expression"),
        ("langgenius/maths/maths", "eval_expression", "eval_expression"),
        ("time", "regex_extract", None),  # the tool of another provider
        ("tavily", "tavily_search", None),
    ],
)
def test_dify_provider_and_tool_names_find_the_builtin(provider, tool, found):
    got = dify_builtin(provider, tool)
    assert (got.name if got else None) == found


def test_every_tool_has_a_dify_provider():
    assert {t.provider for t in BUILTIN_TOOLS.values()} == {"time", "json_process", "maths", "regex"}
