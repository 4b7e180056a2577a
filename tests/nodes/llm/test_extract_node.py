"""extract_fields through the real engine: protocols, coercion, enum, failures that never raise."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import CompileError
from nodes.llm.extract import TOOL_NAME, coerce_field
from schemas.nodes_llm import ExtractField
from schemas.types import RunStatus
from tests.support.catalog import compile_workflow
from tests.support.openai_server import (
    fenced_json_reply,
    http_error,
    malformed_json_reply,
    text_reply,
    tool_args_split_reply,
)
from tests.support.workflows import build, chain_edges, edge, node

FIELDS = [
    {"name": "name", "type": "string", "description": "customer name", "required": True},
    {"name": "age", "type": "number"},
    {"name": "priority", "type": "string", "enum": ["low", "high"]},
    {"name": "vip", "type": "boolean"},
    {"name": "address", "type": "object"},
    {"name": "items", "type": "array"},
]
NAMES = [f["name"] for f in FIELDS]


def extract_doc(model: str = "plain-model", fields: list[dict[str, Any]] | None = None, **config: Any) -> dict[str, Any]:
    return build([node("ex", "extract_fields", {"model": model, "fields": fields or FIELDS, **config})],
                 chain_edges("start", "ex"), inputs=[{"name": "query", "type": "string"}])


def outputs(state) -> dict[str, Any]:
    return state.node_runs["ex"].outputs


def record(state) -> dict[str, Any]:
    return state.node_runs["ex"].data["extract"]


GOOD = {"name": "Ada", "age": "36", "priority": "HIGH", "vip": "yes", "address": '{"city": "Paris"}',
        "items": ["book"], "extra": 1}


# ------------------------------------------------------------------------ protocols


async def test_prompt_protocol_puts_the_schema_in_the_system_prompt(openai_server, llm_run):
    openai_server.script(fenced_json_reply(GOOD))
    state, _ = await llm_run(extract_doc(), {"query": "Ada, 36, VIP, urgent"})
    assert state.status is RunStatus.succeeded, state.error
    body = openai_server.bodies[0]
    assert "tools" not in body and "response_format" not in body
    system = body["messages"][0]["content"]
    schema = json.loads(system.split("<schema>\n", 1)[1].split("\n</schema>", 1)[0])
    assert schema["required"] == ["name"] and schema["properties"]["priority"]["enum"] == ["low", "high"]
    assert schema["properties"]["name"] == {"type": "string", "description": "customer name"}
    assert body["messages"][-1] == {"role": "user", "content": "Ada, 36, VIP, urgent"}
    assert (body["temperature"], body["max_tokens"]) == (0.0, 512)
    assert record(state)["protocol"] == "prompt"


async def test_structured_output_is_used_when_the_model_has_it(openai_server, llm_run):
    openai_server.script(text_reply(json.dumps(GOOD)))
    state, _ = await llm_run(extract_doc("tools-model"), {"query": "x"})
    body = openai_server.bodies[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["properties"]["age"] == {"type": "number"}
    assert "tools" not in body
    assert record(state)["protocol"] == "structured" and outputs(state)["success"] is True


async def test_tool_mode_forces_the_function_and_reads_its_arguments(openai_server, llm_run):
    openai_server.script(tool_args_split_reply(TOOL_NAME, json.dumps(GOOD)))
    state, _ = await llm_run(extract_doc("tools-model", mode="tool"), {"query": "x"})
    body = openai_server.bodies[0]
    assert body["tool_choice"] == {"type": "function", "function": {"name": TOOL_NAME}}
    assert body["tools"][0]["function"]["parameters"]["required"] == ["name"]
    assert outputs(state)["success"] is True and outputs(state)["name"] == "Ada"


async def test_forced_tool_call_missing_gives_empty_fields(openai_server, llm_run):
    openai_server.script(text_reply('{"name": "Ada"}'))
    state, _ = await llm_run(extract_doc("tools-model", mode="tool"), {"query": "x"})
    assert state.status is RunStatus.succeeded
    assert outputs(state)["fields"] == {} and outputs(state)["success"] is False
    assert record(state)["reason"] == "no_tool_call" and record(state)["raw"] == '{"name": "Ada"}'


async def test_mode_the_model_cannot_do_fails_clearly(openai_server, llm_run):
    state, _ = await llm_run(extract_doc(mode="structured"), {"query": "x"})
    assert state.status is RunStatus.failed and state.error.node_id == "ex"
    assert "does not support 'structured'" in state.error.message


# ------------------------------------------------------------------------ coercion


async def test_values_are_coerced_to_declared_types_and_enum(openai_server, llm_run):
    openai_server.script(fenced_json_reply(GOOD))
    state, _ = await llm_run(extract_doc(), {"query": "x"})
    expected = {"name": "Ada", "age": 36, "priority": "high", "vip": True, "address": {"city": "Paris"},
                "items": ["book"]}
    assert outputs(state)["fields"] == expected
    assert {k: outputs(state)[k] for k in NAMES} == expected
    assert outputs(state)["success"] is True
    assert record(state)["ignored"] == ["extra"]


async def test_invalid_optional_values_are_dropped_without_failing_success(openai_server, llm_run):
    openai_server.script(text_reply(json.dumps({"name": "Ada", "age": "36 years", "priority": "urgent", "vip": 2})))
    state, _ = await llm_run(extract_doc(), {"query": "x"})
    out = outputs(state)
    assert out["success"] is True and out["fields"] == {"name": "Ada"}
    assert out["age"] is None and out["priority"] is None and out["vip"] is None
    assert set(record(state)["invalid"]) == {"age", "priority", "vip"}
    assert "not one of" in record(state)["invalid"]["priority"]


REQUIRED_NUMBER = [{"name": "name", "type": "number", "required": True}, FIELDS[1]]


@pytest.mark.parametrize(("fields", "reply"), [
    (FIELDS[:2], {"age": 3}),  # absent
    (FIELDS[:2], {"name": None, "age": 3}),  # null counts as absent
    (REQUIRED_NUMBER, {"name": {"first": "Ada"}, "age": 3}),  # present but not convertible
])
async def test_missing_or_invalid_required_field_fails_success(openai_server, llm_run, fields, reply):
    openai_server.script(text_reply(json.dumps(reply)))
    state, _ = await llm_run(extract_doc(fields=fields), {"query": "x"})
    assert state.status is RunStatus.succeeded
    assert outputs(state)["success"] is False and outputs(state)["name"] is None
    assert outputs(state)["age"] == 3 and outputs(state)["fields"] == {"age": 3}


# ---------------------------------------------------------------- unparseable replies


@pytest.mark.parametrize(("reply_factory", "reason"), [
    (lambda: malformed_json_reply(), "unclosed"),
    (lambda: text_reply("I could not find any of those fields."), "no_json"),
    (lambda: text_reply('{"name": "Ada", "age": }'), "invalid_json"),
    (lambda: text_reply(""), "empty"),
    (lambda: text_reply('["Ada", 36]'), "not_accepted"),
])
async def test_unparseable_reply_gives_empty_fields_and_success_false(openai_server, llm_run, reply_factory, reason):
    scripted = reply_factory()
    openai_server.script(scripted)
    state, _ = await llm_run(extract_doc(), {"query": "x"})
    assert state.status is RunStatus.succeeded  # never an exception
    out = outputs(state)
    assert out["fields"] == {} and out["success"] is False and all(out[n] is None for n in NAMES)
    rec = record(state)
    assert rec["reason"] == reason and rec["missing"] == ["name"]
    assert rec["raw"] == "".join(s.text for s in scripted.steps if hasattr(s, "text") and isinstance(s.text, str))


async def test_prose_with_brackets_around_the_json_is_fine(openai_server, llm_run):
    reply = 'Based on the text (see [1] and [2]):\n{"name": "Ada", "items": ["a", "[b]"]}\nThat is all [end].'
    openai_server.script(text_reply(reply))
    state, _ = await llm_run(extract_doc(), {"query": "x"})
    assert outputs(state)["fields"] == {"name": "Ada", "items": ["a", "[b]"]}
    assert outputs(state)["success"] is True


async def test_provider_error_fails_the_node_naming_it(openai_server, llm_run):
    openai_server.script(http_error(400, "no such model upstream"))
    state, _ = await llm_run(extract_doc(), {"query": "x"})
    assert state.status is RunStatus.failed
    assert state.error.node_id == "ex" and "'ex'" in state.error.message


async def test_usage_is_recorded(openai_server, llm_run):
    openai_server.script(text_reply('{"name": "Ada"}', usage=(200, 9)))
    state, _ = await llm_run(extract_doc(), {"query": "x"})
    usage = state.node_runs["ex"].usage
    assert (usage.tokens_in, usage.tokens_out, usage.token_source, usage.model) == (200, 9, "provider", "plain-model")
    assert outputs(state)["usage"]["cost"] == pytest.approx(usage.cost) and usage.cost > 0


# -------------------------------------------------------------------------- config


@pytest.mark.parametrize(("fields", "message"), [
    ([{"name": "success"}], "reserved"),
    ([{"name": "a"}, {"name": "a"}], "unique"),
    ([{"name": "a", "type": "object", "enum": ["x"]}], "enum applies"),
    ([{"name": "a", "type": "number", "enum": ["x"]}], "not number"),
    ([{"name": "not valid"}], "pattern"),
])
def test_invalid_fields_are_compile_errors(scripted_registry, fields, message):
    with pytest.raises(CompileError, match=message):
        compile_workflow(extract_doc(fields=fields), models=scripted_registry, use_cache=False)


def test_field_outputs_are_typed_for_downstream_references(scripted_registry):
    doc = extract_doc()
    doc["nodes"].append(node("check", "if_else", {"cases": [{"id": "old", "conditions": [
        {"left": {"ref": "ex.age"}, "operator": "gt", "right": 60}]}]}))
    doc["nodes"].append(node("bad", "if_else", {"cases": [{"id": "x", "conditions": [
        {"left": {"ref": "ex.name"}, "operator": "gt", "right": 1}]}]}))
    doc["edges"] += [edge("ex", "check"), edge("ex", "bad")]
    with pytest.raises(CompileError) as info:
        compile_workflow(doc, models=scripted_registry, use_cache=False)
    problems = [(p.node_id, p.code) for p in info.value.problems if p.severity == "error"]
    assert problems == [("bad", "type_mismatch")]


@pytest.mark.parametrize(("field", "value", "expected"), [
    ({"type": "string"}, 5, "5"),
    ({"type": "string"}, True, "true"),
    ({"type": "string"}, {"b": 1, "a": 2}, '{"a": 2, "b": 1}'),
    ({"type": "number"}, " 42 ", 42),
    ({"type": "number"}, "3.5", 3.5),
    ({"type": "number"}, 7, 7),
    ({"type": "boolean"}, "No", False),
    ({"type": "boolean"}, 1, True),
    ({"type": "object"}, '{"a": 1}', {"a": 1}),
    ({"type": "array"}, "[1]", [1]),
    ({"type": "string", "enum": ["Low", "High"]}, " high ", "High"),
    ({"type": "number", "enum": [1, 2.5]}, "2.5", 2.5),
    ({"type": "boolean", "enum": [True]}, "true", True),
])
def test_coercion_rules(field, value, expected):
    got = coerce_field(ExtractField(name="f", **field), value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(("field", "value"), [
    ({"type": "number"}, True),
    ({"type": "number"}, "12 kg"),
    ({"type": "number"}, "1,000"),
    ({"type": "number"}, "1_000"),
    ({"type": "number"}, "NaN"),
    ({"type": "number"}, float("inf")),
    ({"type": "boolean"}, "maybe"),
    ({"type": "boolean"}, 2),
    ({"type": "object"}, [1]),
    ({"type": "array"}, "not json"),
    ({"type": "number", "enum": [1, 2]}, 3),
    ({"type": "boolean", "enum": [True]}, False),
])
def test_coercion_refusals(field, value):
    with pytest.raises(ValueError):
        coerce_field(ExtractField(name="f", **field), value)
