"""http_request: one HTTP call with httpx, behind an SSRF guard.

Request (:class:`~schemas.nodes_flow.HttpRequestConfig`):

- ``url``, header values, query values, form values and the raw body are Jinja
  templates (rendered with field paths ``config.url``, ``config.headers.NAME``,
  ``config.query.NAME``, ``config.body.form.NAME``, ``config.body.raw``); the JSON
  body may hold references at any depth. ``query`` is merged into the URL's own query.
- Body types: ``json`` (UTF-8, ``application/json``), ``form``
  (``application/x-www-form-urlencoded``), ``raw`` (UTF-8, ``text/plain``); ``body.content_type``
  replaces the default type and an explicit ``Content-Type`` header wins over both.
  ``User-Agent`` defaults to ``Settings.http_user_agent``.
- Requests with side effects (``POST``, ``PUT``, ``PATCH``, ``DELETE``) carry an
  ``Idempotency-Key`` header (unless the node sets one): a hash of the node run's id,
  which is made of the run id, the node id and its loop coordinates. It is the same on
  every retry of the node and when a recovered run runs the node again after a crash,
  so a receiver that honours the header applies the request once.
- ``timeout`` (seconds) bounds the whole exchange: connect, every redirect hop and
  reading the body. ``follow_redirects`` follows at most :data:`MAX_REDIRECTS` hops;
  each hop opens its connection through the guard again. On a hop to another origin
  httpx drops ``Authorization``; other configured headers are sent again.
- The body is streamed and reading stops once more than
  ``min(config.max_response_bytes, Settings.http_max_response_bytes)`` bytes
  (after content decoding) arrive.

Outputs: ``status_code`` (number), ``headers`` (object; lower-case names, repeated
headers joined with ``", "``), ``body`` (string, decoded with the response charset,
else UTF-8; undecodable bytes replaced), ``json`` (the parsed body when the response
content type is ``application/json`` or ``*+json``, else null; an invalid JSON body
gives null and ``data["json_error"]``), plus one output per entry of ``outputs`` (name ->
JSONPath over the parsed body; :func:`path_outputs`).

Record: ``node_run.data`` holds ``method``, ``url`` (final URL without credentials,
query or fragment), ``status_code``, ``redirects`` (hop URLs, same redaction),
``connections`` (host, address actually connected to, port) and ``response_bytes``;
``node_run.inputs`` holds the redacted URL, query and header *names*, and the body.
Header values are never recorded or put in error messages: they may be secrets.

Errors (all :class:`~engine.errors.NodeFailed`, ``reason`` in brackets):
:class:`~engine.errors.BlockedAddress` [``blocked_address``] for a refused target or
scheme; a 4xx/5xx with ``raise_for_status`` [``http_status``]; the timeout
[``http_timeout``]; an oversized response [``response_too_large``]; connection and
protocol failures, too many redirects [``http_error``]; bad URL/header/body config
[``node_error``].

Address policy (the SSRF guard, always on): every connection goes through
:class:`~nodes.http.guard.GuardedBackend` under the operator's
:class:`~nodes.http.guard.AddressPolicy` (``FLOWLOOM_HTTP_ALLOW``); a literal blocked IP
in the URL is refused before anything is sent. Only ``http`` and ``https`` are allowed.
"""

from __future__ import annotations

import asyncio
import codecs
import copy
import json
import re
import urllib.parse
from typing import Any

import httpx

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from engine.errors import BlockedAddress, NodeFailed
from engine.settings import Settings
from schemas.node_records import NodeData
from schemas.nodes_flow import HttpRequestConfig, jsonpath_expression, jsonpath_many

from .guard import AddressPolicy, GuardedBackend, GuardedTransport, literal_ip

__all__ = [
    "MAX_REDIRECTS",
    "HttpRequestNode",
    "idempotency_key",
    "path_outputs",
    "safe_url",
]

#: Redirect hops followed before the node fails (httpx's own default is 20).
MAX_REDIRECTS = 10


# ------------------------------------------------------------------------ helpers


