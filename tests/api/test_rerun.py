"""``POST /v1/runs/{id}/rerun`` and ``flowloom rerun``: a new run from one node of a past
run, on SQLite and PostgreSQL. A local HTTP server counts the requests each node makes,
which proves the nodes before the chosen one are not executed again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.http_reply import reply_json

from .conftest import parse_sse

ROOT = Path(__file__).resolve().parents[2]


class _Counting(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hits: Counter[str] = Counter()
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        server: _Counting = self.server  # type: ignore[assignment]
        server.hits[self.path] += 1
        if self.path.startswith("/slow"):
            server.release.wait(20)
        body = json.dumps({"path": self.path, "n": server.hits[self.path]}).encode()
        reply_json(self, body)


@pytest.fixture
def counter() -> Iterator[_Counting]:
    server = _Counting()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def chain(url: str, second: str = "/two", text: str = "v1") -> dict[str, Any]:
    """start -> fetch /one -> fetch ``second`` -> answer -> end, with a required input."""
    return {"id": "rerun_chain", "name": "Rerun chain",
            "inputs": [{"name": "who", "type": "string", "required": True}],
            "nodes": [{"id": "start", "type": "start"},
                      {"id": "one", "type": "http_request", "config": {"url": url + "/one", "timeout": 30}},
                      {"id": "two", "type": "http_request", "config": {"url": url + second, "timeout": 30}},
                      {"id": "say", "type": "answer",
                       "config": {"text": text + " {{ inputs.who }} {{ one.status_code }} {{ two.body }}"}},
                      {"id": "end", "type": "end",
                       "config": {"outputs": [{"name": "second", "value": {"ref": "two.body"}}]}}],
            "edges": [{"id": "e1", "source": "start", "target": "one"},
                      {"id": "e2", "source": "one", "target": "two"},
                      {"id": "e3", "source": "two", "target": "say"},
                      {"id": "e4", "source": "say", "target": "end"}]}


async def _first_run(api: Any, doc: dict[str, Any]) -> dict[str, Any]:
    created = await api.client.post("/v1/workflows", json=doc, headers=api.auth())
    assert created.status_code == 201, created.text
    response = await api.client.post("/v1/workflows/rerun_chain/runs?draft=true", json={"inputs": {"who": "Ada"}},
                                     headers=api.auth())
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "succeeded", response.json()
    return response.json()


async def _save_draft(api: Any, doc: dict[str, Any]) -> None:
    current = (await api.client.get("/v1/workflows/rerun_chain", headers=api.auth())).json()
    saved = await api.client.put("/v1/workflows/rerun_chain", json={"workflow": doc,
                                                                      "draft_version": current["draft_version"]},
                                 headers=api.auth())
    assert saved.status_code == 200, saved.text


async def test_rerun_from_a_node_reuses_upstream_and_runs_the_new_draft(api, counter):
    old = await _first_run(api, chain(counter.url))
    assert counter.hits == {"/one": 1, "/two": 1}
    await _save_draft(api, chain(counter.url, second="/two?v=2", text="v2"))

    response = await api.client.post(f"/v1/runs/{old['run_id']}/rerun", json={"node_id": "two"}, headers=api.auth())

    assert response.status_code == 200, response.text
    new = response.json()
    assert new["status"] == "succeeded" and new["run_id"] != old["run_id"]
    assert counter.hits == {"/one": 1, "/two": 1, "/two?v=2": 1}  # the first request was not made again
    assert new["inputs"] == {"who": "Ada"} and new["workflow_version"] == "draft"
    assert (new["rerun_of"], new["rerun_from"]) == (old["run_id"], "two") and old["rerun_of"] is None
    assert new["answer"].startswith("v2 Ada 200 ") and '"/two?v=2"' in new["answer"]
    runs = {r["node_id"]: r for r in new["node_runs"]}
    old_runs = {r["node_id"]: r for r in old["node_runs"]}
    assert runs["start"]["reused_from"] == old_runs["start"]["id"]
    assert runs["one"]["reused_from"] == old_runs["one"]["id"]
    assert runs["one"]["outputs"] == old_runs["one"]["outputs"] and runs["one"]["attempts"] == 0
    assert runs["one"]["data"]["reused_from"]["run_id"] == old["run_id"]
    assert runs["one"]["id"].startswith(new["run_id"])
    assert all(runs[n]["reused_from"] is None and runs[n]["attempts"] == 1 for n in ("two", "say", "end"))
    assert runs["one"]["duration_s"] == 0 and runs["two"]["duration_s"] is not None
    assert json.loads(new["outputs"]["second"])["path"] == "/two?v=2"

    again = (await api.client.get(f"/v1/runs/{old['run_id']}", headers=api.auth())).json()
    assert again == old  # the past run is untouched


async def test_rerun_streaming_shows_reused_nodes_finished_and_starts_only_the_rest(api, counter):
    old = await _first_run(api, chain(counter.url))
    response = await api.client.post(f"/v1/runs/{old['run_id']}/rerun",
                                     json={"node_id": "say", "response_mode": "streaming"}, headers=api.auth())
    assert response.status_code == 200, response.text
    messages = [m for m in parse_sse(response.text) if "comment" not in m]
    kinds = [(m["event"], (m["data"] or {}).get("node_id")) for m in messages]
    assert kinds[0][0] == "meta" and kinds[1][0] == "run_started"
    assert ("node_finished", "one") in kinds and ("node_finished", "two") in kinds
    started = [node for event, node in kinds if event == "node_started"]
    assert started == ["say", "end"]
    assert messages[-1]["event"] == "done" and messages[-1]["data"]["status"] == "succeeded"
    assert counter.hits == {"/one": 1, "/two": 1}
    stored = await api.client.get(f"/v1/runs/{messages[0]['data']['run_id']}/events", headers=api.auth())
    assert [m["event"] for m in parse_sse(stored.text)][:4] == ["run_started", "node_finished", "node_finished",
                                                                "node_finished"]


async def test_rerun_async_answers_202_and_the_run_finishes(api, counter):
    old = await _first_run(api, chain(counter.url))
    response = await api.client.post(f"/v1/runs/{old['run_id']}/rerun",
                                     json={"node_id": "one", "response_mode": "async"}, headers=api.auth())
    assert response.status_code == 202, response.text
    events = await api.client.get(response.json()["events_url"], headers=api.auth())
    assert parse_sse(events.text)[-1]["data"]["status"] == "succeeded"
    assert counter.hits == {"/one": 2, "/two": 2}
    whole = await api.client.post(f"/v1/runs/{old['run_id']}/rerun", json={"node_id": "start"}, headers=api.auth())
    assert whole.json()["status"] == "succeeded" and counter.hits == {"/one": 3, "/two": 3}
    assert all(r["reused_from"] is None for r in whole.json()["node_runs"])


async def test_rerun_of_an_unknown_node_names_it(api, counter):
    old = await _first_run(api, chain(counter.url))
    response = await api.client.post(f"/v1/runs/{old['run_id']}/rerun", json={"node_id": "nope"}, headers=api.auth())
    assert response.status_code == 422
    assert "'nope'" in response.json()["error"]["message"] and "one" in response.json()["error"]["message"]


async def test_rerun_from_a_node_the_past_run_never_reached_is_refused(api, counter):
    old = await _first_run(api, chain(counter.url))
    doc = chain(counter.url)
    doc["nodes"].insert(3, {"id": "extra", "type": "template", "config": {"template": "x"}})
    doc["edges"][2] = {"id": "e3", "source": "two", "target": "extra"}
    doc["edges"].append({"id": "e5", "source": "extra", "target": "say"})
    await _save_draft(api, doc)
    response = await api.client.post(f"/v1/runs/{old['run_id']}/rerun", json={"node_id": "extra"},
                                     headers=api.auth())
    assert response.status_code == 422
    assert "'extra' did not run" in response.json()["error"]["message"]
    counts = dict(counter.hits)
    response = await api.client.post(f"/v1/runs/{old['run_id']}/rerun", json={"node_id": "say"}, headers=api.auth())
    assert response.status_code == 200 and response.json()["status"] == "succeeded"
    runs = {r["node_id"]: r for r in response.json()["node_runs"]}
    assert runs["extra"]["reused_from"] is None and runs["extra"]["status"] == "succeeded"  # new upstream node ran
    assert dict(counter.hits) == counts


async def test_rerun_of_a_run_still_executing_is_a_conflict(api, counter):
    response = await api.client.post("/v1/runs", json={"workflow": chain(counter.url, second="/slow"),
                                                       "inputs": {"who": "Ada"}, "response_mode": "async"},
                                     headers=api.auth())
    run_id = response.json()["run_id"]
    for _ in range(200):
        if counter.hits["/slow"]:
            break
        await __import__("asyncio").sleep(0.05)
    refused = await api.client.post(f"/v1/runs/{run_id}/rerun", json={"node_id": "two"}, headers=api.auth())
    assert refused.status_code == 409
    assert "still running" in refused.json()["error"]["message"]
    counter.release.set()


async def test_rerun_of_another_tenants_run_is_not_found(api, counter):
    old = await _first_run(api, chain(counter.url))
    response = await api.client.post(f"/v1/runs/{old['run_id']}/rerun", json={"node_id": "two"},
                                     headers=api.auth(api.other_key))
    assert response.status_code == 404
    assert counter.hits == {"/one": 1, "/two": 1}


async def test_rerun_of_an_unsaved_document_runs_its_own_document(api, counter):
    response = await api.client.post("/v1/runs", json={"workflow": chain(counter.url), "inputs": {"who": "Bo"}},
                                     headers=api.auth())
    old = response.json()
    rerun = await api.client.post(f"/v1/runs/{old['run_id']}/rerun", json={"node_id": "two"}, headers=api.auth())
    assert rerun.status_code == 200, rerun.text
    assert rerun.json()["answer"].startswith("v1 Bo 200") and rerun.json()["workflow_hash"] == old["workflow_hash"]
    assert counter.hits == {"/one": 1, "/two": 2}


def test_cli_rerun_reuses_upstream_and_runs_the_given_file(tmp_path, counter):
    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "home"), "FLOWLOOM_HTTP_ALLOW": "127.0.0.1"}
    first_file, second_file = tmp_path / "v1.json", tmp_path / "v2.json"
    first_file.write_text(json.dumps(chain(counter.url)))
    second_file.write_text(json.dumps(chain(counter.url, second="/two?v=2", text="v2")))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "api.cli", *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=60)

    first = cli("run", str(first_file), "--input", "who=Ada", "--json")
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout.splitlines()[0])["run_id"]
    rerun = cli("rerun", run_id, "--from", "two", "--workflow", str(second_file))
    assert rerun.returncode == 0, rerun.stderr
    assert "v2 Ada 200" in rerun.stdout and "reused" in rerun.stderr and "Traceback" not in rerun.stderr
    assert counter.hits == {"/one": 1, "/two": 1, "/two?v=2": 1}
    unknown = cli("rerun", run_id, "--from", "nope")
    assert unknown.returncode == 2 and "'nope'" in unknown.stderr and "Traceback" not in unknown.stderr
    missing = cli("rerun", "no-such-run", "--from", "two")
    assert missing.returncode == 2 and "no such run" in missing.stderr


async def test_rerun_after_a_branch_keeps_the_branch_decided_and_the_answer_sent(api):
    doc = json.loads((ROOT / "examples" / "grade_router.json").read_text())
    response = await api.client.post("/v1/runs", json={"workflow": doc, "inputs": {"score": 72.5, "student": "Ada"}},
                                     headers=api.auth())
    old = response.json()
    assert old["status"] == "succeeded", old
    for node_id, executed in (("reply", {"reply", "finish"}), ("finish", {"finish"})):
        rerun = await api.client.post(f"/v1/runs/{old['run_id']}/rerun", json={"node_id": node_id},
                                      headers=api.auth())
        assert rerun.status_code == 200, rerun.text
        new = rerun.json()
        assert new["status"] == "succeeded", new
        assert new["answer"] == old["answer"] and new["outputs"] == old["outputs"]
        runs = {r["node_id"]: r for r in new["node_runs"]}
        assert {n for n, r in runs.items() if r["reused_from"] is None} == executed
        assert runs["msg_fail"]["status"] == "skipped" and runs["msg_pass"]["status"] == "succeeded"
    rerun = await api.client.post(f"/v1/runs/{old['run_id']}/rerun", json={"node_id": "join"}, headers=api.auth())
    runs = {r["node_id"]: r for r in rerun.json()["node_runs"]}
    assert {n for n, r in runs.items() if r["reused_from"] is None} == {"join", "record", "reply", "finish"}
    assert {n for n, r in runs.items() if r["status"] == "skipped"} == {"msg_invalid", "msg_perfect", "msg_excellent",
                                                                         "msg_fail"}
    assert rerun.json()["answer"] == old["answer"]


async def test_rerun_is_admitted_under_the_run_quota(api, counter):
    old = await _first_run(api, chain(counter.url))
    limited = await api.client.put("/v1/quotas", json={"runs_per_minute": 1}, headers=api.auth())
    assert limited.status_code == 200, limited.text
    response = await api.client.post(f"/v1/runs/{old['run_id']}/rerun", json={"node_id": "two"}, headers=api.auth())
    assert response.status_code == 429 and "Retry-After" in response.headers
    assert counter.hits == {"/one": 1, "/two": 1}
    assert len((await api.client.get("/v1/runs", headers=api.auth())).json()["runs"]) == 1


async def test_rerun_from_a_node_inside_a_loop_body_names_the_loop(api):
    doc = json.loads((ROOT / "examples" / "word_stats.json").read_text())
    response = await api.client.post("/v1/runs", json={"workflow": doc, "inputs": {"sentences": ["One two."]}},
                                     headers=api.auth())
    assert response.status_code == 200, response.text
    refused = await api.client.post(f"/v1/runs/{response.json()['run_id']}/rerun", json={"node_id": "stats"},
                                    headers=api.auth())
    assert refused.status_code == 422
    assert refused.json()["error"]["message"].startswith("node 'stats' is inside 'each'")


async def test_rerun_with_a_key_scoped_to_an_app_is_forbidden(api, counter):
    old = await _first_run(api, chain(counter.url))
    _record, app_key = await api.keys.create_key("default", name="app", app_id="rerun_chain")
    response = await api.client.post(f"/v1/runs/{old['run_id']}/rerun", json={"node_id": "two"},
                                     headers=api.auth(app_key))
    assert response.status_code == 403 and "whole tenant" in response.json()["error"]["message"]
    assert counter.hits == {"/one": 1, "/two": 1}


def weather_router(url: str) -> dict[str, Any]:
    """start -> route: no city greets, else GET ``url`` -> the weather answer (the run the
    builder re-ran from its failed HTTP node)."""
    return {"id": "weather_router", "name": "Weather router",
            "inputs": [{"name": "city", "type": "string", "default": ""}],
            "nodes": [{"id": "start", "type": "start"},
                      {"id": "route", "type": "if_else", "config": {"cases": [{"id": "greet", "conditions": [
                          {"left": {"ref": "inputs.city"}, "operator": "equals", "right": ""}]}]}},
                      {"id": "hello", "type": "answer", "config": {"text": "Hello! How can I help you today?"}},
                      {"id": "fetch", "type": "http_request", "config": {"url": url, "timeout": 10}},
                      {"id": "say", "type": "answer", "config": {"text": "Weather in the city: {{ fetch.body }}"}}],
            "edges": [{"id": "e1", "source": "start", "target": "route"},
                      {"id": "e2", "source": "route", "sourceHandle": "greet", "target": "hello"},
                      {"id": "e3", "source": "route", "sourceHandle": "else", "target": "fetch"},
                      {"id": "e4", "source": "fetch", "target": "say"}]}


#: a local port nothing listens on: the HTTP node fails (connection refused)
CLOSED = "http://127.0.0.1:9/weather"


async def test_rerun_from_a_failed_node_after_a_router_never_says_the_skipped_branch(api, counter):
    created = await api.client.post("/v1/workflows", json=weather_router(CLOSED), headers=api.auth())
    assert created.status_code == 201, created.text
    failed = (await api.client.post("/v1/workflows/weather_router/runs?draft=true", json={"inputs": {"city": "Oslo"}},
                                    headers=api.auth())).json()
    assert failed["status"] == "failed" and failed["error"]["node_id"] == "fetch", failed
    current = (await api.client.get("/v1/workflows/weather_router", headers=api.auth())).json()
    saved = await api.client.put("/v1/workflows/weather_router", headers=api.auth(),
                                 json={"workflow": weather_router(counter.url + "/weather"),
                                       "draft_version": current["draft_version"]})
    assert saved.status_code == 200, saved.text

    response = await api.client.post(f"/v1/runs/{failed['run_id']}/rerun",
                                     json={"node_id": "fetch", "response_mode": "streaming"}, headers=api.auth())

    assert response.status_code == 200, response.text
    messages = [m for m in parse_sse(response.text) if "comment" not in m]
    deltas = [m["data"] for m in messages if m["event"] == "node_delta" and m["data"]["channel"] == "answer"]
    assert deltas and all(d["node_id"] != "hello" for d in deltas), deltas
    run = (await api.client.get(f"/v1/runs/{messages[0]['data']['run_id']}", headers=api.auth())).json()
    assert run["status"] == "succeeded", run
    assert run["answer"].startswith("Weather in the city: ") and "Hello" not in run["answer"]
    assert run["answer"] == "".join(d["text"] for d in deltas)
    assert '"/weather"' in run["answer"] and counter.hits == {"/weather": 1}


def test_cli_rerun_from_a_failed_node_after_a_router_never_says_the_skipped_branch(tmp_path, counter):
    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "home"), "FLOWLOOM_HTTP_ALLOW": "127.0.0.1"}
    broken, fixed = tmp_path / "broken.json", tmp_path / "fixed.json"
    broken.write_text(json.dumps(weather_router(CLOSED)))
    fixed.write_text(json.dumps(weather_router(counter.url + "/weather")))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "api.cli", *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=60)

    first = cli("run", str(broken), "--input", "city=Oslo", "--json")
    assert first.returncode == 1, first.stderr
    run_id = json.loads(first.stdout.splitlines()[0])["run_id"]
    rerun = cli("rerun", run_id, "--from", "fetch", "--workflow", str(fixed), "--json")
    assert rerun.returncode == 0, rerun.stderr
    result = json.loads(rerun.stdout.splitlines()[-1])
    assert result["answer"].startswith("Weather in the city: ") and "Hello" not in result["answer"], result["answer"]
    assert counter.hits == {"/weather": 1}
