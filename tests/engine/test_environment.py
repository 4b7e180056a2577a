"""Environment variables (``env.NAME``) in the engine: every node field reads them (a
reference, a template, an LLM prompt), a node gets a secret's real value while every
event, checkpoint and log record of the run holds the mask; an unset secret fails the
node that reads it, naming it; the compiler checks ``env`` references like the others."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from engine import RunDeps, run_workflow
from engine.environment import MemorySecrets, Redactor, release_environment, run_environment
from engine.errors import CompileError
from schemas.env_vars import MASK, EnvVar, strip_secret_values
from schemas.types import RunStatus
from tests.support.catalog import compile_workflow
from tests.support.openai_server import text_reply
from tests.support.workflows import build, chain_edges, node

SECRET = "sk-engine-5a9f13c0d7"


def _doc(*nodes: dict[str, Any], env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    ids = [n["id"] for n in nodes]
    doc = build(list(nodes), chain_edges("start", *ids))
    doc["environment"] = env if env is not None else [
        {"name": "TOKEN", "type": "secret"}, {"name": "REGION", "value": "eu"},
        {"name": "LIMIT", "type": "number", "value": 3}]
    return doc


async def _run(doc: dict[str, Any], secrets: dict[str, str] | None = None, *, registry: Any = None,
               tenant: str = "default") -> tuple[Any, list[Any], list[Any]]:
    store = MemorySecrets()
    if secrets:
        await store.set_secrets(tenant, doc["id"], secrets)
    events: list[Any] = []
    checkpoints: list[Any] = []
    plan = compile_workflow(doc, models=registry)
    deps = RunDeps(on_event=events.append, secrets=store, models=registry,
                   checkpoint=lambda state, _delta: checkpoints.append(state.model_dump_json()))
    state = await run_workflow(plan, {}, deps=deps)
    return state, events, checkpoints


async def test_references_and_templates_read_env_and_records_hold_the_mask():
    doc = _doc(node("t", "template", {"template": "{{ env.REGION }}/{{ env.LIMIT + 1 }}/{{ env.TOKEN }}"}),
               node("end", "end", {"outputs": [{"name": "text", "value": {"ref": "t.output"}},
                                               {"name": "token", "value": {"ref": "env.TOKEN"}}]}))
    state, events, checkpoints = await _run(doc, {"TOKEN": SECRET})
    assert state.status is RunStatus.succeeded, state.error
    assert state.node_runs["t"].outputs == {"output": f"eu/4/{SECRET}"}, "the node got the real value"
    recorded = [e.model_dump_json() for e in events] + checkpoints
    assert not [r for r in recorded if SECRET in r]
    finished = events[-1]
    assert finished.outputs == {"text": f"eu/4/{MASK}", "token": MASK}
    assert "env" not in state.model_dump(), "the values are no part of the stored state"


async def test_a_binding_reads_env_and_the_recorded_inputs_hold_the_mask():
    doc = _doc(node("t", "template", {"template": "key={{ k }} max={{ n }}", "variables": [
        {"name": "k", "value": {"ref": "env.TOKEN"}, "type": "string", "required": True},
        {"name": "n", "value": {"ref": "env.LIMIT"}, "type": "number"}]}))
    state, events, checkpoints = await _run(doc, {"TOKEN": SECRET})
    assert state.status is RunStatus.succeeded, state.error
    assert state.node_runs["t"].inputs == {"k": SECRET, "n": 3}, "the node reads the real value"
    finished = next(e for e in events if getattr(e, "node_id", None) == "t" and e.type == "node_finished")
    assert finished.outputs == {"output": f"key={MASK} max=3"}
    assert f'"inputs":{{"k":"{MASK}","n":3}}' in checkpoints[-1], "the stored trace shows the mask"
    assert SECRET not in checkpoints[-1]


async def test_an_llm_prompt_gets_the_value_and_its_trace_the_mask(openai_server, scripted_registry):
    openai_server.script(text_reply("done"))
    doc = _doc(node("chat", "chat", {"model": "plain-model", "system_prompt": "Key: {{ env.TOKEN }}",
                                     "user_prompt": "region {{ env.REGION }}"}),
               node("end", "end", {"outputs": [{"name": "a", "value": {"ref": "chat.answer"}}]}))
    state, events, checkpoints = await _run(doc, {"TOKEN": SECRET}, registry=scripted_registry)
    assert state.status is RunStatus.succeeded, state.error
    assert SECRET in openai_server.bodies[0]["messages"][0]["content"]
    assert not [r for r in [e.model_dump_json() for e in events] + checkpoints if SECRET in r]


async def test_an_unset_secret_fails_the_node_naming_it():
    doc = _doc(node("t", "template", {"template": "Bearer {{ env.TOKEN }}"}))
    state, _events, _ = await _run(doc)
    assert state.status is RunStatus.failed
    assert "'TOKEN' is not set" in state.error.message and "Environment" in state.error.message
    doc = _doc(node("end", "end", {"outputs": [{"name": "k", "value": {"ref": "env.TOKEN"}}]}))
    state, _events, _ = await _run(doc)
    assert "environment variable 'TOKEN' is not set" in state.error.message


async def test_secrets_are_read_per_tenant():
    doc = _doc(node("end", "end", {"outputs": [{"name": "k", "value": {"ref": "env.TOKEN"}}]}))
    store = MemorySecrets()
    await store.set_secrets("tenant-a", doc["id"], {"TOKEN": SECRET})
    wf = compile_workflow(doc).workflow
    mine, _ = await run_environment(wf, "tenant-a", store)
    theirs, _ = await run_environment(wf, "tenant-b", store)
    assert mine["TOKEN"] == SECRET and "TOKEN" not in theirs


def test_unknown_env_reference_is_a_compile_error_with_a_suggestion():
    doc = _doc(node("t", "template", {"template": "{{ env.TOKEM }}"}))
    with pytest.raises(CompileError) as failed:
        compile_workflow(doc)
    (problem,) = [p for p in failed.value.problems if p.code == "unknown_env"]
    assert "env.TOKEM is not declared" in problem.message and "TOKEN" in problem.message


def test_an_environment_variable_declared_twice_is_a_compile_error():
    doc = _doc(node("t", "template", {"template": "{{ env.A }}"}), env=[{"name": "A", "value": "1"},
                                                                         {"name": "A", "type": "secret"}])
    with pytest.raises(CompileError) as failed:
        compile_workflow(doc)
    (problem,) = [p for p in failed.value.problems if p.code == "duplicate_env"]
    assert problem.path == "environment[1]"


def test_env_is_a_reserved_node_id():
    doc = _doc(node("env", "template", {"template": "x"}))
    with pytest.raises(CompileError) as failed:
        compile_workflow(doc)
    assert "reserved_node_id" in {p.code for p in failed.value.problems}


def test_a_document_never_holds_a_secret_value():
    with pytest.raises(ValueError, match="is a secret: its value is not part of the document"):
        EnvVar(name="TOKEN", type="secret", value=SECRET)
    assert EnvVar(name="N", type="number", value="2.5").value == 2.5
    with pytest.raises(ValueError, match="is a number"):
        EnvVar(name="N", type="number", value="many")
    doc, values = strip_secret_values({"id": "w", "environment": [
        {"name": "TOKEN", "type": "secret", "value": SECRET}, {"name": "OLD", "type": "secret", "value": MASK},
        {"name": "R", "value": "eu"}]})
    assert values == {"TOKEN": SECRET}, "the mask means unchanged"
    assert doc["environment"] == [{"name": "TOKEN", "type": "secret", "value": None},
                                  {"name": "OLD", "type": "secret", "value": None}, {"name": "R", "value": "eu"}]


def test_redactor_masks_nested_values_and_keeps_unchanged_objects():
    redactor = Redactor([SECRET, "abc"])  # too short to be masked: it would garble traces
    value = {"a": [f"x{SECRET}y", {"b": SECRET}], "c": "abc", "d": 1}
    assert redactor.value(value) == {"a": [f"x{MASK}y", {"b": MASK}], "c": "abc", "d": 1}
    clean = {"a": ["plain"], "b": 2}
    assert redactor.value(clean) is clean


async def test_log_records_mask_the_secrets_of_executing_runs(caplog):
    caplog.set_level(logging.INFO)
    wf = compile_workflow(_doc(node("t", "template", {"template": "x"}))).workflow
    store = MemorySecrets()
    await store.set_secrets("default", wf.id, {"TOKEN": SECRET})
    _values, redactor = await run_environment(wf, "default", store)
    log = logging.getLogger("tests.env")
    log.info("calling with %s", SECRET)
    try:
        raise RuntimeError(f"refused key {SECRET}")
    except RuntimeError:
        log.exception("a node failed")
    release_environment(redactor)
    log.info("after the run: %s", "sk-other-value-123")
    assert SECRET not in caplog.text
    assert f"calling with {MASK}" in caplog.text and f"refused key {MASK}" in caplog.text