def safe_url(url: httpx.URL) -> str:
    """``url`` for records and messages: no user info, query or fragment (they may hold secrets)."""
    host = f"[{url.host}]" if ":" in url.host else url.host
    port = f":{url.port}" if url.port is not None else ""
    path = url.raw_path.split(b"?", 1)[0].decode("ascii", errors="replace")
    return f"{url.scheme}://{host}{port}{path}"


def _precheck(scheme: str, host: str, policy: AddressPolicy, node_id: str) -> None:
    """Refuse a non-http(s) scheme, and a literal blocked IP before anything is sent.

    The connect-time check stays the authority; this gives IP forms that httpx cannot
    even parse (``0177.0.0.1``) the same :class:`BlockedAddress` as the rest.
    """
    if scheme.lower() not in ("http", "https"):
        raise BlockedAddress(
            f"HTTP target refused: scheme {scheme or '(none)'!r} is not allowed (only http and https)",
            node_id=node_id,
        )
    if not host:
        raise NodeFailed("config.url: the URL has no host", node_id=node_id)
    literal = literal_ip(host)
    if literal is not None:
        # IPv6 literals as written; inet_aton forms (2130706433) as the dotted address they spell.
        policy.check(host, [host if ":" in host else str(literal)], node_id=node_id)


_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


def _is_json_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _reject_constant(name: str) -> Any:
    # NaN/Infinity are not JSON and would not survive the run state's JSON checkpoint.
    raise ValueError(f"{name} is not valid JSON")


def _charset(response: httpx.Response) -> str:
    charset = response.charset_encoding
    if charset:
        try:
            return codecs.lookup(charset).name
        except LookupError:
            pass
    return "utf-8"


# --------------------------------------------------------------------------- node


_SIDE_EFFECTS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def idempotency_key(node_run_id: str) -> str:
    """The ``Idempotency-Key`` of a node run's requests: 32 hex digits of SHA-256 over its id
    (run id + node id + loop coordinates), stable across retries and recovery."""
    import hashlib

    return hashlib.sha256(node_run_id.encode("utf-8")).hexdigest()[:32]


