"""Ask a model's endpoint what it really does: ``flowloom models probe NAME`` and the API.

:func:`probe_model` sends a few small requests (each capped at a few dozen tokens) to an
OpenAI-compatible endpoint, one after the other (a local server often has one slot):

1. **free tool call**: a question only a tool answers, ``tool_choice: "auto"``. Passes
   when the reply calls the tool; a text answer means the model ignores tools it may
   choose (small local models do).
2. **forced tool call**: the same with ``tool_choice`` naming the function.
3. **JSON mode**: ``response_format: {"type": "json_object"}``; passes when the request
   is accepted and the reply parses as a JSON object.
4. **json_schema**: ``response_format`` with a schema; passes when the reply parses
   and has the required key.
5. **usage in streams**: a streamed request with ``stream_options.include_usage``;
   passes when a chunk carries usage.
6. **context length**, where the server tells it: llama.cpp's ``GET /props``
   (``n_ctx``), vLLM's ``GET /v1/models`` (``max_model_len``), LM Studio's
   ``GET /api/v0/models`` (``loaded_context_length``), Ollama's ``GET /api/ps`` (the
   loaded model's ``context_length``) or ``POST /api/show`` (``num_ctx`` among the
   parameters). None when no route answers.

Each check is a :class:`Check`: ``ok`` True or False, or None when the request failed
for another reason (a timeout, a 5xx), so the caller keeps what it had. An endpoint
that cannot be reached at all, or refuses the key, raises :class:`ProbeFailed` before
any check is reported. Nothing here logs or returns the key.

:meth:`ProbeReport.override` turns a report into the
:class:`~nodes.llm.model_overrides.ModelOverride` ``--write`` stores.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from engine.errors import FlowloomError

from .model_overrides import CapabilityOverride, ModelOverride
from .model_registry import Capabilities, ModelRegistry, ToolSupport

__all__ = ["Check", "ProbeFailed", "ProbeReport", "ProbeTarget", "probe_model"]

#: Output cap of every probe request (tokens): enough for one short call or object.
PROBE_MAX_TOKENS = 64
#: Seconds one probe request may take by default (a local model's first request loads it).
DEFAULT_TIMEOUT = 120.0

_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
_TOOL_QUESTION = [
    {"role": "user", "content": "What is the weather in Paris right now? Use the get_weather tool."}
]
_JSON_QUESTION = [
    {
        "role": "user",
        "content": 'Reply with a JSON object whose key "answer" holds the capital '
        "of France. Reply with the JSON object only.",
    }
]
_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


class ProbeFailed(FlowloomError):
    """The endpoint could not be probed at all: unreachable, or the key was refused."""


@dataclass(frozen=True)
class ProbeTarget:
    """Where a model is served, resolved: ``base_url`` (the OpenAI base URL, usually ending
    in ``/v1``), ``model`` (the upstream id sent), ``api_key`` (None: no key) and ``name``
    (the name users know it by, for messages). The key never appears in a repr."""

    base_url: str
    model: str
    api_key: str | None = None
    name: str = ""

    def __repr__(self) -> str:
        return f"ProbeTarget(base_url={self.base_url!r}, model={self.model!r}, name={self.name!r})"

    @classmethod
    def from_registry(cls, registry: ModelRegistry, name: str) -> ProbeTarget:
        """The target of chat model ``name`` of ``registry`` (its key read now).

        Raises:
            UnknownModel: ``name`` is not a chat model of the registry.
            MissingAPIKey: its provider needs a key that is not set.
        """
        spec = registry.get(name)
        return cls(
            base_url=registry.base_url(spec), model=spec.model, api_key=registry.api_key(spec), name=name
        )


class Check(BaseModel):
    """One probed capability: ``ok`` True (works), False (does not), None (could not
    tell: the request failed for another reason); ``detail`` says what was seen."""

    model_config = ConfigDict(frozen=True)

    ok: bool | None
    detail: str


class ProbeReport(BaseModel):
    """What :func:`probe_model` found. ``context_length``: tokens the server gives one
    request (None: no route told); ``context_source``: the route that told it."""

    model_config = ConfigDict(frozen=True)

    model: str
    base_url: str
    free_tool_call: Check
    forced_tool_call: Check
    json_mode: Check
    json_schema: Check
    stream_usage: Check
    context_length: int | None = None
    context_source: str | None = None

    @property
    def tools(self) -> ToolSupport | None:
        """``native``, ``forced`` or ``none`` as the calls showed (None: inconclusive)."""
        if self.free_tool_call.ok:
            return "native"
        if self.forced_tool_call.ok:
            return "forced"
        if self.free_tool_call.ok is False and self.forced_tool_call.ok is False:
            return "none"
        return None

    def override(self) -> ModelOverride:
        """The capabilities and context this report established (inconclusive checks are
        left out, so the registry keeps its value for them)."""
        caps = CapabilityOverride(
            tools=self.tools,
            tool_choice=self.forced_tool_call.ok,
            structured_output=self.json_schema.ok,
            json_mode=self.json_mode.ok,
            stream_usage=self.stream_usage.ok,
        )
        return ModelOverride(max_context=self.context_length, capabilities=caps)

    def capabilities(self, base: Capabilities) -> Capabilities:
        """``base`` with what this report established over it."""
        changes = self.override().capabilities.model_dump(exclude_none=True)
        merged = {**base.model_dump(), **changes}
        if merged["tools"] == "forced":
            merged["tool_choice"] = True
        return Capabilities(**merged)


class _Refused(Exception):
    """The server refused the request (4xx): the feature it asked for is not there."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def probe_model(
    target: ProbeTarget,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    transport: httpx.AsyncBaseTransport | None = None,
) -> ProbeReport:
    """Probe ``target`` (steps 1-6 of the module docstring). ``timeout``: seconds per
    request; ``transport``: an httpx transport (tests), None for the network.

    Raises:
        ProbeFailed: the endpoint is unreachable, or answers 401/403/404 to a plain
            chat request (a wrong key, URL or model id); the message names the URL.
    """
    headers = {"authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)), headers=headers, transport=transport
    ) as client:
        probe = _Prober(client, target)
        await probe.reachable()
        free = await probe.check(probe.free_tool_call)
        forced = await probe.check(probe.forced_tool_call)
        json_mode = await probe.check(probe.json_mode)
        json_schema = await probe.check(probe.json_schema)
        usage = await probe.check(probe.stream_usage)
        length, source = await probe.context_length()
    return ProbeReport(
        model=target.name or target.model,
        base_url=target.base_url,
        free_tool_call=free,
        forced_tool_call=forced,
        json_mode=json_mode,
        json_schema=json_schema,
        stream_usage=usage,
        context_length=length,
        context_source=source,
    )


