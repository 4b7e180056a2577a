"""Size limits over real HTTP (uvicorn) on SQLite and PostgreSQL: a 50 MB body is refused
with 413 unread (declared or chunked), a workflow over the node cap and a megabyte-long
node name get 422 naming the path, and after each the server answers the next request."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from itertools import pairwise
from typing import Any

import httpx

from .conftest import hello_workflow

MB = 1024 * 1024


def _chain(count: int, *, name: str | None = None) -> dict[str, Any]:
    """start -> ``count - 2`` templates -> answer (``name``: the first template's name)."""
    nodes: list[dict[str, Any]] = [{"id": "start", "type": "start"}]
    nodes += [{"id": f"t{i}", "type": "template", "config": {"template": "x"}} for i in range(count - 2)]
    nodes.append({"id": "say", "type": "answer", "config": {"text": "done"}})
    if name is not None:
        nodes[1]["name"] = name
    ids = [n["id"] for n in nodes]
    edges = [{"id": f"e{i}", "source": a, "target": b} for i, (a, b) in enumerate(pairwise(ids))]
    return {"id": "big", "name": "Big", "nodes": nodes, "edges": edges}


async def _still_serving(api, http: httpx.AsyncClient) -> None:
    assert (await http.get("/health")).status_code == 200
    ran = await http.post("/v1/runs", json={"workflow": hello_workflow(), "inputs": {"name": "Ada"}},
                          headers=api.auth())
    assert ran.status_code == 200 and ran.json()["answer"] == "Hello, Ada! Welcome to Flowloom.", ran.text


async def test_a_declared_50_mb_body_is_answered_413_before_it_is_sent(api):
    http = await api.http()
    host, port = api.live.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (f"POST /v1/runs HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {api.key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {50 * MB}\r\n\r\n")
    writer.write(head.encode() + b'{"workflow": {"id": "x"}, "pad": "' + b"a" * MB)
    await writer.drain()
    answer = await asyncio.wait_for(reader.readuntil(b"}}"), 10)  # answered with 49 MB still unsent
    writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 413 "), status_line
    error = json.loads(rest.partition(b"\r\n\r\n")[2])["error"]
    assert error["type"] == "payload_too_large" and str(api.settings.max_request_bytes) in error["message"]
    await _still_serving(api, http)


async def test_a_client_sending_all_50_mb_is_refused_and_the_server_answers_the_next_request(api):
    http = await api.http()
    body = b'{"workflow": {"id": "x"}, "inputs": {"pad": "' + b"a" * (50 * MB) + b'"}}'
    try:
        refused = await http.post("/v1/runs", content=body, headers={**api.auth(), "Content-Type": "application/json"})
    except (httpx.WriteError, httpx.ReadError, httpx.RemoteProtocolError):
        refused = None  # the 413 came while this client was still sending, and the connection was dropped
    assert refused is None or refused.status_code == 413
    await _still_serving(api, http)
    assert [r["workflow_id"] for r in (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"]] == [
        "hello"], "nothing of the refused body became a run"


async def test_a_chunked_body_over_the_cap_is_cut_off_with_413_while_it_streams(api):
    http = await api.http()
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent
        yield b'{"workflow": {"id": "x"}, "inputs": {"pad": "'
        for _ in range(50):
            sent += MB
            yield b"a" * MB
        yield b'"}}'

    refused = await http.post("/v1/runs", content=chunks(), headers={**api.auth(), "Content-Type": "application/json"})
    assert refused.status_code == 413 and refused.json()["error"]["type"] == "payload_too_large"
    assert "content-length" not in refused.request.headers and sent == 50 * MB, "sent chunked, all of it"
    await _still_serving(api, http)
    assert (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"][0]["workflow_id"] == "hello"


async def test_a_chunked_body_over_the_cap_gets_413_in_the_openai_shape(api):
    http = await api.http()

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"model": "x", "messages": [{"role": "user", "content": "'
        for _ in range(20):
            yield b"a" * MB
        yield b'"}]}'

    refused = await http.post("/v1/chat/completions", content=chunks(), headers=api.auth())
    assert refused.status_code == 413
    assert refused.json()["error"]["type"] == "invalid_request_error" and "FLOWLOOM_MAX_REQUEST_BYTES" in refused.text
    await _still_serving(api, http)


async def test_a_workflow_over_the_node_cap_is_422_naming_nodes_and_one_at_the_cap_compiles(api):
    http = await api.http()
    cap = api.settings.max_nodes
    over = await http.post("/v1/runs", json={"workflow": _chain(cap + 1)}, headers=api.auth())
    assert over.status_code == 422
    error = over.json()["error"]
    assert error["type"] == "invalid_workflow" and "nodes" in error["message"] and str(cap) in error["message"]
    assert [(p["code"], p["path"]) for p in error["problems"]] == [("too_many_nodes", "nodes")]
    saved = await http.post("/v1/workflows", json=_chain(cap + 1), headers=api.auth())
    assert saved.status_code == 422 and saved.json()["error"]["problems"][0]["path"] == "nodes"
    at_cap = await http.post("/v1/workflows/validate", json=_chain(cap), headers=api.auth())
    assert at_cap.status_code == 200 and at_cap.json()["valid"] is True
    await _still_serving(api, http)


async def test_a_megabyte_long_node_name_is_422_naming_its_path_without_echoing_it(api):
    http = await api.http()
    doc = _chain(3, name="n" * MB)
    for method, url, body in (("POST", "/v1/runs", {"workflow": doc}), ("POST", "/v1/workflows", doc)):
        refused = await http.request(method, url, json=body, headers=api.auth())
        assert refused.status_code == 422, refused.text[:300]
        error = refused.json()["error"]
        assert error["problems"][0]["path"] == "nodes[1].name" and "max_name_length" in error["message"]
        assert "nodes[1].name" in error["message"]
        assert len(refused.content) < 4096, "the name is not echoed back"
    saved = await http.post("/v1/workflows", json=_chain(3), headers=api.auth())
    assert saved.status_code == 201
    updated = await http.put("/v1/workflows/big", json={"workflow": _chain(3, name="m" * MB), "draft_version": 1},
                             headers=api.auth())
    assert updated.status_code == 422 and updated.json()["error"]["problems"][0]["path"] == "nodes[1].name"
    await _still_serving(api, http)
    assert json.loads((await http.get("/v1/workflows/big", headers=api.auth())).text)["draft_version"] == 1


async def test_a_workflow_over_the_document_size_cap_is_422_though_the_body_fits(api):
    # 9 MiB of template text: under the 16 MiB body cap, over the 8 MiB document cap.
    http = await api.http()
    doc = _chain(3)
    doc["nodes"][1]["config"]["template"] = "x" * (9 * MB)
    for method, url, body in (("POST", "/v1/runs", {"workflow": doc}), ("POST", "/v1/workflows", doc)):
        refused = await http.request(method, url, json=body, headers=api.auth())
        assert refused.status_code == 422, (url, refused.text[:300])
        error = refused.json()["error"]
        assert [p["code"] for p in error["problems"]] == ["document_too_large"], url
        assert "max_document_bytes" in error["message"] and len(refused.content) < 4096
    checked = (await http.post("/v1/workflows/validate", json=doc, headers=api.auth())).json()
    assert checked["valid"] is False and [p["code"] for p in checked["problems"]] == ["document_too_large"]
    await _still_serving(api, http)


async def test_numbers_beyond_what_the_store_keeps_are_422_not_a_server_error(api):
    # Versions and event ids live in 32-bit integer columns; 2**40 must never reach them.
    http = await api.http()
    assert (await http.post("/v1/workflows", json=_chain(3), headers=api.auth())).status_code == 201
    huge = 2**40
    answers = [await http.get(f"/v1/workflows/big/export?version={huge}", headers=api.auth()),
               await http.post("/v1/workflows/big/rollback", json={"version": huge}, headers=api.auth()),
               await http.put("/v1/workflows/big", json={"workflow": _chain(3), "draft_version": huge},
                              headers=api.auth())]
    ran = await http.post("/v1/runs", json={"workflow": hello_workflow(), "inputs": {"name": "Ada"}},
                          headers=api.auth())
    run_id = ran.json()["run_id"]
    answers.append(await http.get(f"/v1/runs/{run_id}/events?after={huge}", headers=api.auth()))
    answers.append(await http.get(f"/v1/runs/{run_id}/events", headers={**api.auth(), "Last-Event-ID": str(huge)}))
    assert [a.status_code for a in answers] == [422] * 5, [a.text[:200] for a in answers]
    at_most = await http.get(f"/v1/runs/{run_id}/events?after={2**31 - 1}", headers=api.auth())
    assert at_most.status_code == 200  # the largest number is still an answer: no event after it