class HttpRequestNode(NodeExecutor[HttpRequestConfig], kind="http_request"):
    """Sends one HTTP request (following redirects if configured) and outputs the response.

    See the module docstring for the request, outputs, record, errors and address policy.
    """

    async def run(self, ctx: NodeContext) -> NodeResult:
        cfg, settings, node_id = self.config, ctx.deps.settings, ctx.node_id
        policy = AddressPolicy.from_settings(settings)
        limit = min(cfg.max_response_bytes, settings.http_max_response_bytes)

        raw_url = ctx.render(cfg.url, field="config.url").strip()
        try:
            parts = urllib.parse.urlsplit(raw_url)
            host = parts.hostname or ""
        except ValueError as exc:
            raise NodeFailed(f"config.url: invalid URL: {exc}", node_id=node_id) from None
        _precheck(parts.scheme, host, policy, node_id)
        try:
            url = httpx.URL(raw_url)
        except httpx.InvalidURL as exc:
            raise NodeFailed(f"config.url: invalid URL: {exc}", node_id=node_id) from None
        params = {name: ctx.render(value, field=f"config.query.{name}") for name, value in cfg.query.items()}
        if params:
            # httpx's params= would replace the URL's own query; the docs promise a merge.
            url = url.copy_merge_params(params)
        headers = self._headers(ctx, settings)
        content, content_type = self._body(ctx)
        if content_type is not None and "content-type" not in headers:
            headers["Content-Type"] = content_type

        ctx.node_run.inputs.update(
            url=safe_url(url), method=cfg.method, query=sorted(params), headers=sorted(cfg.headers)
        )
        data = ctx.node_run.data
        data.update({"method": cfg.method, "url": safe_url(url)})
        ctx.cancel.raise_if_cancelled(node_id)

        backend = GuardedBackend(policy, node_id=node_id)
        data["connections"] = backend.connections  # filled as connections open; kept when the node fails
        try:
            async with asyncio.timeout(cfg.timeout):
                async with httpx.AsyncClient(
                    transport=GuardedTransport(backend),
                    trust_env=False,
                    follow_redirects=False,
                    timeout=cfg.timeout,
                ) as client:
                    request = client.build_request(cfg.method, url, headers=headers, content=content)
                    response = await self._send(ctx, client, request, policy)
                    try:
                        data["status_code"] = response.status_code
                        body = await self._read(ctx, response, limit)
                    finally:
                        await response.aclose()
        except TimeoutError:
            raise NodeFailed(
                f"{cfg.method} {data['url']}: no complete response within {cfg.timeout}s (config.timeout)",
                node_id=node_id,
                reason="http_timeout",
            ) from None
        except httpx.TimeoutException as exc:
            raise NodeFailed(
                f"{cfg.method} {data['url']}: {type(exc).__name__} after config.timeout={cfg.timeout}s",
                node_id=node_id,
                reason="http_timeout",
            ) from None
        except httpx.LocalProtocolError:
            # h11's message may quote a header value: keep it out of the record.
            raise NodeFailed(
                f"{cfg.method} {data['url']}: the request is not valid HTTP (check headers)",
                node_id=node_id,
                reason="http_error",
            ) from None
        except httpx.HTTPError as exc:
            raise NodeFailed(
                f"{cfg.method} {data['url']}: {type(exc).__name__}: {exc}",
                node_id=node_id,
                reason="http_error",
            ) from None
        return self._result(ctx, response, body)

    # ---------------------------------------------------------------- request parts

    def _headers(self, ctx: NodeContext, settings: Settings) -> httpx.Headers:
        headers = httpx.Headers({"User-Agent": settings.http_user_agent})
        for name, template in self.config.headers.items():
            if not _TOKEN.match(name):
                raise NodeFailed(f"config.headers: {name!r} is not a valid header name", node_id=ctx.node_id)
            value = ctx.render(template, field=f"config.headers.{name}")
            if "\r" in value or "\n" in value or "\0" in value:
                # Never quote the value: headers carry credentials.
                raise NodeFailed(
                    f"config.headers.{name}: the rendered value contains a line break or NUL",
                    node_id=ctx.node_id,
                )
            headers[name] = value
        if self.config.method.upper() in _SIDE_EFFECTS and "idempotency-key" not in headers:
            headers["Idempotency-Key"] = idempotency_key(ctx.node_run.id)
        return headers

    def _body(self, ctx: NodeContext) -> tuple[bytes | None, str | None]:
        """(encoded body, its default content type); (None, None) for no body."""
        body = self.config.body
        if body.type == "json":
            value = ctx.resolve(body.json_, record_as="body.json")
            try:
                text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            except (TypeError, ValueError) as exc:
                raise NodeFailed(
                    f"config.body.json: cannot be sent as JSON: {exc}", node_id=ctx.node_id
                ) from None
            return text.encode("utf-8"), body.content_type or "application/json"
        if body.type == "form":
            fields = {
                name: ctx.render(value, field=f"config.body.form.{name}") for name, value in body.form.items()
            }
            ctx.node_run.inputs["body.form"] = fields
            return urllib.parse.urlencode(fields).encode(
                "ascii"
            ), body.content_type or "application/x-www-form-urlencoded"
        if body.type == "raw":
            text = ctx.render(body.raw, field="config.body.raw")
            ctx.node_run.inputs["body.raw"] = text
            return text.encode("utf-8"), body.content_type or "text/plain; charset=utf-8"
        return None, None

    # ---------------------------------------------------------------- exchange

    async def _send(
        self, ctx: NodeContext, client: httpx.AsyncClient, request: httpx.Request, policy: AddressPolicy
    ) -> httpx.Response:
        """Send ``request``, following redirects by hand.

        By hand rather than httpx's ``follow_redirects``: httpx reads every redirect
        body in full (no size cap) and would not let the scheme be checked per hop.
        """
        redirects: list[str] = []
        while True:
            _precheck(request.url.scheme, request.url.host, policy, ctx.node_id)
            response = await client.send(request, stream=True, follow_redirects=False)
            ctx.node_run.data["url"] = safe_url(request.url)
            if not self.config.follow_redirects or response.next_request is None:
                return response
            await response.aclose()
            if len(redirects) >= MAX_REDIRECTS:
                raise NodeFailed(
                    f"{self.config.method} {redirects[0]}: more than {MAX_REDIRECTS} redirects",
                    node_id=ctx.node_id,
                    reason="http_error",
                )
            redirects.append(safe_url(request.url))
            ctx.node_run.data["redirects"] = redirects
            request = response.next_request
            ctx.cancel.raise_if_cancelled(ctx.node_id)

    async def _read(self, ctx: NodeContext, response: httpx.Response, limit: int) -> bytes:
        """The decoded body; at most ``limit`` bytes.

        Raises:
            NodeFailed: the body is larger than ``limit`` (reason ``response_too_large``).
        """
        settings = ctx.deps.settings

        def too_large(seen: str) -> NodeFailed:
            return NodeFailed(
                f"{self.config.method} {ctx.node_run.data['url']}: response body {seen} exceeds the limit of "
                f"{limit} bytes (the smaller of config.max_response_bytes={self.config.max_response_bytes} and "
                f"FLOWLOOM_HTTP_MAX_RESPONSE_BYTES={settings.http_max_response_bytes}); stopped reading",
                node_id=ctx.node_id,
                reason="response_too_large",
            )

        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit and "content-encoding" not in response.headers:
            raise too_large(f"of {declared} bytes (Content-Length)")
        chunks: list[bytes] = []
        total = 0
        # aiter_bytes yields decompressed data, so a small compressed body cannot expand past the cap.
        async for chunk in response.aiter_bytes():
            total += len(chunk)
            if total > limit:
                raise too_large(f"of more than {limit} bytes")
            chunks.append(chunk)
        ctx.node_run.data["response_bytes"] = total
        return b"".join(chunks)

    def _result(self, ctx: NodeContext, response: httpx.Response, body: bytes) -> NodeResult:
        status = response.status_code
        headers: dict[str, str] = {}
        for name, value in response.headers.multi_items():
            name = name.lower()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        text = body.decode(_charset(response), errors="replace")
        parsed: Any = None
        if _is_json_type(headers.get("content-type", "")) and text.strip():
            try:
                parsed = json.loads(text, parse_constant=_reject_constant)
            except (ValueError, RecursionError) as exc:
                ctx.node_run.data["json_error"] = (
                    f"the response says {headers['content-type']!r} but its body is not valid JSON: {exc}"
                )
        if self.config.raise_for_status and status >= 400:
            excerpt = " ".join(text[:200].split())
            raise NodeFailed(
                f"HTTP {status} {response.reason_phrase} from {self.config.method} {ctx.node_run.data['url']}"
                + (f": {excerpt}" if excerpt else ""),
                node_id=ctx.node_id,
                reason="http_status",
            )
        outputs: dict[str, Any] = {"status_code": status, "headers": headers, "body": text, "json": parsed}
        if self.config.outputs_:
            outputs.update(path_outputs(self.config.outputs_, parsed, text, ctx.node_run.data))
        return NodeResult(outputs)


