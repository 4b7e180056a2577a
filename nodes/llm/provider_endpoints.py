"""Talking to a tenant's OpenAI-compatible endpoint outside runs: checking its base URL,
listing its models (``GET {base_url}/models``) and the guarded transport the model
probe uses.

Every request goes through the HTTP node's address guard
(:class:`~nodes.http.guard.GuardedBackend`): a tenant's endpoint on a loopback,
private or link-local address is refused unless ``FLOWLOOM_HTTP_ALLOW`` allows it.
Errors carry what the endpoint said with the key cut out (an endpoint may echo the
key it refused), never a traceback.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any
from urllib.parse import urlsplit

import httpx

from engine.errors import BlockedAddress, FlowloomError

from ..http.guard import AddressPolicy, GuardedBackend, GuardedTransport

__all__ = ["EndpointError", "check_base_url", "guarded_transport", "list_endpoint_models", "redact"]

#: seconds a listing may take (connect included)
LIST_TIMEOUT_S = 15.0
#: models kept from one listing (a hub-sized server lists thousands)
MAX_LISTED = 2000


class EndpointError(FlowloomError):
    """The endpoint could not be reached or answered an error; the message says which."""


def redact(text: str, key: str | None) -> str:
    """``text`` with ``key`` (when given) replaced by ``[redacted]``."""
    return text.replace(key, "[redacted]") if key else text


def guarded_transport(guard: AddressPolicy) -> httpx.AsyncBaseTransport:
    """An httpx transport whose every connection passes ``guard``."""
    return GuardedTransport(GuardedBackend(guard))


async def check_base_url(url: str, guard: AddressPolicy) -> str | None:
    """None when ``url`` is an http(s) URL with a host the guard allows, else why not.

    The host is resolved (2 s at most); a name that does not resolve here is accepted,
    since the endpoint may be reachable only later - the guard checks every connection anyway.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # a port out of range or not a number, a malformed IPv6 host
        return "base_url is not a valid URL, e.g. http://127.0.0.1:11434/v1"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "base_url must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:11434/v1"
    if "{" in url or "}" in url:
        return "base_url still holds a placeholder such as {resource}: put your own value there"
    if parts.username or parts.password:
        return "base_url must not hold a user name or password: set the key instead"
    host = parts.hostname
    try:
        infos = await asyncio.wait_for(
            asyncio.get_running_loop().getaddrinfo(
                host, port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
            ),
            2.0,
        )
    except (TimeoutError, OSError, UnicodeError, ValueError):
        return None
    try:
        guard.check(host, list(dict.fromkeys(str(i[4][0]) for i in infos)))
    except BlockedAddress as exc:
        return (
            str(exc)
            .replace("HTTP target refused", "base_url refused")
            .replace("The HTTP node does not reach", "Model providers do not reach")
        )
    return None


async def list_endpoint_models(
    base_url: str,
    api_key: str | None,
    guard: AddressPolicy,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> list[dict[str, Any]]:
    """The models the endpoint lists: ``[{"id", "owned_by"}]`` in its order (at most
    :data:`MAX_LISTED`). ``transport``: tests only (default: the guarded one).

    Raises:
        EndpointError: unreachable, refused by the guard, an error status, or an answer
            that is not an OpenAI model list.
    """
    url = base_url.rstrip("/") + "/models"
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx.AsyncClient(
            transport=transport or guarded_transport(guard),
            headers=headers,
            timeout=httpx.Timeout(LIST_TIMEOUT_S, connect=10.0),
        ) as client:
            response = await client.get(url)
    except BlockedAddress as exc:
        raise EndpointError(
            redact(str(exc), api_key)
            .replace("HTTP target refused", "model provider refused")
            .replace("The HTTP node does not reach", "Model providers do not reach")
        ) from None
    except httpx.HTTPError as exc:
        raise EndpointError(
            f"cannot reach {url}: {redact(str(exc) or type(exc).__name__, api_key)}"
        ) from None
    if response.status_code != 200:
        raise EndpointError(
            f"{url} answered {response.status_code}: {redact(_error_text(response), api_key)[:300]}"
        )
    try:
        data = response.json()
    except ValueError:
        raise EndpointError(
            f"{url} did not answer JSON; is base_url the OpenAI-compatible one (…/v1)?"
        ) from None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise EndpointError(f'{url} did not answer an OpenAI model list ({{"data": [...]}})')
    found = [
        {"id": str(i["id"]), "owned_by": i.get("owned_by") if isinstance(i.get("owned_by"), str) else None}
        for i in items
        if isinstance(i, dict) and isinstance(i.get("id"), (str, int))
    ]
    return found[:MAX_LISTED]


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip() or response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    if isinstance(error, str):
        return error
    return response.text.strip()