class _Prober:
    """The requests of one probe, on one client."""

    def __init__(self, client: httpx.AsyncClient, target: ProbeTarget) -> None:
        self.client = client
        self.target = target
        self.base = target.base_url.rstrip("/")
        self.root = self.base[:-3] if self.base.endswith("/v1") else self.base

    async def _chat(self, **fields: Any) -> dict[str, Any]:
        body = {"model": self.target.model, "max_tokens": PROBE_MAX_TOKENS, "temperature": 0, **fields}
        response = await self.client.post(f"{self.base}/chat/completions", json=body)
        if 400 <= response.status_code < 500:
            raise _Refused(response.status_code, _error_message(response))
        response.raise_for_status()
        payload = response.json()
        if not isinstance(payload, dict) or not payload.get("choices"):
            raise ValueError("the reply has no choices")
        return payload

    async def reachable(self) -> None:
        """One plain request: a wrong URL, key or model id fails here, named once."""
        where = f"{self.base}/chat/completions"
        try:
            await self._chat(messages=[{"role": "user", "content": "Say OK."}], max_tokens=4)
        except _Refused as exc:
            if exc.status in (401, 403, 404):
                raise ProbeFailed(
                    f"{where} refused the probe of model {self.target.model!r} "
                    f"(HTTP {exc.status}): {exc.message}"
                ) from None
        except httpx.HTTPError as exc:
            raise ProbeFailed(f"cannot reach {where}: {type(exc).__name__}: {exc}") from None
        except ValueError as exc:
            raise ProbeFailed(f"{where} did not answer like an OpenAI-compatible server: {exc}") from None

    async def check(self, step: Callable[[], Awaitable[Check]]) -> Check:
        try:
            return await step()
        except _Refused as exc:
            return Check(ok=False, detail=f"refused (HTTP {exc.status}): {exc.message}")
        except (httpx.HTTPError, ValueError) as exc:
            return Check(ok=None, detail=f"could not tell: {type(exc).__name__}: {exc}")

    async def _tool_call(self, tool_choice: Any) -> Check:
        payload = await self._chat(messages=_TOOL_QUESTION, tools=[_TOOL], tool_choice=tool_choice)
        message = payload["choices"][0].get("message") or {}
        names = [((c or {}).get("function") or {}).get("name") for c in message.get("tool_calls") or []]
        if "get_weather" in names:
            return Check(ok=True, detail="called get_weather")
        if names:
            return Check(ok=False, detail=f"called {names[0]!r} instead of the tool offered")
        return Check(ok=False, detail=f"answered in text instead: {_short(message.get('content'))}")

    async def free_tool_call(self) -> Check:
        return await self._tool_call("auto")

    async def forced_tool_call(self) -> Check:
        return await self._tool_call({"type": "function", "function": {"name": "get_weather"}})

    async def _json_reply(self, response_format: dict[str, Any]) -> tuple[Any, str]:
        payload = await self._chat(messages=_JSON_QUESTION, response_format=response_format)
        content = (payload["choices"][0].get("message") or {}).get("content") or ""
        try:
            return json.loads(content), content
        except ValueError:
            return None, content

    async def json_mode(self) -> Check:
        value, content = await self._json_reply({"type": "json_object"})
        if isinstance(value, dict):
            return Check(ok=True, detail="replied with a JSON object")
        return Check(ok=False, detail=f"accepted, but the reply is not a JSON object: {_short(content)}")

    async def json_schema(self) -> Check:
        value, content = await self._json_reply(
            {"type": "json_schema", "json_schema": {"name": "answer", "schema": _SCHEMA, "strict": True}}
        )
        if isinstance(value, dict) and isinstance(value.get("answer"), str):
            return Check(ok=True, detail="replied with an object of the schema")
        return Check(
            ok=False, detail=f"accepted, but the reply does not follow the schema: {_short(content)}"
        )

    async def stream_usage(self) -> Check:
        body = {
            "model": self.target.model,
            "max_tokens": 8,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "Say OK."}],
        }
        async with self.client.stream("POST", f"{self.base}/chat/completions", json=body) as response:
            if 400 <= response.status_code < 500:
                await response.aread()
                raise _Refused(response.status_code, _error_message(response))
            response.raise_for_status()
            async for line in response.aiter_lines():
                data = line[5:].strip() if line.startswith("data:") else ""
                if not data or data == "[DONE]":
                    continue
                try:
                    chunk = json.loads(data)
                except ValueError:
                    continue
                if (
                    isinstance(chunk, dict)
                    and isinstance(chunk.get("usage"), dict)
                    and chunk["usage"].get("completion_tokens") is not None
                ):
                    return Check(ok=True, detail="the stream ended with usage")
        return Check(ok=False, detail="the stream carried no usage (usage will be estimated)")

    async def context_length(self) -> tuple[int | None, str | None]:
        """The first context length a known route tells (module docstring, step 6)."""
        for source, read in (
            ("llama.cpp /props", self._llama_cpp),
            ("vLLM /v1/models", self._vllm),
            ("LM Studio /api/v0/models", self._lm_studio),
            ("Ollama /api/ps", self._ollama_ps),
            ("Ollama /api/show", self._ollama),
        ):
            try:
                length = await read()
            except (httpx.HTTPError, ValueError, TypeError, AttributeError):
                continue
            if isinstance(length, int) and not isinstance(length, bool) and length > 0:
                return length, source
        return None, None

    async def _get_json(self, url: str) -> Any:
        response = await self.client.get(url)
        response.raise_for_status()
        return response.json()

    async def _llama_cpp(self) -> Any:
        props = await self._get_json(f"{self.root}/props")
        settings = props.get("default_generation_settings") or {}
        return settings.get("n_ctx") or props.get("n_ctx")

    def _entry(self, models: Any) -> dict[str, Any]:
        entries = [m for m in (models.get("data") or []) if isinstance(m, dict)]
        mine = [m for m in entries if m.get("id") == self.target.model]
        return (mine or entries[:1] or [{}])[0]

    async def _vllm(self) -> Any:
        return self._entry(await self._get_json(f"{self.base}/models")).get("max_model_len")

    async def _lm_studio(self) -> Any:
        entry = self._entry(await self._get_json(f"{self.root}/api/v0/models"))
        return entry.get("loaded_context_length")

    async def _ollama_ps(self) -> Any:
        loaded = await self._get_json(f"{self.root}/api/ps")
        for entry in loaded.get("models") or []:
            if isinstance(entry, dict) and self.target.model in (entry.get("name"), entry.get("model")):
                return entry.get("context_length")
        return None

    async def _ollama(self) -> Any:
        response = await self.client.post(f"{self.root}/api/show", json={"model": self.target.model})
        response.raise_for_status()
        for line in str(response.json().get("parameters") or "").splitlines():
            key, _, value = line.strip().partition(" ")
            if key == "num_ctx" and value.strip().isdigit():
                return int(value.strip())
        return None


def _error_message(response: httpx.Response) -> str:
    try:
        payload = response.json()
    except ValueError:
        return _short(response.text)
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        return _short(str(error.get("message") or error))
    return _short(str(error or payload))


def _short(text: Any, limit: int = 120) -> str:
    value = " ".join(str(text or "").split())
    return value if len(value) <= limit else value[: limit - 1] + "…"
