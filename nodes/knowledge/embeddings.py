"""Embeddings and rerank clients over the model registry: the engine's
:class:`~engine.knowledge.ports.Embedder` and :class:`~engine.knowledge.ports.Reranker`.

Embeddings go to the model's provider with the real ``openai`` SDK
(``POST {base_url}/embeddings``, ``encoding_format="base64"``: little-endian float32,
decoded by numpy, since the SDK's ``float`` answer builds one Python object per number,
~50 ms of CPU per 64 vectors of 384 dimensions), which OpenAI, vLLM and TEI answer; a
server that ignores the format and answers lists of numbers (Ollama, llama.cpp) is read
as such, item by item. The request goes through the client's raw ``post`` and its answer's
JSON is read as it is (not the SDK's typed models; see ``_request``): per text, the typed
call cost more CPU than the rest of a request. Rerank goes to ``POST {base_url}/rerank`` with the
Jina/Cohere body ``{model, query, documents, top_n}``, answered by
``{"results": [{"index", "relevance_score"}], "usage": {...}}``.

Requests are batched (the model's ``max_batch`` texts, and at most
:data:`BATCH_TOKEN_BUDGET` estimated tokens per request, since servers refuse oversized
bodies) and each is retried with exponential backoff (:data:`RETRIES` times, from
:data:`BACKOFF_S`, honouring a short ``Retry-After``) on 429, 5xx, timeouts and
connection errors - the failures that pass. Anything else, or the last retry failing,
is one :class:`~engine.knowledge.ports.EmbeddingError` naming the model (never the
key). A model answering vectors of another length than its registry ``dimension`` is
:class:`~engine.knowledge.ports.DimensionMismatch`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import httpx

from engine.knowledge.ports import DimensionMismatch, EmbeddingBatch, EmbeddingError, RerankError
from engine.knowledge.scope import TENANT_MODELS
from engine.telemetry import Span, telemetry
from schemas.run import Usage

from ..llm.model_registry import ModelRegistry, ModelSpec, UnknownModel, WrongModelType, price

__all__ = [
    "BACKOFF_S",
    "BATCH_TOKEN_BUDGET",
    "REQUEST_TIMEOUT_S",
    "RETRIES",
    "RegistryEmbedder",
    "RegistryReranker",
]

logger = logging.getLogger("flowloom.knowledge")

#: attempts after the first one, per request
RETRIES = 4
#: the first backoff (seconds); doubled at each retry, with jitter, at most 20 s
BACKOFF_S = 0.5
#: estimated tokens of one embeddings request at most (a lone larger text goes alone)
BATCH_TOKEN_BUDGET = 100_000
#: seconds one request may take (the SDK clients of the registry have no read timeout)
REQUEST_TIMEOUT_S = 120.0

T = TypeVar("T")


def _estimate(text: str) -> int:
    from ..llm.call import estimate_tokens

    return estimate_tokens(text)


def _transient(exc: BaseException) -> bool:
    """Whether retrying may help: 429, 5xx, timeouts, connection errors."""
    import openai

    if isinstance(
        exc, (openai.APIConnectionError, openai.APITimeoutError, asyncio.TimeoutError, httpx.TransportError)
    ):
        return True
    status = getattr(exc, "status_code", None)
    if status is None and isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
    return status is not None and (status == 429 or status >= 500)


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return min(float(value), 20.0) if value is not None else None
    except ValueError:
        return None


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    if status is None and response is not None and not hasattr(exc, "body"):  # httpx.HTTPStatusError
        return f"HTTP {response.status_code}: {response.text[:300]}"
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    if status is not None:
        return f"HTTP {status}" + (f": {str(message)[:300]}" if message else "")
    return f"{type(exc).__name__}: {str(exc)[:300]}"


async def _with_retries(
    what: str, model: str, call: Callable[[], Awaitable[T]], *, retries: int, backoff_s: float, url: str
) -> T:
    """``call()`` retried on transient failures (module docstring). Raises EmbeddingError,
    naming ``url`` (the endpoint tried): with local endpoints the usual causes are a server
    that is not running, a base URL missing its ``/v1``, or one that serves no such route."""
    attempt = 0
    while True:
        try:
            return await asyncio.wait_for(call(), REQUEST_TIMEOUT_S)
        except EmbeddingError:
            raise
        except Exception as exc:
            if not _transient(exc) or attempt >= retries:
                tried = f" after {attempt + 1} attempts" if attempt else ""
                raise EmbeddingError(
                    f"{what} model {model!r} failed{tried}: {_describe(exc)} (URL tried: {url})"
                ) from None
            wait = _retry_after(exc)
            if wait is None:
                wait = min(backoff_s * (2**attempt), 20.0) * (0.75 + random.random() / 2)
            logger.info("%s model %s: %s; retrying in %.2f s", what, model, _describe(exc), wait)
            await asyncio.sleep(wait)
            attempt += 1


def _batches(texts: Sequence[str], max_texts: int, budget: int) -> list[tuple[int, int]]:
    """``[(start, end)...]`` covering ``texts`` with at most ``max_texts`` texts and
    ``budget`` estimated tokens each (a larger text alone)."""
    spans: list[tuple[int, int]] = []
    start, used = 0, 0
    for i, text in enumerate(texts):
        cost = _estimate(text)
        if i > start and (i - start >= max_texts or used + cost > budget):
            spans.append((start, i))
            start, used = i, 0
        used += cost
    if start < len(texts):
        spans.append((start, len(texts)))
    return spans


def model_problem(registry: ModelRegistry, model: str, kind: str) -> str | None:
    """None when ``model`` is a registry model of type ``kind``, else why not: its actual
    type when it has another, or that it is unknown; with the known models of ``kind``."""
    try:
        registry.get(model, kind)
    except WrongModelType as exc:
        return str(exc)
    except UnknownModel:
        return f"unknown model {model!r}; known {kind} models: {', '.join(registry.names(kind)) or '(none)'}"
    return None


class RegistryEmbedder:
    """Embeddings with the registry's ``embedding`` models (module docstring).

    ``retries`` / ``backoff_s``: see :data:`RETRIES`, :data:`BACKOFF_S` (tests lower them).
    """

    def __init__(
        self,
        registry: ModelRegistry,
        *,
        retries: int = RETRIES,
        backoff_s: float = BACKOFF_S,
        token_budget: int = BATCH_TOKEN_BUDGET,
    ) -> None:
        self._registry, self.retries, self.backoff_s, self.token_budget = (
            registry,
            retries,
            backoff_s,
            token_budget,
        )

    @property
    def registry(self) -> Any:
        """The registry of the tenant whose knowledge operation runs here
        (:data:`engine.knowledge.scope.TENANT_MODELS`), else the one given."""
        return TENANT_MODELS.get() or self._registry

    def has_model(self, model: str) -> bool:
        """True when ``model`` is a registry model of type ``embedding``."""
        return self.registry.has(model, "embedding")

    def names(self) -> list[str]:
        """The embedding models a dataset may name."""
        return self.registry.names("embedding")

    def spec(self, model: str) -> ModelSpec:
        """The registry entry of embedding model ``model``. Raises EmbeddingError (naming
        the model and the known embedding models)."""
        try:
            return self.registry.get(model, "embedding")
        except UnknownModel as exc:
            raise EmbeddingError(str(exc)) from None

    async def embed(self, model: str, texts: Sequence[str]) -> EmbeddingBatch:
        """Vectors for ``texts`` in input order, with the tokens the endpoint counted (an
        estimate when it reports none) and their cost. Raises EmbeddingError,
        DimensionMismatch (vectors of another length than the model's ``dimension``, or
        of different lengths)."""
        spec = self.spec(model)
        out = EmbeddingBatch(vectors=[])
        for start, end in _batches(texts, spec.max_batch, self.token_budget):
            vectors, tokens = await self._request(spec, list(texts[start:end]))
            out.vectors.extend(vectors)
            out.tokens += tokens
            out.cost += price(spec, tokens, 0)
        dims = {len(v) for v in out.vectors}
        expected = spec.dimension
        if len(dims) > 1 or (expected is not None and dims and dims != {expected}):
            raise DimensionMismatch(
                f"embedding model {model!r} answered vectors of {sorted(dims)} dimensions; "
                f"expected {expected if expected is not None else 'one length'}"
            )
        return out

    async def _request(self, spec: ModelSpec, texts: list[str]) -> tuple[list[list[float]], int]:
        try:
            client = self.registry.client_for(spec)
        except Exception as exc:
            raise EmbeddingError(f"embedding model {spec.name!r}: {exc}") from None

        body = {"model": spec.model, "input": texts, "encoding_format": "base64"}

        async def call() -> bytes:
            # The client's raw request (its documented way to any endpoint, with the same
            # auth, timeouts and status errors): CPU per text, not per request, is what a
            # batch pays in the typed ``embeddings.create``, which walks every input string
            # through its transform and builds a model per answered vector; the raw body is
            # read with json and numpy instead (together ~0.1 ms of CPU per text)
            raw = await client.post("/embeddings", body=body, cast_to=httpx.Response)
            return raw.content

        with telemetry().model_span("embeddings", spec.name) as span:
            try:
                response = await _with_retries(
                    "embedding",
                    spec.name,
                    call,
                    retries=self.retries,
                    backoff_s=self.backoff_s,
                    url=f"{self.registry.base_url(spec).rstrip('/')}/embeddings",
                )
            except EmbeddingError:
                telemetry().model_call(
                    model=spec.name, provider=spec.provider, outcome="embedding_error", usage=None
                )
                span.fail("embedding_error")
                raise
            return self._vectors(spec, texts, response, span)

    def _vectors(
        self, spec: ModelSpec, texts: list[str], body: bytes, span: Span
    ) -> tuple[list[list[float]], int]:
        """The vectors and tokens of an embeddings answer ``body`` (OpenAI's JSON) to
        ``texts`` (counted in telemetry). Raises EmbeddingError (not that JSON, another
        number of vectors, a malformed vector)."""
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
            raise EmbeddingError(f"embedding model {spec.name!r} answered no list of embeddings")
        if len(data) != len(texts):
            raise EmbeddingError(
                f"embedding model {spec.name!r} answered {len(data)} vectors for {len(texts)} texts"
            )
        data.sort(key=lambda d: d.get("index") if isinstance(d.get("index"), int) else 0)
        vectors = _vectors_of(spec.name, [d.get("embedding") for d in data])
        usage = payload.get("usage") if isinstance(payload, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        try:
            tokens = int(usage.get("prompt_tokens") or usage.get("total_tokens") or 0)
        except (TypeError, ValueError):
            tokens = 0
        counted = tokens or sum(_estimate(t) for t in texts)
        telemetry().model_call(
            model=spec.name,
            provider=spec.provider,
            outcome="ok",
            usage=Usage(
                model=spec.name,
                tokens_in=counted,
                token_source="provider" if tokens else "estimated",
                cost=price(spec, counted, 0),
                calls=1,
            ),
        )
        span.model_result(
            provider=spec.provider,
            usage=Usage(
                model=spec.name, tokens_in=counted, token_source="provider" if tokens else "estimated"
            ),
        )
        return vectors, counted


def _vectors_of(model: str, embeddings: list[Any]) -> list[list[float]]:
    """The answered embeddings as floats, in order (see :func:`_vector`): base64 vectors of
    one length are decoded as one array (one finiteness check, one ``tolist``); anything
    else item by item. Raises EmbeddingError."""
    import numpy as np

    if embeddings and all(isinstance(e, str) for e in embeddings):
        try:
            raws = [base64.b64decode(e, validate=True) for e in embeddings]
        except (binascii.Error, ValueError):
            raise EmbeddingError(f"embedding model {model!r} answered a malformed vector") from None
        size = len(raws[0])
        if size and size % 4 == 0 and all(len(r) == size for r in raws):
            array = np.frombuffer(b"".join(raws), dtype="<f4").reshape(len(raws), size // 4)
            if not np.isfinite(array).all():
                raise EmbeddingError(f"embedding model {model!r} answered an empty or non-finite vector")
            return array.tolist()
    return [_vector(model, e) for e in embeddings]


def _vector(model: str, embedding: Any) -> list[float]:
    """One answered embedding as floats: a base64 string of little-endian float32 (what
    was asked) or a list of numbers (servers that ignore ``encoding_format``). Raises
    EmbeddingError for an empty, malformed or non-finite vector."""
    import numpy as np

    try:
        if isinstance(embedding, str):
            raw = base64.b64decode(embedding, validate=True)
            array = np.frombuffer(raw, dtype="<f4")
        else:
            array = np.asarray(embedding if embedding is not None else [], dtype=np.float64)
    except (binascii.Error, ValueError, TypeError):
        raise EmbeddingError(f"embedding model {model!r} answered a malformed vector") from None
    if array.ndim != 1 or not array.size or not np.isfinite(array).all():
        raise EmbeddingError(f"embedding model {model!r} answered an empty or non-finite vector")
    # lists, the Embedder port's shape: tolist() is one C loop (~0.3 ms for 64 x 384)
    return array.tolist()


class RegistryReranker:
    """Rerank with the registry's ``rerank`` models (module docstring)."""

    def __init__(
        self, registry: ModelRegistry, *, retries: int = RETRIES, backoff_s: float = BACKOFF_S
    ) -> None:
        self._registry, self.retries, self.backoff_s = registry, retries, backoff_s

    @property
    def registry(self) -> Any:
        """The registry of the tenant whose knowledge operation runs here
        (:data:`engine.knowledge.scope.TENANT_MODELS`), else the one given."""
        return TENANT_MODELS.get() or self._registry

    def has_model(self, model: str) -> bool:
        """True when ``model`` is a registry model of type ``rerank``."""
        return self.registry.has(model, "rerank")

    def model_problem(self, model: str) -> str | None:
        """None when ``model`` is a rerank model of the registry, else why not: unknown,
        or its actual type (an embedding or chat model), with the known rerank models."""
        return model_problem(self.registry, model, "rerank")

    async def rerank(
        self, model: str, query: str, documents: Sequence[str], top_n: int | None = None
    ) -> tuple[list[tuple[int, float]], int]:
        """``([(input index, relevance in [0, 1])...] best first, tokens)``. Raises
        RerankError (unknown model, failed endpoint, an answer naming no document)."""
        try:
            return await self._rerank(model, query, documents, top_n)
        except RerankError:
            raise
        except EmbeddingError as exc:  # the shared endpoint helpers raise the general kind
            raise RerankError(str(exc)) from None

    async def _rerank(
        self, model: str, query: str, documents: Sequence[str], top_n: int | None
    ) -> tuple[list[tuple[int, float]], int]:
        try:
            spec = self.registry.get(model, "rerank")
            key = self.registry.api_key(spec)
        except Exception as exc:
            raise EmbeddingError(str(exc)) from None
        if not documents:
            return [], 0
        base = self.registry.base_url(spec).rstrip("/")
        body: dict[str, Any] = {"model": spec.model, "query": query, "documents": list(documents)}
        if top_n is not None:
            body["top_n"] = top_n
        headers = {"authorization": f"Bearer {key}"} if key else {}

        async def call() -> Any:
            async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=10.0)) as client:
                response = await client.post(f"{base}/rerank", json=body, headers=headers)
                response.raise_for_status()
                return response.json()

        payload = await _with_retries(
            "rerank", spec.name, call, retries=self.retries, backoff_s=self.backoff_s, url=f"{base}/rerank"
        )
        return _rerank_results(spec.name, payload, len(documents)), _rerank_tokens(payload, query, documents)


