"""The CLI on interrupts: terminal prompts, --no-input pauses, `flowloom resume` from a second
process, and chat messages answering a paused run - with the embedded store and with Redis."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "order_confirm.json"
_BIN = Path(sys.executable).parent / "flowloom"
FLOWLOOM = str(_BIN) if _BIN.exists() else (shutil.which("flowloom") or "flowloom")


@pytest.fixture(params=["embedded", "postgres+redis"])
def store_env(request, tmp_path):
    """Environment for the CLI processes: the embedded defaults (SQLite and node memory files
    under FLOWLOOM_HOME), or a PostgreSQL run store with node memory in Redis."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    env["FLOWLOOM_HOME"] = str(tmp_path / "home")
    if request.param == "postgres+redis":
        env["FLOWLOOM_DATABASE_URL"] = request.getfixturevalue("make_postgres_database")()
        env["FLOWLOOM_REDIS_URL"] = request.getfixturevalue("redis_url")
    return env


def flowloom(env, *args, stdin=""):
    return subprocess.run([FLOWLOOM, *args], input=stdin, capture_output=True, text=True, env=env, timeout=60,
                          cwd=ROOT)


def paused_run_id(stderr: str) -> str:
    match = re.search(r"run paused: (\S+) waits", stderr)
    assert match, stderr
    return match.group(1)


def test_run_prompts_on_the_terminal_and_continues(store_env):
    proc = flowloom(store_env, "run", str(EXAMPLE), "--input", "item=tea", "--input", "quantity=2",
                    stdin="Change quantity\n7\nplease hurry\n")
    assert proc.returncode == 0, proc.stderr
    assert "Order 2 x tea?" in proc.stderr and "[confirm] Confirm" in proc.stderr
    assert "Quantity (number)" in proc.stderr
    assert "Order placed: 7 x tea." in proc.stdout


def test_invalid_prompt_answer_asks_again(store_env):
    proc = flowloom(store_env, "run", str(EXAMPLE), "--input", "item=tea", stdin="maybe\ncancel\n")
    assert proc.returncode == 0, proc.stderr
    assert "'maybe' is not one of" in proc.stderr
    assert "Order cancelled." in proc.stdout


def test_no_input_pauses_and_resume_continues_from_another_process(store_env):
    first = flowloom(store_env, "run", str(EXAMPLE), "--input", "item=tea", "--no-input", "--json")
    assert first.returncode == 3, first.stderr
    events = [json.loads(line) for line in first.stdout.splitlines()]
    assert events[-1]["type"] == "run_paused"
    run_id = paused_run_id(first.stderr)
    assert events[0]["run_id"] == run_id

    second = flowloom(store_env, "resume", run_id, "--answer", "change", "--no-input", "--json")
    assert second.returncode == 3, second.stderr  # now the form asks
    resumed = [json.loads(line) for line in second.stdout.splitlines()]
    assert resumed[0]["type"] == "run_resumed" and resumed[0]["seq"] == events[-1]["seq"] + 1
    assert [e["payload"]["description"] for e in resumed if e["type"] == "interrupt"] == ["How many tea?"]

    third = flowloom(store_env, "resume", run_id, "--answer", '{"quantity": "3"}')
    assert third.returncode == 0, third.stderr
    assert "Order placed: 3 x tea." in third.stdout
    again = flowloom(store_env, "resume", run_id, "--answer", "confirm")
    assert again.returncode == 2 and "has already ended (succeeded)" in again.stderr


def test_resume_unknown_run_is_a_clear_error(store_env):
    proc = flowloom(store_env, "resume", "does-not-exist", "--answer", "x")
    assert proc.returncode == 2 and "no run does-not-exist" in proc.stderr


def test_next_chat_message_answers_the_pending_question(store_env):
    first = flowloom(store_env, "run", str(EXAMPLE), "--input", "item=tea", "--chat-id", "c1",
                     "--message", "I want tea", "--no-input")
    assert first.returncode == 3, first.stderr
    second = flowloom(store_env, "run", str(EXAMPLE), "--input", "item=tea", "--chat-id", "c1",
                      "--message", "Confirm")
    assert second.returncode == 0, second.stderr
    assert "Order placed: 1 x tea." in second.stdout
    third = flowloom(store_env, "run", str(EXAMPLE), "--input", "item=coffee", "--chat-id", "c1",
                     "--message", "new order", "--no-input")
    assert third.returncode == 3, third.stderr  # the chat had no paused run left: a fresh run, paused again
    assert paused_run_id(third.stderr) != paused_run_id(first.stderr)


def test_no_input_pause_shows_the_question_and_how_to_answer(store_env):
    proc = flowloom(store_env, "run", str(EXAMPLE), "--input", "item=tea", "--no-input")
    assert proc.returncode == 3
    assert "Order 1 x tea?" in proc.stderr and "[change] Change quantity" in proc.stderr
    assert "--answer confirm  (one of: confirm, change, cancel, or a label)" in proc.stderr
    run_id = paused_run_id(proc.stderr)
    again = flowloom(store_env, "resume", run_id, "--answer", "change", "--no-input")
    assert again.returncode == 3
    assert "How many tea?" in again.stderr and "quantity (number)" in again.stderr
    assert """--answer '{"quantity": ..., "note": ...}'""" in again.stderr
    refused = flowloom(store_env, "resume", run_id, "--answer", '{"quantity": "lots"}', "--no-input")
    assert refused.returncode == 3 and "quantity: 'lots' is not a number" in refused.stderr


@pytest.mark.parametrize("env, expected", [
    ({"FLOWLOOM_MODELS": "/nonexistent/models.toml"}, "cannot read model registry /nonexistent/models.toml"),
    ({"FLOWLOOM_HTTP_MAX_RESPONSE_BYTES": "abc"}, "FLOWLOOM_HTTP_MAX_RESPONSE_BYTES: must be a whole number (got 'abc')"),
    ({"FLOWLOOM_HTTP_ALLOW": "10.0.0.0/99"}, "'10.0.0.0/99' is not a valid network"),
])
def test_bad_configuration_is_a_message_not_a_traceback(tmp_path, env, expected):
    base = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    base["FLOWLOOM_HOME"] = str(tmp_path)
    workflow = ROOT / "examples" / ("support_triage.json" if "FLOWLOOM_MODELS" in env else "hello.json")
    proc = flowloom({**base, **env}, "run", str(workflow), "--input", "name=Ada", "--message", "hi")
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("url", ["postgresql://nobody:secret@127.0.0.1:1/flowloom", "mysql://127.0.0.1/x"])
def test_unreachable_run_store_is_a_message_before_anything_runs(tmp_path, url):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    env.update(FLOWLOOM_HOME=str(tmp_path), FLOWLOOM_DATABASE_URL=url)
    proc = flowloom(env, "run", str(ROOT / "examples" / "hello.json"), "--input", "name=Ada")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "Hello, Ada!" not in proc.stdout
    assert "secret" not in proc.stderr + proc.stdout, "the password is never printed"
