"""What a JSON body the parser takes but the API cannot use is answered with, on SQLite
and PostgreSQL: a lone UTF-16 surrogate is a 422 naming its field on every route (runs,
chat turns, workflows, import, ``/v1/chat/completions`` in OpenAI's shape), never a 500
or a 503 from the store; nesting past the limit names the limit; a malformed body says
where it stops being JSON."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from api.json_body import (
    _NOT_BRACKET,
    _STRING,
    MAX_JSON_DEPTH,
    SURROGATE_ESCAPE,
    _outside_strings,
    json_depth_over,
    may_hold_surrogate,
)

from .conftest import hello_workflow

LONE = "\ud800"


def _raw(body: Any) -> bytes:
    """``body`` as JSON text; ``json.dumps`` escapes a lone surrogate as ``\\ud800``."""
    return json.dumps(body).encode()


async def _post(api, url: str, raw: bytes) -> Any:
    return await api.client.post(url, content=raw, headers={**api.auth(), "Content-Type": "application/json"})


async def test_a_lone_surrogate_is_a_422_naming_its_field_on_every_route(api):
    workflow = hello_workflow()
    saved = await api.client.post("/v1/workflows", json=workflow, headers=api.auth())
    assert saved.status_code == 201, saved.text
    cases = [
        ("/v1/runs", {"workflow": workflow, "inputs": {"name": LONE}}, "inputs.name"),
        ("/v1/runs", {"workflow": workflow, "inputs": {"name": "Ada"}, "chat_id": "c1", "message": f"hi {LONE}"},
         "message"),
        ("/v1/workflows/hello/runs", {"inputs": {"tags": ["ok", LONE]}}, "inputs.tags[1]"),
        ("/v1/workflows", {**workflow, "id": "other", "name": LONE}, "name"),
        ("/v1/workflows/import", {"source": LONE}, "source"),
        ("/v1/workflows/validate", {**workflow, "nodes": [{"id": LONE, "type": "start"}]}, "nodes[0].id"),
        ("/v1/runs", {"workflow": workflow, "inputs": {f"key{LONE}": 1}}, "inputs.key\\ud800"),
    ]
    for url, body, field in cases:
        refused = await _post(api, url, _raw(body))
        assert refused.status_code == 422, (url, refused.text)
        error = refused.json()["error"]
        assert error["type"] == "invalid_request", (url, error)
        assert error["message"].startswith(f"{field}: text holds a lone UTF-16 surrogate"), (url, error)
        assert error["problems"][0]["code"] == "lone_surrogate"
    replaced = await api.client.put("/v1/workflows/hello", content=_raw({"workflow": {**workflow, "name": LONE},
                                                                         "draft_version": 1}),
                                    headers={**api.auth(), "Content-Type": "application/json"})
    assert replaced.status_code == 422 and "workflow.name: text holds" in replaced.json()["error"]["message"]
    assert (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"] == []  # nothing started


async def test_a_lone_surrogate_on_chat_completions_is_an_openai_error_naming_the_param(api):
    body = {"model": "x", "messages": [{"role": "user", "content": f"hello {LONE}"}]}
    refused = await _post(api, "/v1/chat/completions", _raw(body))
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "invalid_request",
                                                             "messages[0].content"), error


async def test_a_surrogate_pair_is_a_character_and_runs(api):
    body = {"workflow": hello_workflow(), "inputs": {"name": "Ada \U0001F600"}}
    ran = await _post(api, "/v1/runs", json.dumps(body, ensure_ascii=True).encode())  # sent as \ud83d\ude00
    assert ran.status_code == 200, ran.text
    assert ran.json()["answer"] == "Hello, Ada \U0001F600! Welcome to Flowloom."


async def test_deep_nesting_names_the_depth_limit_on_every_kind_of_route(api):
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    for url in ("/v1/runs", "/v1/workflows", "/v1/workflows/import", "/v1/chat/completions"):
        refused = await _post(api, url, deep)
        assert refused.status_code == 422, (url, refused.text)
        message = refused.json()["error"]["message"]
        assert f"nests arrays and objects more than {MAX_JSON_DEPTH} levels deep" in message, (url, message)
        assert "UTF-8" not in message
    within = {"workflow": hello_workflow(), "inputs": {"name": "Ada"}, "extra": json.loads("[" * 400 + "]" * 400)}
    read = await _post(api, "/v1/runs", _raw(within))  # parsed, then validated: the unknown field is the problem
    assert read.status_code == 422 and read.json()["error"]["message"].startswith("extra: "), read.text


async def test_a_malformed_body_says_it_is_not_json_and_where(api):
    raw = b'{"workflow": {x}}'  # the 15th character (offset 14) is where it breaks
    for url in ("/v1/runs", "/v1/workflows/import", "/v1/chat/completions"):
        refused = await _post(api, url, raw)
        assert refused.status_code == 422, (url, refused.text)
        message = refused.json()["error"]["message"]
        assert "body is not valid JSON (at character 14)" in message, (url, message)
        assert "jSON decode error" not in message and "[14]" not in message
    cut = await _post(api, "/v1/runs", b'{"workflow": "abc')  # a reason naming a place gets the place back
    assert cut.json()["error"]["message"] == "body is not valid JSON: unterminated string starting at character 13"


def test_the_depth_check_counts_brackets_outside_strings_only():
    assert json_depth_over(b"[" * 513 + b"]" * 513) and not json_depth_over(b"[" * 512 + b"]" * 512)
    assert not json_depth_over(b'["' + b"[" * 5000 + b'"]')  # brackets inside a string
    assert not json_depth_over(b'["\\"' + b"{" * 600 + b'"]')  # ... after an escaped quote
    assert not json_depth_over(b"[" + b"[], {}, " * 5000 + b"1]")  # many shallow values
    assert json_depth_over(b'"' + b"[" * 600)  # an unpaired quote opens no string
    assert json_depth_over(b'"a" "' + b"[" * 600) and not json_depth_over(b'"a" "' + b"[" * 600 + b'"')


#: bodies of the bytes that decide what a string is (quotes, backslashes, brackets)
_BODY = st.lists(st.sampled_from([b"[", b"]", b"{", b"}", b'"', b"a", b" ", b"\\", b"\n"]), max_size=60).map(
    b"".join
)


@given(_BODY)
def test_the_strings_found_without_the_regex_are_the_regex_s(body):
    """The C-level split of a body without a backslash leaves the brackets the regex leaves,
    whatever the quotes (unpaired ones included); a body with one takes the regex."""
    for text in (body, body.replace(b"\\", b"")):
        expected = _STRING.sub(b"", text).translate(None, _NOT_BRACKET)
        assert _outside_strings(text).translate(None, _NOT_BRACKET) == expected


_ESCAPES = st.sampled_from([b"\\ud800", b"\\udc00", b"\\u0041", b"\\", b"u", b"d8", b"a"])


@given(st.lists(_ESCAPES, max_size=12).map(b"".join))
def test_the_surrogate_screen_answers_as_the_regex(data):
    assert may_hold_surrogate(data) == (SURROGATE_ESCAPE.search(data) is not None)
