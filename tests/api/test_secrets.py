"""Credentials never leak, on SQLite and PostgreSQL: a provider API key, a Flowloom API
key, a bearer token in an HTTP node's header and a key in an HTTP node's URL go through
runs (one that succeeds, one whose HTTP call fails), and none of them appears in the
logs, the SSE events, the responses, the error messages (a provider that echoes the key
in its 401 included) or the stored runs, node runs, events and chat messages. (The
workflow document itself is the author's and is kept as written, since a run must be
able to continue from it; it is never part of a run's responses.)"""

from __future__ import annotations

import logging
from typing import Any

from tests.support.openai_server import http_error, text_reply

from .conftest import SECRET_HEADER_VALUE, read_messages

PROVIDER_KEY = "sk-scripted-test"  # what the models_file fixture puts in the provider's key variable
BEARER = "tok-bearer-7c1e55a0d9"
URL_KEY = "urlkey-93be0f1a42"


def _flow(url: str) -> dict[str, Any]:
    return {
        "id": "leaky", "name": "Leaky", "inputs": [{"name": "query", "type": "string"}],
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "fetch", "type": "http_request",
             "config": {"url": url + f"?api_key={URL_KEY}&q=1",
                        "headers": {"Authorization": f"Bearer {BEARER}", "X-Api-Key": SECRET_HEADER_VALUE},
                        "timeout": 5}},
            {"id": "reply", "type": "chat", "config": {"model": "default", "user_prompt": "{{ sys.query }}"}},
            {"id": "say", "type": "answer", "config": {"text": "{{ reply.answer }} {{ fetch.status_code }}"}},
        ],
        "edges": [{"id": "e1", "source": "start", "target": "fetch"}, {"id": "e2", "source": "fetch", "target": "reply"},
                  {"id": "e3", "source": "reply", "target": "say"}],
    }


async def _everything_about(api, run_id: str) -> list[str]:
    """Every response and stored record of the run, as text."""
    texts = []
    for path in (f"/v1/runs/{run_id}", f"/v1/runs/{run_id}/events", "/v1/runs", "/v1/chats/leak-1/messages",
                 "/v1/chats"):
        texts.append((await api.client.get(path, headers=api.auth())).text)
    service = api.service
    texts.append((await service.state("default", run_id)).model_dump_json())
    texts += [run.model_dump_json() for run in await service.node_runs("default", run_id)]
    texts.append(repr(await service.stores.events.read("default", run_id, 0)))
    return texts


async def test_no_credential_appears_in_logs_events_responses_or_stored_runs(
        api, models_file, openai_server, target, caplog):
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="flowloom")
    openai_server.script(text_reply("All good", usage=(5, 2)),
                         http_error(401, f"Incorrect API key provided: {PROVIDER_KEY}", code="invalid_api_key"))
    http = await api.http()
    body = {"workflow": _flow(target.url + "/ok"), "message": "hello", "chat_id": "leak-1",
            "response_mode": "streaming"}
    async with http.stream("POST", "/v1/runs", json=body, headers=api.auth()) as response:
        streamed = await read_messages(response)
    run_id = streamed[0]["data"]["run_id"]
    assert streamed[-1]["data"]["status"] == "succeeded", streamed[-3:]
    sent = openai_server.requests[-1]
    assert sent.headers["authorization"] == f"Bearer {PROVIDER_KEY}", "the provider did get its key"

    # the same flow whose HTTP call fails: the error names the URL it could not reach
    refused = {"workflow": _flow("http://127.0.0.1:9/nothing"), "message": "again", "chat_id": "leak-1"}
    failed = await api.client.post("/v1/runs", json=refused, headers=api.auth())
    assert failed.status_code == 200 and failed.json()["status"] == "failed", failed.text
    assert "127.0.0.1:9" in failed.json()["error"]["message"], "the error still says where"

    # the provider refuses the key and echoes it in its error message
    rejected = await api.client.post("/v1/runs", json={**body, "response_mode": "blocking", "message": "third"},
                                     headers=api.auth())
    assert rejected.json()["status"] == "failed" and "401" in rejected.json()["error"]["message"], rejected.text

    texts = [str(streamed), failed.text, rejected.text, caplog.text]
    for each in (run_id, failed.json()["run_id"], rejected.json()["run_id"]):
        texts += await _everything_about(api, each)
    for secret in (PROVIDER_KEY, api.key, BEARER, URL_KEY, SECRET_HEADER_VALUE):
        leaks = [t[max(0, t.find(secret) - 120): t.find(secret) + 60] for t in texts if secret in t]
        assert not leaks, f"{secret!r} leaked: {leaks[:2]}"


def test_the_http_client_logs_mask_credential_query_values_and_url_passwords(caplog):
    from api.redaction import install

    install()
    caplog.set_level(logging.INFO, logger="httpx")
    url = f"https://ada:pw-{URL_KEY}@api.example/v1/items?q=tea&access_token={BEARER}&Key={URL_KEY}#top"
    logging.getLogger("httpx").info('HTTP Request: %s %s "%s"', "GET", url, "HTTP/1.1 200 OK")
    (record,) = [r for r in caplog.records if r.name == "httpx"]
    assert record.getMessage() == ('HTTP Request: GET https://ada:***@api.example/v1/items?q=tea&access_token=***'
                                   '&Key=***#top "HTTP/1.1 200 OK"')
