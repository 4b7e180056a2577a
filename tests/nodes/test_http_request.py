"""HTTP request node (nodes/http/request.py, nodes/http/guard.py): requests, responses, limits and the SSRF guard.

Every test runs the node through the real engine against a local server on
127.0.0.1, except the unit tests of the address policy and the backend. Network
rule: nothing may leave 127.0.0.0/8 and ::1. The autouse fixture replaces the
connect of the backend the guard wraps with a spy (loopback passes, anything else
fails the test unless the test installs a handler that does not connect) and puts
a tripwire on raw socket connects and name lookups; names other than localhost
are answered by a fake resolver.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import time
import urllib.parse
from typing import Any

import httpcore
import pytest

from engine import CancelToken, RunDeps, run_workflow
from engine.context import NodeContext
from engine.errors import BlockedAddress
from engine.runner import new_run_state
from engine.settings import Settings
from nodes.http.guard import AddressPolicy, GuardedBackend, blocked_category
from schemas.run import NodeRun
from tests.nodes.http_test_server import ConnectSpy, FakeResolver, LocalServer, install_socket_tripwire
from tests.support.catalog import compile_workflow
from tests.support.workflows import build, chain_edges, edge, node

ALLOW_LOCAL = Settings(http_allow=["127.0.0.1"])
DEFAULT = Settings(http_allow=[])  # explicit: independent of FLOWLOOM_HTTP_ALLOW in the environment


# ------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def server():
    srv = LocalServer().start()
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def spy(monkeypatch: pytest.MonkeyPatch):
    violations: list[str] = []
    install_socket_tripwire(monkeypatch, violations)
    connect_spy = ConnectSpy().install(monkeypatch)
    yield connect_spy
    assert violations == [], violations


def http_node(config: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return node("http", "http_request", config, **fields)


async def run_http(config: dict[str, Any], *, settings: Settings = ALLOW_LOCAL, inputs: dict[str, Any] | None = None,
                   input_vars: list[dict[str, Any]] | None = None, before: list[dict[str, Any]] | None = None,
                   cancel: CancelToken | None = None, **fields: Any):
    """Run start -> [before...] -> http; returns (state, events)."""
    before = before or []
    doc = build([*before, http_node(config, **fields)], chain_edges("start", *[n["id"] for n in before], "http"),
                inputs=input_vars or [])
    events: list[Any] = []
    state = await run_workflow(compile_workflow(doc), inputs or {},
                               deps=RunDeps(settings=settings, on_event=events.append), cancel=cancel)
    return state, events


def ok(state) -> dict[str, Any]:
    run = state.node_runs["http"]
    assert state.status == "succeeded", (state.error, run.error)
    return run.outputs


def failed(state, error_type: str = "NodeFailed", reason: str | None = None) -> str:
    run = state.node_runs["http"]
    assert state.status == "failed", run.outputs
    assert run.error is not None and run.error.type == error_type, run.error
    if reason is not None:
        assert run.error.reason == reason, run.error
    return run.error.message


async def wait_for(predicate, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


# --------------------------------------------------------------------- requests


async def test_get_with_templated_url_query_and_headers(server):
    state, _ = await run_http(
        {
            "url": server.url("/echo/{{ inputs.city }}?fixed=1"),
            "query": {"q": "{{ inputs.city | upper }}", "n": "3"},
            "headers": {"X-Token": "tok-{{ inputs.token }}", "Accept": "application/json"},
        },
        inputs={"city": "paris", "token": "abc"},
        input_vars=[{"name": "city"}, {"name": "token"}],
    )
    out = ok(state)
    assert out["status_code"] == 200
    echo = out["json"]
    assert echo["method"] == "GET" and echo["path"] == "/echo/paris"
    assert echo["query"] == {"fixed": ["1"], "q": ["PARIS"], "n": ["3"]}
    assert echo["headers"]["x-token"] == "tok-abc"
    assert echo["headers"]["user-agent"] == ALLOW_LOCAL.http_user_agent
    assert echo["headers"]["host"] == f"127.0.0.1:{server.port}"
    run = state.node_runs["http"]
    assert run.data["url"] == f"http://127.0.0.1:{server.port}/echo/paris"
    assert run.data["method"] == "GET" and run.data["status_code"] == 200
    assert run.data["connections"] == [{"host": "127.0.0.1", "address": "127.0.0.1", "port": server.port}]
    assert run.inputs["query"] == ["n", "q"] and run.inputs["headers"] == ["Accept", "X-Token"]


async def test_user_agent_header_can_be_overridden(server):
    state, _ = await run_http({"url": server.url("/echo"), "headers": {"user-agent": "custom/1"}})
    assert ok(state)["json"]["headers"]["user-agent"] == "custom/1"


async def test_post_json_body_resolves_references_at_any_depth(server):
    before = [node("t", "template", {"template": "from-{{ inputs.name }}"})]
    body = {"user": {"name": {"ref": "inputs.name"}, "tags": [{"ref": "inputs.tag"}, "fixed", {"deep": {"ref": "t.output"}}]},
            "n": 5, "none": None}
    state, _ = await run_http(
        {"method": "POST", "url": server.url("/echo"), "body": {"type": "json", "json": body}},
        inputs={"name": "Zoë", "tag": "a"}, input_vars=[{"name": "name"}, {"name": "tag"}], before=before,
    )
    echo = ok(state)["json"]
    expected = {"user": {"name": "Zoë", "tags": ["a", "fixed", {"deep": "from-Zoë"}]}, "n": 5, "none": None}
    assert echo["method"] == "POST"
    assert json.loads(echo["body"]) == expected
    assert echo["headers"]["content-type"] == "application/json"
    assert state.node_runs["http"].inputs["body.json"] == expected


async def test_form_body_is_url_encoded_from_templates(server):
    state, _ = await run_http(
        {"method": "PUT", "url": server.url("/echo"),
         "body": {"type": "form", "form": {"a": "{{ inputs.name }}", "b": "x y&z=1"}}},
        inputs={"name": "Zoë"}, input_vars=[{"name": "name"}],
    )
    echo = ok(state)["json"]
    assert echo["method"] == "PUT"
    assert echo["headers"]["content-type"] == "application/x-www-form-urlencoded"
    assert urllib.parse.parse_qs(echo["body"]) == {"a": ["Zoë"], "b": ["x y&z=1"]}


async def test_raw_body_with_content_type(server):
    state, _ = await run_http(
        {"method": "PATCH", "url": server.url("/echo"),
         "body": {"type": "raw", "raw": "id,name\n1,{{ inputs.name }}", "content_type": "text/csv"}},
        inputs={"name": "Zoë"}, input_vars=[{"name": "name"}],
    )
    echo = ok(state)["json"]
    assert echo["body"] == "id,name\n1,Zoë"
    assert echo["headers"]["content-type"] == "text/csv"


async def test_raw_body_explicit_content_type_header_wins(server):
    state, _ = await run_http(
        {"method": "POST", "url": server.url("/echo"), "headers": {"Content-Type": "application/xml"},
         "body": {"type": "raw", "raw": "<a/>"}},
    )
    echo = ok(state)["json"]
    assert echo["headers"]["content-type"] == "application/xml" and echo["body"] == "<a/>"


async def test_header_value_with_line_break_fails_without_quoting_it(server):
    state, _ = await run_http({"url": server.url("/echo"), "headers": {"X-Api-Key": "secret\r\nX-Evil: 1"}})
    message = failed(state)
    assert "config.headers.X-Api-Key" in message and "secret" not in message


# -------------------------------------------------------------------- responses


async def test_non_2xx_without_raise_for_status_is_an_output(server):
    state, _ = await run_http({"url": server.url("/status/404")})
    out = ok(state)
    assert out["status_code"] == 404 and out["body"] == "status 404 body" and out["json"] is None


@pytest.mark.parametrize("code", [404, 503])
async def test_raise_for_status_fails_naming_the_status(server, code):
    state, _ = await run_http({"url": server.url(f"/status/{code}"), "raise_for_status": True})
    message = failed(state, reason="http_status")
    assert f"HTTP {code}" in message and f"/status/{code}" in message
    assert state.node_runs["http"].data["status_code"] == code


async def test_raise_for_status_lets_2xx_through(server):
    state, _ = await run_http({"url": server.url("/json"), "raise_for_status": True})
    assert ok(state)["status_code"] == 200


async def test_raise_for_status_with_error_branch_takes_the_error_handle(server):
    doc = build([http_node({"url": server.url("/status/500"), "raise_for_status": True}, error_strategy="error_branch"),
                 node("after", "template", {"template": "{{ http.error.message }}"})],
                [*chain_edges("start", "http"), edge("http", "after", "error")])
    state = await run_workflow(compile_workflow(doc), {}, deps=RunDeps(settings=ALLOW_LOCAL))
    assert state.status == "succeeded"
    assert "HTTP 500" in state.node_runs["after"].outputs["output"]


@pytest.mark.parametrize(
    ("path", "status", "parsed", "body"),
    [
        ("/json", 200, {"a": [1, 2, {"b": None}], "ok": True}, '{"a": [1, 2, {"b": null}], "ok": true}'),
        ("/problem", 422, {"title": "bad input"}, '{"title": "bad input"}'),
        ("/text", 200, None, "héllo wörld"),
    ],
)
async def test_json_is_parsed_only_for_json_content_types(server, path, status, parsed, body):
    state, _ = await run_http({"url": server.url(path)})
    out = ok(state)
    assert out["status_code"] == status and out["json"] == parsed and out["body"] == body
    assert "json_error" not in state.node_runs["http"].data


async def test_invalid_json_with_json_content_type_gives_null_and_a_note(server):
    state, _ = await run_http({"url": server.url("/badjson")})
    out = ok(state)
    assert out["json"] is None and out["body"] == '{"a": 1,'
    assert "not valid JSON" in state.node_runs["http"].data["json_error"]


async def test_response_headers_are_lower_cased_and_repeats_joined(server):
    out = ok((await run_http({"url": server.url("/headers")}))[0])
    assert out["headers"]["x-custom-thing"] == "v1"
    assert out["headers"]["set-cookie"] == "a=1, b=2"
    assert all(name == name.lower() for name in out["headers"])


async def test_head_request_has_empty_body(server):
    out = ok((await run_http({"method": "HEAD", "url": server.url("/json")}))[0])
    assert out["status_code"] == 200 and out["body"] == "" and out["json"] is None


# ------------------------------------------------------------------------ limits


@pytest.mark.parametrize("path", ["/bytes?n=5000", "/stream?n=5000"], ids=["content-length", "streamed"])
async def test_response_larger_than_config_cap_fails(server, path):
    state, _ = await run_http({"url": server.url(path), "max_response_bytes": 1000})
    message = failed(state, reason="response_too_large")
    assert "1000 bytes" in message and "max_response_bytes" in message


async def test_settings_cap_applies_when_smaller_than_config(server):
    settings = Settings(http_allow=["127.0.0.1"], http_max_response_bytes=100)
    state, _ = await run_http({"url": server.url("/stream?n=5000")}, settings=settings)
    assert "100 bytes" in failed(state, reason="response_too_large")


async def test_response_exactly_at_cap_is_accepted(server):
    out = ok((await run_http({"url": server.url("/stream?n=1000"), "max_response_bytes": 1000}))[0])
    assert out["body"] == "y" * 1000


async def test_size_cap_counts_decompressed_bytes(server):
    # ~1 kB on the wire, 1 MB once decoded.
    state, _ = await run_http({"url": server.url("/gzip?n=1000000"), "max_response_bytes": 10_000})
    failed(state, reason="response_too_large")
    out = ok((await run_http({"url": server.url("/gzip?n=5000"), "max_response_bytes": 10_000}))[0])
    assert out["body"] == "z" * 5000


async def test_timeout_fails_the_node(server):
    started = time.monotonic()
    state, _ = await run_http({"url": server.url("/slow?s=5"), "timeout": 0.3})
    message = failed(state, reason="http_timeout")
    assert "0.3s" in message
    assert time.monotonic() - started < 3


async def test_timeout_bounds_the_whole_exchange_not_each_read(server):
    # Every read returns within 0.05 s, so only a total deadline stops this.
    started = time.monotonic()
    state, _ = await run_http({"url": server.url("/drip?s=5"), "timeout": 0.5})
    failed(state, reason="http_timeout")
    assert time.monotonic() - started < 2


# --------------------------------------------------------------------- redirects


async def test_redirect_is_followed_and_recorded(server):
    target = server.url("/json")
    state, _ = await run_http({"url": server.url("/redirect?" + urllib.parse.urlencode({"to": target, "code": 307}))})
    assert ok(state)["json"]["ok"] is True
    data = state.node_runs["http"].data
    assert data["url"] == target
    assert data["redirects"] == [server.url("/redirect")]  # query redacted


async def test_redirect_not_followed_when_disabled(server):
    state, _ = await run_http({"url": server.url("/redirect?to=/json"), "follow_redirects": False})
    out = ok(state)
    assert out["status_code"] == 302 and out["headers"]["location"] == "/json"


async def test_redirect_loop_stops(server):
    message = failed((await run_http({"url": server.url("/loop")}))[0], reason="http_error")
    assert "redirects" in message


@pytest.mark.parametrize("target", [
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
    "http://[::1]:{port}/json",
    "http://127.0.0.2:{port}/json",
])
async def test_redirect_to_blocked_address_is_refused_after_allowed_first_hop(server, spy, target):
    target = target.format(port=server.port)
    seen = len(server.seen)
    state, _ = await run_http({"url": server.url("/redirect?" + urllib.parse.urlencode({"to": target}))})
    failed(state, "BlockedAddress", reason="blocked_address")
    assert [s["path"] for s in server.seen[seen:]] == ["/redirect"]  # the first hop was served
    assert spy.outside == []
    assert state.node_runs["http"].data["redirects"] == [server.url("/redirect")]


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1:70/"])
async def test_redirect_to_other_scheme_is_refused(server, target):
    state, _ = await run_http({"url": server.url("/redirect?" + urllib.parse.urlencode({"to": target}))})
    assert "scheme" in failed(state, "BlockedAddress")


# ------------------------------------------------------------------------ secrets


async def test_header_values_and_url_secrets_are_not_recorded(server):
    state, events = await run_http({
        "url": f"http://user:pw-SECRET1@127.0.0.1:{server.port}/status/500?api_key=q-SECRET2",
        "headers": {"Authorization": "Bearer h-SECRET3", "X-Api-Key": "h-SECRET4"},
        "query": {"token": "q-SECRET5"},
        "raise_for_status": True,
    })
    failed(state, reason="http_status")
    recorded = state.model_dump_json() + "".join(e.model_dump_json() for e in events)
    for secret in ("SECRET1", "SECRET2", "SECRET3", "SECRET4", "SECRET5"):
        assert secret not in recorded, secret
    assert state.node_runs["http"].data["url"] == f"http://127.0.0.1:{server.port}/status/500"


# ------------------------------------------------------------------- cancellation


async def test_cancel_token_aborts_the_request(server):
    token, before = CancelToken(), len(server.events)
    seen = len(server.seen)
    doc = build([http_node({"url": server.url("/slow?s=10")})], chain_edges("start", "http"))
    task = asyncio.ensure_future(run_workflow(compile_workflow(doc), {}, deps=RunDeps(settings=ALLOW_LOCAL),
                                              cancel=token))
    await wait_for(lambda: len(server.seen) > seen)
    started = time.monotonic()
    token.cancel("test stop")
    state = await asyncio.wait_for(task, 3)
    assert time.monotonic() - started < 1
    assert state.status == "cancelled" and state.node_runs["http"].status == "cancelled"
    await wait_for(lambda: "client_gone" in server.events[before:])  # the connection was closed


async def test_task_cancel_aborts_the_request(server):
    doc = build([http_node({"url": server.url("/slow?s=10")})], chain_edges("start", "http"))
    plan = compile_workflow(doc)
    node_plan = plan.nodes["http"]
    ctx = NodeContext(node_plan.node, plan, new_run_state(plan, {}), RunDeps(settings=ALLOW_LOCAL), CancelToken(),
                      NodeRun(id="r", node_id="http", kind="http_request"), lambda event: None)
    before, seen = len(server.events), len(server.seen)
    task = asyncio.ensure_future(node_plan.executor.run(ctx))
    await wait_for(lambda: len(server.seen) > seen)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 3)
    await wait_for(lambda: "client_gone" in server.events[before:])


# ------------------------------------------------------------- SSRF guard: default


def _teredo(client: str, server: str = "65.54.227.120") -> str:
    """A Teredo address whose (obfuscated) client is ``client``."""
    value = (0x20010000 << 96) | (int(ipaddress.IPv4Address(server)) << 64) | (0x8000 << 48) | (0xFFFF << 32)
    value |= ~int(ipaddress.IPv4Address(client)) & 0xFFFFFFFF
    address = ipaddress.IPv6Address(value)
    assert address.teredo[1] == ipaddress.IPv4Address(client)
    return str(address)


LOOPBACK_FORMS = [
    "http://127.0.0.1:{port}/echo",
    "http://127.0.0.2:{port}/echo",
    "http://localhost:{port}/echo",
    "http://[::1]:{port}/echo",
    "http://[::ffff:127.0.0.1]:{port}/echo",
    "http://[::ffff:7f00:1]:{port}/echo",
    "http://2130706433:{port}/echo",
    "http://0x7f000001:{port}/echo",
    "http://0177.0.0.1:{port}/echo",
    "http://017700000001:{port}/echo",
    "http://127.1:{port}/echo",
    "http://0x7f.1:{port}/echo",
    "http://0.0.0.0:{port}/echo",
    "http://0:{port}/echo",
    "http://[::]:{port}/echo",
    "https://127.0.0.1:{port}/echo",
]

NON_LOOPBACK_FORMS = [
    "http://169.254.169.254/latest/meta-data/",
    "http://169.254.0.1/",
    "http://10.0.0.1/",
    "http://10.255.255.255:8080/",
    "http://172.16.5.4/",
    "http://172.31.255.1/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://100.100.100.200/",
    "http://224.0.0.1/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://192.0.0.8/",
    "http://[fc00::1]/",
    "http://[fd00:ec2::254]/",
    "http://[fe80::1]/",
    "http://[fec0::1]/",
    "http://[ff02::1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:10.0.0.1]/",
    "http://[::ffff:0:a00:1]/",
    "http://[::127.0.0.1]/",
    "http://[::a9fe:a9fe]/",
    "http://[2002:7f00:1::]/",
    "http://[2002:a9fe:a9fe::1]/",
    "http://[2002:c0a8:101::]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[64:ff9b::169.254.169.254]/",
    "http://[64:ff9b::a00:1]/",
    f"http://[{_teredo('127.0.0.1')}]/",
    f"http://[{_teredo('10.1.2.3')}]/",
    "http://0xa9fea9fe/",
    "http://2852039166/",
    "http://0251.0376.0251.0376/",
    "http://169.254.43518/",
]


@pytest.mark.parametrize("url", LOOPBACK_FORMS)
async def test_loopback_forms_are_refused_by_default(server, spy, url):
    seen = len(server.seen)
    state, _ = await run_http({"url": url.format(port=server.port)}, settings=DEFAULT)
    failed(state, "BlockedAddress", reason="blocked_address")
    assert server.seen[seen:] == [] and spy.calls == []


@pytest.mark.parametrize("url", NON_LOOPBACK_FORMS)
async def test_internal_addresses_are_refused_by_default(spy, url):
    # spy: any connect to these raises AssertionError; the node must fail before that.
    state, _ = await run_http({"url": url}, settings=DEFAULT)
    failed(state, "BlockedAddress", reason="blocked_address")
    assert spy.calls == []


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.test/", "gopher://127.0.0.1/", "//127.0.0.1/",
                                 "javascript:alert(1)", "127.0.0.1:80/x"])
async def test_non_http_schemes_are_refused(spy, url):
    message = failed((await run_http({"url": url}, settings=DEFAULT))[0], "BlockedAddress")
    assert "scheme" in message and spy.calls == []


async def test_refusal_names_host_address_and_setting(server):
    state, _ = await run_http({"url": f"http://localhost:{server.port}/echo"}, settings=DEFAULT)
    message = failed(state, "BlockedAddress")
    assert "'localhost' resolves to 127.0.0.1" in message and "loopback" in message
    assert "FLOWLOOM_HTTP_ALLOW" in message


@pytest.mark.parametrize(("host", "shown"), [("2130706433", "127.0.0.1"), ("0x7f000001", "127.0.0.1"),
                                             ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1")])
async def test_refusal_of_numeric_forms_names_the_address(spy, host, shown):
    message = failed((await run_http({"url": f"http://{host}/"}, settings=DEFAULT))[0], "BlockedAddress")
    assert f"resolves to {shown}," in message or f"'{shown}' is" in message


async def test_refusal_of_literal_names_metadata(spy):
    message = failed((await run_http({"url": "http://169.254.169.254/latest"}, settings=DEFAULT))[0], "BlockedAddress")
    assert "'169.254.169.254' is a blocked address (cloud metadata" in message and "FLOWLOOM_HTTP_ALLOW" in message


@pytest.mark.parametrize(("answers", "address"), [
    (["169.254.169.254"], "169.254.169.254"),
    (["10.0.0.5"], "10.0.0.5"),
    (["203.0.113.10", "192.168.0.7"], "192.168.0.7"),  # one bad answer among good ones is enough
    (["203.0.113.10", "fd12::1"], "fd12::1"),
    (["::ffff:127.0.0.1"], "::ffff:127.0.0.1"),
])
async def test_names_resolving_to_blocked_addresses_are_refused(monkeypatch, spy, answers, address):
    FakeResolver({"internal.example.test": [answers]}).install(monkeypatch)
    message = failed((await run_http({"url": "http://internal.example.test/x"}, settings=DEFAULT))[0], "BlockedAddress")
    assert f"'internal.example.test' resolves to {address}" in message
    assert spy.calls == []  # refused before any connect, including to the public answer


# ----------------------------------------------------------- SSRF guard: connect


async def test_public_name_connects_to_the_validated_ip_not_the_name(monkeypatch, spy):
    FakeResolver({"api.example.test": [["203.0.113.10"]]}).install(monkeypatch)

    async def refuse(host: str, port: int):
        raise httpcore.ConnectError("test network: not connecting")

    spy.handler = refuse
    state, _ = await run_http({"url": "http://api.example.test/v1"}, settings=DEFAULT)
    assert "not connecting" in failed(state, reason="http_error")
    assert spy.calls == [("203.0.113.10", 80)]


async def test_each_resolved_address_is_tried_in_order(monkeypatch, spy, server):
    FakeResolver({"api.example.test": [["203.0.113.10", "203.0.113.11"]]}).install(monkeypatch)

    async def fake_internet(host: str, port: int):
        if host == "203.0.113.10":
            raise httpcore.ConnectError("unreachable")
        return await spy.real_connect("127.0.0.1", server.port)

    spy.handler = fake_internet
    state, _ = await run_http({"url": f"http://api.example.test:{server.port}/echo"}, settings=DEFAULT)
    assert ok(state)["json"]["headers"]["host"] == f"api.example.test:{server.port}"  # Host keeps the name
    assert spy.calls == [("203.0.113.10", server.port), ("203.0.113.11", server.port)]
    assert state.node_runs["http"].data["connections"] == [
        {"host": "api.example.test", "address": "203.0.113.11", "port": server.port}]


async def test_tls_server_name_is_the_original_host(monkeypatch, spy):
    FakeResolver({"api.example.test": [["203.0.113.10"]]}).install(monkeypatch)
    tls: list[str | None] = []

    class Stream(httpcore.AsyncNetworkStream):
        async def start_tls(self, ssl_context, server_hostname=None, timeout=None):
            tls.append(server_hostname)
            raise httpcore.ConnectError("test network: no TLS")

        async def aclose(self) -> None:
            pass

    async def fake_stream(host: str, port: int):
        return Stream()

    spy.handler = fake_stream
    state, _ = await run_http({"url": "https://api.example.test/v1"}, settings=DEFAULT)
    failed(state, reason="http_error")
    assert spy.calls == [("203.0.113.10", 443)] and tls == ["api.example.test"]


async def test_dns_rebinding_is_refused_at_connect_time(monkeypatch, spy, server):
    """First lookup: a public address (served by the local server standing in for it);
    the next lookup of the same name answers 127.0.0.1 and must be refused."""
    resolver = FakeResolver({"rebind.example.test": [["203.0.113.10"], ["127.0.0.1"]]}).install(monkeypatch)

    async def fake_internet(host: str, port: int):
        assert host == "203.0.113.10"
        return await spy.real_connect("127.0.0.1", server.port)

    spy.handler = fake_internet
    seen = len(server.seen)
    # The server speaks HTTP/1.0, so the redirect hop needs a new connection and a new lookup.
    url = f"http://rebind.example.test:{server.port}/redirect?to=/echo"
    state, _ = await run_http({"url": url}, settings=DEFAULT)
    message = failed(state, "BlockedAddress")
    assert "'rebind.example.test' resolves to 127.0.0.1" in message
    assert resolver.lookups == ["rebind.example.test", "rebind.example.test"]
    assert [s["path"] for s in server.seen[seen:]] == ["/redirect"]  # /echo was never reached
    assert spy.calls == [("203.0.113.10", server.port)]  # the 127.0.0.1 answer never reached connect


class _RecordingBackend(httpcore.AsyncNetworkBackend):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        self.calls.append(host)
        raise httpcore.ConnectError("recording backend")

    async def sleep(self, seconds: float) -> None:
        pass


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "2130706433", "0x7f000001", "0177.0.0.1", "127.1",
                                  "::1", "::ffff:127.0.0.1", "0", "169.254.169.254", "10.1.2.3", "fc00::1"])
async def test_backend_checks_at_connect_time_without_the_precheck(host):
    inner = _RecordingBackend()
    backend = GuardedBackend(AddressPolicy.from_settings(DEFAULT), node_id="n", inner=inner)
    with pytest.raises(BlockedAddress) as info:
        await backend.connect_tcp(host, 80)
    assert inner.calls == [] and info.value.node_id == "n"


async def test_backend_hands_the_inner_backend_ip_literals_only(monkeypatch):
    FakeResolver({"api.example.test": [["2001:db8::5", "203.0.113.10"]]}).install(monkeypatch)
    inner = _RecordingBackend()
    backend = GuardedBackend(AddressPolicy.from_settings(DEFAULT), inner=inner)
    with pytest.raises(httpcore.ConnectError):
        await backend.connect_tcp("api.example.test", 443)
    assert inner.calls == ["2001:db8::5", "203.0.113.10"]


async def test_backend_refuses_unix_sockets():
    with pytest.raises(BlockedAddress):
        await GuardedBackend(AddressPolicy.from_settings(DEFAULT)).connect_unix_socket("/var/run/docker.sock")


# -------------------------------------------------------------------- allow-list


@pytest.mark.parametrize("allow", [["127.0.0.1"], ["127.0.0.0/8"], ["localhost"], ["LocalHost."],
                                   ["intranet.test", "127.0.0.1/32"]])
async def test_allow_list_by_host_ip_and_cidr(server, allow):
    url = server.url("/json") if "localhost" not in allow[0].lower() else f"http://localhost:{server.port}/json"
    state, _ = await run_http({"url": url}, settings=Settings(http_allow=allow))
    assert ok(state)["json"]["ok"] is True


@pytest.mark.parametrize(("allow", "url"), [
    (["intranet.test"], "http://127.0.0.1:{port}/json"),        # another host's entry
    (["127.0.0.2"], "http://127.0.0.1:{port}/json"),            # another address
    (["10.0.0.0/8"], "http://127.0.0.1:{port}/json"),           # another network
    (["127.0.0.1"], "http://[::1]:{port}/json"),                # another family
])
async def test_allow_list_does_not_open_other_targets(server, spy, allow, url):
    state, _ = await run_http({"url": url.format(port=server.port)}, settings=Settings(http_allow=allow))
    failed(state, "BlockedAddress")
    assert spy.calls == []


async def test_allowed_private_network_reaches_connect(monkeypatch, spy):
    """A CIDR entry lets a private address through: the (spied) connect is asked for that IP."""
    FakeResolver({"intranet.example.test": [["10.1.2.3"]]}).install(monkeypatch)

    async def refuse(host: str, port: int):
        raise httpcore.ConnectError("test network: not connecting")

    spy.handler = refuse
    state, _ = await run_http({"url": "http://intranet.example.test:8080/"}, settings=Settings(http_allow=["10.0.0.0/8"]))
    failed(state, reason="http_error")
    assert spy.calls == [("10.1.2.3", 8080)]


async def test_allow_list_from_environment(server, monkeypatch):
    monkeypatch.setenv("FLOWLOOM_HTTP_ALLOW", " intranet.test , 127.0.0.0/8 ")
    settings = Settings()
    assert settings.http_allow == ["intranet.test", "127.0.0.0/8"]
    assert ok((await run_http({"url": server.url("/json")}, settings=settings))[0])["status_code"] == 200


def test_policy_ipv4_entry_also_matches_its_mapped_form():
    policy = AddressPolicy.from_settings(Settings(http_allow=["127.0.0.1", "[fd00::]/8", "Intranet.Test."]))
    assert policy.allows_address(ipaddress.ip_address("::ffff:127.0.0.1"))
    assert policy.allows_address(ipaddress.ip_address("fd00::1"))
    assert not policy.allows_address(ipaddress.ip_address("127.0.0.2"))
    assert policy.allows_host("intranet.test") and not policy.allows_host("x.intranet.test")


@pytest.mark.parametrize(("address", "category"), [
    ("127.0.0.1", "loopback"), ("0.0.0.0", "unspecified"), ("10.9.8.7", "private"), ("172.20.0.1", "private"),
    ("192.168.255.255", "private"), ("100.127.0.1", "carrier-grade NAT"), ("169.254.169.254", "cloud metadata"),
    ("169.254.1.1", "link-local"), ("239.1.1.1", "multicast"), ("250.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"), ("::", "unspecified"), ("::1", "loopback"), ("fd00::1", "unique local"),
    ("fe80::1", "link-local"), ("ff05::2", "multicast"), ("::ffff:127.0.0.1", "loopback, embedded as IPv4-mapped"),
    ("::ffff:0:a00:1", "private, embedded as IPv4-translated"), ("::10.0.0.1", "private, embedded as IPv4-compatible"),
    ("2002:a00:1::", "private, embedded as 6to4"), ("64:ff9b::a9fe:a9fe", "cloud metadata (link-local), embedded as NAT64"),
    (_teredo("192.168.1.1"), "private, embedded as Teredo client"), ("64:ff9b:1::1", "reserved (local-use NAT64)"),
    ("4000::1", "reserved"),
])
def test_blocked_category(address, category):
    found = blocked_category(ipaddress.ip_address(address))
    assert found is not None and found.startswith(category), found


@pytest.mark.parametrize("address", ["203.0.113.10", "8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700::1111",
                                     "2001:db8::1", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
                                     _teredo("8.8.4.4")])
def test_public_addresses_pass(address):
    assert blocked_category(ipaddress.ip_address(address)) is None
