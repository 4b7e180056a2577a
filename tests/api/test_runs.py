"""Runs through the API on SQLite and PostgreSQL: blocking and async starts, invalid
workflows and inputs, resuming a paused run, stopping a running one within a second,
and credentials (an HTTP header of a workflow, the API key) absent from every response
and event."""

from __future__ import annotations

import asyncio
import time

from .conftest import SECRET_HEADER_VALUE, hello_workflow, http_chain, order_workflow, parse_sse


async def _wait_status(api, run_id: str, wanted: set[str], timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        run = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()
        if run["status"] in wanted or time.monotonic() > deadline:
            return run
        await asyncio.sleep(0.05)


async def test_a_blocking_run_answers_with_the_finished_run_and_its_node_runs(api):
    response = await api.client.post("/v1/runs", json={"workflow": hello_workflow(), "inputs": {"name": "Ada"}},
                                     headers=api.auth())
    assert response.status_code == 200, response.text
    run = response.json()
    assert run["status"] == "succeeded" and run["outputs"] == {"greeting": "Hello, Ada! Welcome to Flowloom."}
    assert run["answer"] == "Hello, Ada! Welcome to Flowloom." and run["inputs"] == {"name": "Ada"}
    assert [n["node_id"] for n in run["node_runs"]] == ["start", "greet", "reply", "finish"]
    assert all("pending" not in n for n in run["node_runs"]) and "owner" not in run
    again = (await api.client.get(f"/v1/runs/{run['run_id']}", headers=api.auth())).json()
    assert again == run
    listed = (await api.client.get("/v1/runs", params={"status": "succeeded", "workflow_id": "hello"},
                                   headers=api.auth())).json()["runs"]
    assert [r["run_id"] for r in listed] == [run["run_id"]]
    assert (await api.client.get("/v1/runs", params={"status": "failed"}, headers=api.auth())).json()["runs"] == []


async def test_an_async_run_answers_202_at_once_and_its_events_replay_to_the_end(api, target):
    response = await api.client.post("/v1/runs", json={"workflow": http_chain(target.url, 2), "response_mode": "async"},
                                     headers=api.auth())
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["status"] == "running" and accepted["events_url"] == f"/v1/runs/{accepted['run_id']}/events"
    events = await api.client.get(accepted["events_url"], headers=api.auth())
    assert events.status_code == 200 and events.headers["content-type"].startswith("text/event-stream")
    messages = [m for m in parse_sse(events.text) if "comment" not in m]
    assert messages[-1] == {"event": "done", "id": None, "data": {"run_id": accepted["run_id"], "status": "succeeded"}}
    ids = [m["id"] for m in messages[:-1]]
    assert ids == sorted(set(ids)) and ids[0] == 1 and messages[-2]["event"] == "run_finished"
    assert all(m["event"] == m["data"]["type"] for m in messages[:-1])
    durable = [m["id"] for m in messages[:-1] if m["event"] != "node_delta"]  # text deltas are live only
    later = parse_sse((await api.client.get(accepted["events_url"], params={"after": ids[2]},
                                            headers=api.auth())).text)
    assert [m["id"] for m in later if m.get("id")] == [i for i in durable if i > ids[2]]
    by_header = parse_sse((await api.client.get(accepted["events_url"], headers={**api.auth(),
                                                                                 "Last-Event-ID": str(ids[2])})).text)
    assert [m["id"] for m in by_header if m.get("id")] == [i for i in durable if i > ids[2]]


async def test_an_invalid_workflow_inputs_or_request_is_422_with_every_problem(api):
    broken = {"id": "broken", "nodes": [{"id": "start", "type": "start"},
                                        {"id": "t", "type": "template", "config": {"template": "{{ nope.x }}"}},
                                        {"id": "t2", "type": "no_such_kind"}],
              "edges": [{"id": "e", "source": "start", "target": "t"}]}
    for mode in ("blocking", "streaming", "async"):
        response = await api.client.post("/v1/runs", json={"workflow": broken, "response_mode": mode},
                                         headers=api.auth())
        assert response.status_code == 422, response.text
        body = response.json()["error"]
        assert body["type"] == "invalid_workflow" and len(body["problems"]) >= 2
        assert {"code", "message", "node_id"} <= set(body["problems"][0])
        assert "Traceback" not in response.text
    missing = await api.client.post("/v1/runs", json={"workflow": hello_workflow(), "inputs": {}}, headers=api.auth())
    assert missing.status_code == 422 and missing.json()["error"]["type"] == "invalid_inputs"
    assert "name" in missing.json()["error"]["problems"][0]
    empty = await api.client.post("/v1/runs", json={"workflow": hello_workflow(), "inputs": {"name": ""}},
                                  headers=api.auth())  # as `flowloom run --input name=`: refused as missing
    assert empty.status_code == 422 and empty.json()["error"]["problems"] == [
        "'name' is required (string), but it was given empty"]
    bad = await api.client.post("/v1/runs", json={"workflow": hello_workflow(), "response_mode": "later"},
                                headers=api.auth())
    assert bad.status_code == 422 and bad.json()["error"]["type"] == "invalid_request"
    assert "later" not in bad.text  # request values are not echoed
    assert (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"] == []
    unknown = await api.client.get("/v1/runs/nope", headers=api.auth())
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found"


async def test_a_paused_run_is_resumed_through_the_api_until_it_succeeds(api):
    paused = (await api.client.post("/v1/runs", json={"workflow": order_workflow(), "inputs": {"item": "tea"}},
                                    headers=api.auth())).json()
    assert paused["status"] == "paused" and len(paused["pending_interrupts"]) == 1
    run_id = paused["run_id"]
    wrong = await api.client.post(f"/v1/runs/{run_id}/resume", json={"answer": "x", "interrupt_id": "nope"},
                                  headers=api.auth())
    assert wrong.status_code == 409 and wrong.json()["error"]["type"] == "conflict"
    both = await api.client.post(f"/v1/runs/{run_id}/resume", json={"answer": "x", "answers": {"a": 1}},
                                 headers=api.auth())
    assert both.status_code == 422
    accepted = await api.client.post(f"/v1/runs/{run_id}/resume", json={"answer": "change"}, headers=api.auth())
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["chat_id"] is None, "a run started without a chat is in none"
    form = await _wait_status(api, run_id, {"paused", "succeeded", "failed"})
    assert form["status"] == "paused" and form["pending_interrupts"][0]["node_id"] == "details"
    interrupt = form["pending_interrupts"][0]["id"]
    accepted = await api.client.post(f"/v1/runs/{run_id}/resume", json={"answers": {interrupt: {"quantity": 3}}},
                                      headers=api.auth())
    assert accepted.status_code == 202, accepted.text
    done = await _wait_status(api, run_id, {"succeeded", "failed"})
    assert done["status"] == "succeeded" and done["outputs"] == {"choice": "change", "quantity": 3}
    assert done["answer"] == "Order placed: 3 x tea."
    again = await api.client.post(f"/v1/runs/{run_id}/resume", json={"answer": "confirm"}, headers=api.auth())
    assert again.status_code == 409 and "succeeded" in again.json()["error"]["message"]
    stop_ended = await api.client.post(f"/v1/runs/{run_id}/stop", headers=api.auth())
    assert stop_ended.status_code == 409


async def test_stop_ends_a_running_run_cancelled_within_a_second(api, target):
    response = await api.client.post("/v1/runs", json={"workflow": http_chain(target.url, 1, path="/slow"),
                                                       "response_mode": "async"}, headers=api.auth())
    run_id = response.json()["run_id"]
    assert await asyncio.to_thread(target.server.slow_started.wait, 10)
    started = time.monotonic()
    stopped = await api.client.post(f"/v1/runs/{run_id}/stop", headers=api.auth())
    elapsed = time.monotonic() - started
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["status"] == "cancelled" and elapsed < 1.0, (stopped.json()["status"], elapsed)
    run = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()
    assert {n["node_id"]: n["status"] for n in run["node_runs"]}["h0"] == "cancelled"
    events = parse_sse((await api.client.get(f"/v1/runs/{run_id}/events", headers=api.auth())).text)
    assert [m["event"] for m in events if "event" in m][-2:] == ["run_cancelled", "done"]


async def test_a_paused_run_is_stopped_at_once(api):
    paused = (await api.client.post("/v1/runs", json={"workflow": order_workflow(), "inputs": {"item": "tea"}},
                                    headers=api.auth())).json()
    stopped = await api.client.post(f"/v1/runs/{paused['run_id']}/stop", headers=api.auth())
    assert stopped.status_code == 200 and stopped.json()["status"] == "cancelled"


async def test_credentials_never_appear_in_responses_or_events(api, target):
    doc = http_chain(target.url, 1, path="/ok", headers={"X-Api-Token": SECRET_HEADER_VALUE})
    texts = []
    for mode in ("blocking", "streaming", "async"):
        response = await api.client.post("/v1/runs", json={"workflow": doc, "response_mode": mode}, headers=api.auth())
        assert response.status_code in (200, 202), response.text
        texts.append(response.text)
    runs = (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"]
    assert len(runs) == 3
    for run in runs:
        final = await _wait_status(api, run["run_id"], {"succeeded", "failed"})
        assert final["status"] == "succeeded", final
        texts.append((await api.client.get(f"/v1/runs/{run['run_id']}", headers=api.auth())).text)
        texts.append((await api.client.get(f"/v1/runs/{run['run_id']}/events", headers=api.auth())).text)
    texts.append((await api.client.get("/v1/runs", headers=api.auth())).text)
    texts.append((await api.client.get("/v1/keys", headers=api.auth())).text)
    joined = "\n".join(texts)
    assert "x-api-token" in joined.lower()  # the header's name is recorded, its value never
    assert SECRET_HEADER_VALUE not in joined
    assert api.key not in joined and api.key.split("_", 2)[2] not in joined