def path_outputs(paths: dict[str, str], parsed: Any, text: str, data: NodeData) -> dict[str, Any]:
    """The ``outputs`` of an HTTP node: name -> value of its JSONPath over the response.

    The document is ``parsed`` (the ``json`` output), else ``text`` parsed as JSON (a JSON
    body sent with another content type, which FastGPT parses too), else there is none
    and every output is null. A path that may select several values gives the list of
    matches, another path its first match, and no match gives null
    (:func:`schemas.nodes_flow.jsonpath_many`). Evaluation errors (a filter comparing a string
    with a number) give null, noted in ``data["output_errors"]``: FastGPT's library yields
    nothing there either.
    """
    from jsonpath_ng.ext import parse

    doc = parsed
    if doc is None and text.strip():
        try:
            doc = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            doc = None
    out: dict[str, Any] = {}
    for name, path in paths.items():
        out[name] = None
        if doc is None:
            continue
        try:
            # jsonpath-ng may rewrite the document it walks (chained filters): give it a copy
            matches = [m.value for m in parse(jsonpath_expression(path)).find(copy.deepcopy(doc))]
        except Exception as exc:
            data.setdefault("output_errors", {})[name] = f"{path}: {type(exc).__name__}: {exc}"
            continue
        if jsonpath_many(path):
            out[name] = matches or None
        elif matches:
            out[name] = matches[0]
    return out