def _rerank_results(model: str, payload: Any, count: int) -> list[tuple[int, float]]:
    results = payload.get("results") if isinstance(payload, dict) else None
    if not isinstance(results, list):
        raise EmbeddingError(f"rerank model {model!r} answered no results list")
    found: list[tuple[int, float]] = []
    for item in results:
        try:
            index = int(item["index"])
            score = float(item.get("relevance_score", item.get("score")))
        except (KeyError, TypeError, ValueError):
            raise EmbeddingError(
                f"rerank model {model!r} answered a result without index and relevance_score"
            ) from None
        if not 0 <= index < count:
            raise EmbeddingError(f"rerank model {model!r} answered index {index} for {count} documents")
        found.append((index, min(1.0, max(0.0, score))))
    found.sort(key=lambda pair: -pair[1])
    return found


def _rerank_tokens(payload: dict[str, Any], query: str, documents: Sequence[str]) -> int:
    usage = payload.get("usage") or payload.get("meta", {}).get("billed_units") or {}
    tokens = usage.get("total_tokens") or usage.get("prompt_tokens") or usage.get("search_units")
    try:
        return (
            int(tokens)
            if tokens
            else _estimate(query) * len(documents) + sum(_estimate(d) for d in documents)
        )
    except (TypeError, ValueError):
        return 0
