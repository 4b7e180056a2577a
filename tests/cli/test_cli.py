"""The ``flowloom`` CLI: validate, run (terminal and --json), schema, the examples, Ctrl-C.

Most tests call the typer app in-process with ``CliRunner``; the console script itself
is exercised by subprocess runs (hello, the weather runner script, SIGINT).
HTTP goes only to the local stub API (``examples/stub_server.py``) on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from api.cli import app
from engine.settings import get_settings
from nodes import builtin_catalog
from schemas.events import event_adapter
from tests.support.cli import FLOWLOOM
from tests.support.stub_api import stub_api
from tests.support.workflows import build, chain_edges, edge, node

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.json"))

runner = CliRunner()


# ------------------------------------------------------------------- helpers


def invoke(*args: str) -> Any:
    """Run the CLI in-process; stdout and stderr are kept apart."""
    return runner.invoke(app, [str(a) for a in args])


def write(tmp_path: Path, doc: dict[str, Any], name: str = "wf.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def parse_events(stdout: str) -> list[Any]:
    """Every stdout line must be one event; returns them validated."""
    adapter = event_adapter()
    return [adapter.validate_python(json.loads(line)) for line in stdout.splitlines()]


def assert_event_stream(events: list[Any], last: str) -> None:
    assert events, "no events"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "run_started"
    assert events[-1].type == last


def slow_workflow(seconds: float = 30) -> dict[str, Any]:
    """start -> wait (HTTP call to the stub's /slow endpoint) -> end."""
    return build(
        [
            node("wait", "http_request", {"url": "{{ inputs.base_url }}/slow", "query": {"seconds": str(seconds)},
                                          "timeout": 120}),
            node("finish", "end", {"outputs": [{"name": "status", "value": {"ref": "wait.status_code"}}]}),
        ],
        chain_edges("start", "wait", "finish"),
        inputs=[{"name": "base_url", "type": "string", "required": True}],
    )


def failing_workflow() -> dict[str, Any]:
    """A template that reads a key the input object does not have: fails at run time."""
    return build(
        [
            node("boom", "template", {"template": "{{ inputs.data.missing_key }}"}),
            node("finish", "end", {"outputs": [{"name": "x", "value": {"ref": "boom.output"}}]}),
        ],
        chain_edges("start", "boom", "finish"),
        inputs=[{"name": "data", "type": "object", "default": {}}],
    )


BROKEN = {
    "id": "broken",
    "inputs": [{"name": "q", "type": "string"}],
    "nodes": [
        node("start", "start"),
        node("route", "if_else", {"cases": [{"id": "yes", "conditions": [
            {"left": {"ref": "inputs.q"}, "operator": "equals"}]}]}),
        node("greet", "template", {"template": "{{ ghost.output }}"}),
        node("magic", "llm_magic", {}),
        node("lonely", "template", {"template": "alone"}),
        node("finish", "end", {"outputs": [{"name": "x", "value": {"ref": "greet.output"}}]}),
    ],
    "edges": [
        edge("start", "greet", edge_id="e1"),
        edge("greet", "finish", "maybe", edge_id="e2"),
        edge("greet", "nowhere", edge_id="e3"),
        edge("greet", "finish", edge_id="e4"),
    ],
}
#: (code, node_id, edge_id, path) of every error in BROKEN
BROKEN_ERRORS = {
    ("invalid_config", "route", None, "config.cases[0].conditions[0]"),
    ("unknown_kind", "magic", None, "type"),
    ("unknown_handle", "greet", "e2", "sourceHandle"),
    ("dangling_edge", None, "e3", "target"),
    ("unknown_template_name", "greet", None, "config.template"),
}


@pytest.fixture(scope="module")
def stub_url() -> Iterator[str]:
    """The local stub API (examples/stub_server.py) on a free port of 127.0.0.1."""
    with stub_api() as url:
        yield url


@pytest.fixture
def allow_loopback(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Let in-process runs reach the stub (settings are cached per process)."""
    monkeypatch.setenv("FLOWLOOM_HTTP_ALLOW", "127.0.0.1")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def subprocess_env() -> dict[str, str]:
    return {**os.environ, "FLOWLOOM_HTTP_ALLOW": "127.0.0.1", "PYTHON": sys.executable, "FLOWLOOM": FLOWLOOM}


# ------------------------------------------------------------------ validate


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_validate_accepts_each_example(path: Path) -> None:
    result = invoke("validate", path)
    assert result.exit_code == 0, result.output
    assert "valid" in result.stdout and repr(json.loads(path.read_text())["id"]) in result.stdout


def test_examples_cover_every_plumbing_kind() -> None:
    used = {n["type"] for path in EXAMPLE_FILES for n in json.loads(path.read_text())["nodes"]}
    plumbing = {"start", "answer", "end", "if_else", "template", "http_request", "variable_update",
                "variable_aggregator"}
    assert plumbing <= used
    assert len(EXAMPLE_FILES) >= 3


def test_validate_invalid_lists_every_problem(tmp_path: Path) -> None:
    result = invoke("validate", write(tmp_path, BROKEN))
    assert result.exit_code == 2
    lines = result.stdout.splitlines()
    for code, node_id, edge_id, path in BROKEN_ERRORS:
        matching = [ln for ln in lines if f" {code} " in ln]
        assert len(matching) == 1, (code, result.stdout)
        line = matching[0]
        assert line.lstrip().startswith("error ")
        assert (f"node={node_id}" in line) if node_id else ("node=" not in line)
        assert (f"edge={edge_id}" in line) if edge_id else ("edge=" not in line)
        assert f"path={path}" in line
    assert "5 error(s)" in result.stdout
    # the warning is listed apart and does not count as an error
    warnings = result.stdout.split("1 warning(s):")[1]
    assert "unreachable" in warnings and "node=lonely" in warnings


def test_validate_json_prints_the_problem_list(tmp_path: Path) -> None:
    result = invoke("validate", write(tmp_path, BROKEN), "--json")
    assert result.exit_code == 2
    problems = json.loads(result.stdout)
    errors = {(p["code"], p["node_id"], p["edge_id"], p["path"]) for p in problems if p["severity"] == "error"}
    assert errors == BROKEN_ERRORS
    assert [(p["code"], p["node_id"]) for p in problems if p["severity"] == "warning"] == [("unreachable", "lonely")]
    assert all(p["message"] for p in problems)


def test_validate_warnings_do_not_fail(tmp_path: Path) -> None:
    doc = build([node("finish", "end"), node("lonely", "template", {"template": "x"})], chain_edges("start", "finish"))
    result = invoke("validate", write(tmp_path, doc))
    assert result.exit_code == 0, result.output
    assert "warning unreachable" in result.stdout and "node=lonely" in result.stdout
    assert "valid" in result.stdout
    assert json.loads(invoke("validate", write(tmp_path, doc), "--json").stdout)[0]["severity"] == "warning"


def test_validate_reports_a_file_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{ nope", encoding="utf-8")
    result = invoke("validate", path)
    assert result.exit_code == 2
    assert "invalid_document" in result.stdout and "as JSON" in result.stdout
    assert "Traceback" not in result.output


def test_validate_path_uses_json_field_names(tmp_path: Path) -> None:
    doc = build([node("finish", "end", {"outputs": [{"name": "x", "value": {"ref": "start.nope"}}]})],
                chain_edges("start", "finish"))
    problems = json.loads(invoke("validate", write(tmp_path, doc), "--json").stdout)
    assert [(p["code"], p["path"]) for p in problems] == [("unknown_output", "config.outputs[0].value")]


# ----------------------------------------------------------------------- run


def test_run_prints_progress_answer_and_outputs() -> None:
    """stdout is not a terminal here: progress goes to stderr, the answer and outputs to stdout."""
    result = invoke("run", EXAMPLES / "hello.json", "--input", "name=Ada")
    assert result.exit_code == 0, result.output
    progress, out = result.stderr, result.stdout
    assert "Hello, Ada! Welcome to Flowloom." in out
    for node_id in ("start", "reply", "finish"):
        assert f"{node_id} [" in progress and f"{node_id} [" not in out
    assert "Greeting (greet) [template] succeeded" in progress, "a node's title is shown next to its id"
    assert "succeeded" in progress and " ms" in progress
    assert out.index('"greeting": "Hello, Ada! Welcome to Flowloom."') > out.index("Hello, Ada!")


def test_run_terminal_shows_skipped_nodes() -> None:
    result = invoke("run", EXAMPLES / "grade_router.json", "-i", "score=95")
    assert result.exit_code == 0, result.output
    assert "msg_fail [template] skipped" in result.stderr
    assert "Excellent work, Student: 95/100." in result.stdout


def test_run_json_prints_one_event_per_line() -> None:
    result = invoke("run", EXAMPLES / "hello.json", "--input", "name=Ada", "--json")
    assert result.exit_code == 0, result.output
    events = parse_events(result.stdout)
    assert_event_stream(events, "run_finished")
    deltas = [e.text for e in events if e.type == "node_delta"]
    assert "".join(deltas) == "Hello, Ada! Welcome to Flowloom."
    assert events[-1].outputs == {"greeting": "Hello, Ada! Welcome to Flowloom."}


def test_run_refuses_an_empty_required_input_and_names_the_input_a_typo_meant() -> None:
    empty = invoke("run", EXAMPLES / "hello.json", "--input", "name=")
    assert empty.exit_code == 2 and "'name' is required (string), but it was given empty" in empty.stderr
    typo = invoke("run", EXAMPLES / "hello.json", "--input", "nmae=Ada")
    assert typo.exit_code == 2 and "'nmae' is not an input of workflow 'hello'; did you mean 'name'?" in typo.stderr


def test_run_inputs_file_and_input_override(tmp_path: Path) -> None:
    values = tmp_path / "in.json"
    values.write_text(json.dumps({"score": 40, "student": "Bo"}), encoding="utf-8")
    result = invoke("run", EXAMPLES / "grade_router.json", "--inputs-file", values, "-i", "score=100", "--json")
    assert result.exit_code == 0, result.output
    assert parse_events(result.stdout)[-1].outputs["message"] == "Perfect score, Bo: 100/100!"


@pytest.mark.parametrize(
    ("score", "case", "message"),
    [
        ("100", "perfect", "Perfect score, Ada: 100/100!"),
        ("93.5", "excellent", "Excellent work, Ada: 93.5/100."),
        ("50", "pass", "Ada passed with 50/100."),
        ("12", "else", "Ada did not pass (12/100); a retake is scheduled."),
        ("101", "invalid", "101 is not a valid score (expected 0 to 100)."),
        ("-1", "invalid", "-1 is not a valid score (expected 0 to 100)."),
    ],
)
def test_grade_router_takes_each_case(score: str, case: str, message: str) -> None:
    result = invoke("run", EXAMPLES / "grade_router.json", "-i", f"score={score}", "-i", "student=Ada", "--json")
    assert result.exit_code == 0, result.output
    events = parse_events(result.stdout)
    assert_event_stream(events, "run_finished")
    assert events[-1].outputs == {"case": case, "message": message, "log": [message], "graded": 1}
    assert events[-1].answer == f"{message} (case: {case})"


def test_run_failure_exits_1_naming_the_node(tmp_path: Path) -> None:
    result = invoke("run", write(tmp_path, failing_workflow()))
    assert result.exit_code == 1
    assert "run failed at node 'boom' (template_error)" in result.stderr
    assert "boom [template] failed" in result.stderr
    assert result.stdout == "", "a failed run prints no answer"
    assert "Traceback" not in result.output


def test_run_failure_json_keeps_stdout_events_only(tmp_path: Path) -> None:
    result = invoke("run", write(tmp_path, failing_workflow()), "--json")
    assert result.exit_code == 1
    events = parse_events(result.stdout)
    assert_event_stream(events, "run_failed")
    assert events[-1].reason == "template_error" and events[-1].error.node_id == "boom"
    assert "run failed at node 'boom' (template_error)" in result.stderr


def test_run_bad_input_value_exits_2_naming_the_input() -> None:
    result = invoke("run", EXAMPLES / "grade_router.json", "--input", "score=lots", "--json")
    assert result.exit_code == 2
    assert "'score'" in result.stderr and "number" in result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_run_lists_every_unknown_and_missing_input() -> None:
    result = invoke("run", EXAMPLES / "hello.json", "-i", "nmae=Ada", "-i", "age=3")
    assert result.exit_code == 2
    assert "'nmae' is not an input" in result.stderr
    assert "'age' is not an input" in result.stderr
    assert "'name' is required" in result.stderr
    assert "give inputs with --input NAME=VALUE" in " ".join(result.stderr.split()), "how to give a missing one"


def test_run_rejects_input_without_equals() -> None:
    result = invoke("run", EXAMPLES / "hello.json", "-i", "Ada")
    assert result.exit_code == 2
    assert "NAME=VALUE" in result.stderr


def test_run_invalid_workflow_exits_2_listing_every_problem(tmp_path: Path) -> None:
    result = invoke("run", write(tmp_path, BROKEN), "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    for code, node_id, edge_id, path in BROKEN_ERRORS:
        assert code in result.stderr and f"path={path}" in result.stderr
        assert node_id is None or f"node={node_id}" in result.stderr
        assert edge_id is None or f"edge={edge_id}" in result.stderr


def test_run_limit_option_overrides_the_workflow(tmp_path: Path) -> None:
    path = EXAMPLES / "hello.json"
    before = path.read_text()
    result = invoke("run", path, "-i", "name=Ada", "--max-node-executions", "2", "--json")
    assert result.exit_code == 1
    events = parse_events(result.stdout)
    assert_event_stream(events, "run_failed")
    assert events[-1].reason == "max_node_executions"
    assert "max_node_executions" in result.stderr
    assert path.read_text() == before


def test_run_invalid_limit_override_is_a_problem() -> None:
    result = invoke("run", EXAMPLES / "hello.json", "-i", "name=Ada", "--max-wall-time", "0")
    assert result.exit_code == 2
    assert "path=limits.max_wall_time" in result.stderr


def test_run_max_wall_time_override_stops_a_slow_node(tmp_path: Path, stub_url: str, allow_loopback: None) -> None:
    result = invoke("run", write(tmp_path, slow_workflow(10)), "-i", f"base_url={stub_url}",
                    "--max-wall-time", "0.5", "--json")
    assert result.exit_code == 1, result.output
    events = parse_events(result.stdout)
    assert_event_stream(events, "run_failed")
    assert events[-1].reason == "max_wall_time"
    assert "run failed" in result.stderr and "max_wall_time" in result.stderr
    wait = [e for e in events if e.type == "node_finished" and e.node_id == "wait"]
    assert [e.status for e in wait] == ["failed"]  # cut by the wall time: failed, not cancelled


def test_run_max_wall_time_failure_names_the_running_node(tmp_path: Path, stub_url: str,
                                                          allow_loopback: None) -> None:
    result = invoke("run", write(tmp_path, slow_workflow(10)), "-i", f"base_url={stub_url}",
                    "--max-wall-time", "0.5", "--json")
    assert parse_events(result.stdout)[-1].error.node_id == "wait"
    assert "run failed at node 'wait' (max_wall_time)" in result.stderr


# -------------------------------------------------------------------- schema


def _consts(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        if "const" in value:
            yield value["const"]
        for item in value.values():
            yield from _consts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _consts(item)


def test_schema_prints_the_workflow_json_schema() -> None:
    result = invoke("schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert {"nodes", "edges", "inputs", "variables", "limits"} <= set(schema["properties"])
    assert set(builtin_catalog()) <= set(_consts(schema))


# ------------------------------------------------------- examples, end to end


def test_console_script_runs_hello() -> None:
    proc = subprocess.run([FLOWLOOM, "run", str(EXAMPLES / "hello.json"), "--input", "name=Grace", "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    events = parse_events(proc.stdout)
    assert_event_stream(events, "run_finished")
    assert events[-1].answer == "Hello, Grace! Welcome to Flowloom."


def test_weather_example_runs_through_its_script() -> None:
    proc = subprocess.run(["bash", str(EXAMPLES / "run_weather.sh")], capture_output=True, text=True, timeout=60,
                          env=subprocess_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Weather in Paris: 18 C, partly cloudy, humidity 62%." in proc.stdout
    assert re.search(r"fetch\)? \[http_request\] succeeded", proc.stderr), proc.stderr


def test_weather_example_script_passes_options() -> None:
    proc = subprocess.run(["bash", str(EXAMPLES / "run_weather.sh"), "Atlantis", "--json"], capture_output=True,
                          text=True, timeout=60, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr
    events = parse_events(proc.stdout)
    assert_event_stream(events, "run_finished")
    assert events[-1].outputs == {"message": "No weather data for Atlantis (HTTP 404).", "outcome": "missing"}


@pytest.mark.parametrize(
    ("city", "outcome", "message"),
    [
        ("tokyo", "found", "Weather in Tokyo: 23 C, sunny, humidity 55%."),
        ("Atlantis", "missing", "No weather data for Atlantis (HTTP 404)."),
        (" ", "else", "The weather service answered HTTP 400: "),  # blank: the stub's 400 ("" is refused)
    ],
)
def test_weather_example_branches_on_status(stub_url: str, allow_loopback: None, city: str, outcome: str,
                                            message: str) -> None:
    result = invoke("run", EXAMPLES / "weather_lookup.json", "-i", f"city={city}", "-i", f"base_url={stub_url}",
                    "--json")
    assert result.exit_code == 0, result.output
    outputs = parse_events(result.stdout)[-1].outputs
    assert outputs["outcome"] == outcome
    assert outputs["message"].startswith(message)


def test_weather_example_takes_the_error_branch_when_unreachable(allow_loopback: None) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = invoke("run", EXAMPLES / "weather_lookup.json", "-i", "city=Paris", "-i",
                    f"base_url=http://127.0.0.1:{port}", "--json")
    assert result.exit_code == 0, result.output
    events = parse_events(result.stdout)
    fetch = [e for e in events if e.type == "node_finished" and e.node_id == "fetch"][-1]
    assert fetch.status == "failed" and fetch.handles == ["error"]
    assert events[-1].outputs["outcome"] == "unreachable"
    assert events[-1].outputs["message"].startswith("Could not reach the weather service: ")


def test_weather_example_refuses_loopback_without_allow(stub_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOWLOOM_HTTP_ALLOW", raising=False)
    get_settings.cache_clear()
    result = invoke("run", EXAMPLES / "weather_lookup.json", "-i", "city=Paris", "-i", f"base_url={stub_url}",
                    "--json")
    get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    events = parse_events(result.stdout)
    fetch = [e for e in events if e.type == "node_finished" and e.node_id == "fetch"][-1]
    assert fetch.error.reason == "blocked_address"
    assert events[-1].outputs["outcome"] == "unreachable"


# ------------------------------------------------------------------ Ctrl-C


def test_a_reader_gone_from_the_json_pipe_leaves_the_runs_own_exit_code(tmp_path: Path) -> None:
    """``flowloom run --json | head -1``: the reader closes the pipe early; the run still ends
    ``succeeded`` and says so with exit code 0 (1 would read as a failed run)."""
    read, write_end = os.pipe()
    os.close(read)  # a reader that is already gone: every write meets a broken pipe
    try:
        proc = subprocess.run([FLOWLOOM, "run", str(ROOT / "examples" / "hello.json"), "--json", "-i", "name=Ada"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60, env=subprocess_env())
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_sigint_cancels_the_run_and_exits_130(tmp_path: Path, stub_url: str) -> None:
    path = write(tmp_path, slow_workflow(60))
    # its own process group, signalled as a whole: what Ctrl-C on a terminal does
    proc = subprocess.Popen([FLOWLOOM, "run", str(path), "--json", "-i", f"base_url={stub_url}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(),
                            start_new_session=True)
    lines: list[str] = []
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            event = json.loads(line)
            if event["type"] == "node_started" and event["node_id"] == "wait":
                break
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    events = parse_events("".join(lines) + out)
    assert proc.returncode == 130, err
    assert_event_stream(events, "run_cancelled")
    wait = [e for e in events if e.type == "node_finished" and e.node_id == "wait"]
    assert [e.status for e in wait] == ["cancelled"]
    assert "Traceback" not in err
    assert "run cancelled" in err


def test_schema_descriptions_carry_no_design_document_citations() -> None:
    result = invoke("schema")
    assert result.exit_code == 0
    assert not re.search(r"seed 0|seeds? [0-9]{3}|[Ii]ssue [0-9]|§", result.stdout)
    strategy = json.loads(result.stdout)["$defs"]["ErrorStrategy"]["description"]
    assert strategy.startswith("What a node failure does (after its retries), like Dify's")


def test_message_fills_a_declared_query_input(tmp_path: Path) -> None:
    doc = build([node("say", "answer", {"text": "you said {{ inputs.query }} / {{ sys.query }}"})],
                [edge("start", "say")], inputs=[{"name": "query", "type": "string", "required": True}])
    result = invoke("run", str(write(tmp_path, doc)), "--message", "hello there")
    assert result.exit_code == 0, result.output
    assert "you said hello there / hello there" in result.stdout


def test_a_chat_flow_run_without_a_message_is_warned_that_its_message_is_empty(tmp_path: Path) -> None:
    chat = write(tmp_path, build([node("say", "answer", {"text": "you said {{ sys.query }}!"})], [edge("start", "say")]))
    result = invoke("run", str(chat))
    assert result.exit_code == 0, result.output
    assert "reads the user's message (sys.query) and none was given" in result.stderr and "--message" in result.stderr
    assert "you said !" in result.stdout
    given = invoke("run", str(chat), "--message", "hi")
    assert given.exit_code == 0 and "none was given" not in given.stderr
    plain = write(tmp_path, build([node("say", "answer", {"text": "hello"})], [edge("start", "say")]), "plain.json")
    assert "none was given" not in invoke("run", str(plain)).stderr


def test_internal_error_details_go_to_the_home_log_not_the_terminal(tmp_path, capfd):
    import logging

    from api.cli.running import log_to_home

    logger = logging.getLogger("flowloom")
    before = list(logger.handlers)
    try:
        path = log_to_home(tmp_path)
        assert log_to_home(tmp_path) == path and len(logger.handlers) == len(before) + 1, "installed once"
        try:
            raise KeyError("b")
        except KeyError:
            logging.getLogger("flowloom.engine").exception("run r1: internal error after node 'b'")
        for handler in logger.handlers:
            handler.flush()
        text = path.read_text(encoding="utf-8")
        assert "internal error after node 'b'" in text and "Traceback" in text and "KeyError: 'b'" in text
        assert path.stat().st_mode & 0o777 == 0o600, "private like the run store beside it"
        captured = capfd.readouterr()
        assert "Traceback" not in captured.err and "internal error" not in captured.err
    finally:
        for handler in logger.handlers[len(before):]:
            logger.removeHandler(handler)
            handler.close()
