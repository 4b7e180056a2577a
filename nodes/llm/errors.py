"""The errors of a model call (:class:`LLMError` and its kinds) and the one table that
translates the ``openai`` SDK's exceptions into them (:data:`OPENAI_ERRORS`; a test checks
it lists every public SDK exception type).

Each error names the node and the model, has a stable ``reason``, and never contains the
API key (:func:`translate_error` redacts it and anything shaped like a key).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import openai

from engine.errors import NodeFailed
from schemas.run import Usage

__all__ = [
    "LLMAuthError",
    "LLMBadRequest",
    "LLMConnectionError",
    "LLMError",
    "LLMProviderError",
    "LLMRateLimited",
    "LLMStalled",
    "OPENAI_ERRORS",
    "call_subject",
    "translate_error",
]


class LLMError(NodeFailed):
    """A model call failed. ``model`` is the registry name; ``status_code`` the HTTP status
    (None when there was none); ``attempts`` how many requests were sent; ``usage`` the
    usage of output already streamed (None when nothing was); ``partial_text`` /
    ``partial_reasoning`` what was streamed before the failure ("" when nothing was), so
    a node can keep what it produced."""

    reason = "llm_error"
    #: Retried by ``call_llm`` when nothing was streamed yet.
    retryable = False

    def __init__(
        self,
        message: str,
        *,
        node_id: str | None = None,
        reason: str | None = None,
        model: str | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message, node_id=node_id, reason=reason)
        self.model = model
        self.status_code = status_code
        self.attempts = 1
        self.usage: Usage | None = None
        self.partial_text = ""
        self.partial_reasoning = ""


class LLMRateLimited(LLMError):
    """HTTP 429."""

    reason = "rate_limited"
    retryable = True


class LLMProviderError(LLMError):
    """The provider failed: 5xx, an error event inside the stream, a malformed frame."""

    reason = "provider_error"
    retryable = True


class LLMConnectionError(LLMError):
    """Could not connect, or the connection dropped mid-stream."""

    reason = "connection_error"
    retryable = True


class LLMStalled(LLMError):
    """No chunk arrived for ``idle_timeout`` seconds."""

    reason = "stalled"


class LLMBadRequest(LLMError):
    """The request cannot succeed as is: other 4xx (context too long, unknown model id),
    an unknown registry model, a capability the model lacks, messages that do not fit."""

    reason = "bad_request"


class LLMAuthError(LLMError):
    """401/403, or the provider's API-key environment variable is not set."""

    reason = "auth_failed"


#: openai exception type -> (our type, reason, what it means). Looked up along the
#: exception's MRO, so the most specific entry wins; every public openai exception type
#: is listed (a test checks this against the installed SDK).
OPENAI_ERRORS: dict[type[BaseException], tuple[type[LLMError], str, str]] = {
    openai.AuthenticationError: (LLMAuthError, "auth_failed", "the provider rejected the API key"),
    openai.OAuthError: (LLMAuthError, "auth_failed", "the provider rejected the credentials"),
    openai.PermissionDeniedError: (LLMAuthError, "permission_denied", "the API key may not use this model"),
    openai.RateLimitError: (LLMRateLimited, "rate_limited", "rate limited by the provider"),
    openai.InternalServerError: (LLMProviderError, "provider_error", "the provider failed"),
    openai.BadRequestError: (LLMBadRequest, "bad_request", "the provider refused the request"),
    openai.NotFoundError: (
        LLMBadRequest,
        "not_found",
        "not found (check the provider base_url and the model id)",
    ),
    openai.ConflictError: (LLMBadRequest, "bad_request", "the provider refused the request (conflict)"),
    openai.UnprocessableEntityError: (
        LLMBadRequest,
        "bad_request",
        "the provider could not process the request",
    ),
    openai.APIStatusError: (LLMBadRequest, "bad_request", "the provider refused the request"),
    openai.APITimeoutError: (LLMConnectionError, "connection_timeout", "timed out reaching the provider"),
    openai.APIConnectionError: (
        LLMConnectionError,
        "connection_error",
        "could not reach the provider or the connection dropped",
    ),
    openai.APIResponseValidationError: (
        LLMProviderError,
        "malformed_response",
        "the provider sent a malformed response",
    ),
    openai.APIError: (LLMProviderError, "provider_error", "the provider reported an error in the stream"),
    openai.LengthFinishReasonError: (LLMBadRequest, "output_truncated", "the output hit max_tokens"),
    openai.ContentFilterFinishReasonError: (
        LLMBadRequest,
        "content_filtered",
        "the provider's content filter stopped the reply",
    ),
    openai.WebSocketConnectionClosedError: (LLMConnectionError, "connection_error", "the connection closed"),
    openai.WebSocketQueueFullError: (
        LLMConnectionError,
        "connection_error",
        "the connection's send queue is full",
    ),
    openai.OpenAIError: (LLMError, "llm_error", "the OpenAI SDK failed"),
}

_CONTEXT_CODES = {"context_length_exceeded", "string_above_max_length"}
_SECRET_LIKE = re.compile(r"\b(?:sk|pk|rk|key|api[_-]?key)[-_][A-Za-z0-9*._\-]{6,}", re.IGNORECASE)


def _redact(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "[redacted]")
    return _SECRET_LIKE.sub("[redacted]", text)


def call_subject(node_id: str | None, model: str) -> str:
    return f"LLM call of node {node_id!r} to model {model!r}" if node_id else f"LLM call to model {model!r}"


def translate_error(
    exc: BaseException, *, model: str, node_id: str | None, secret: str | None = None
) -> LLMError | None:
    """The :class:`LLMError` for an openai exception (None when ``exc`` is not one)."""
    entry = next((OPENAI_ERRORS[cls] for cls in type(exc).__mro__ if cls in OPENAI_ERRORS), None)
    if entry is None:
        return None
    cls, reason, meaning = entry
    status = getattr(exc, "status_code", None)
    if type(exc) is openai.APIStatusError and status is not None and status >= 500:
        cls, reason, meaning = LLMProviderError, "provider_error", "the provider failed"
    code = getattr(exc, "code", None)
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping) and code is None:
        code = body.get("code")
    if cls is LLMBadRequest and (code in _CONTEXT_CODES or status == 413):
        reason, meaning = "context_length_exceeded", "the request is longer than the model's context window"
    detail = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    cause = exc.__cause__
    if isinstance(exc, openai.APIConnectionError) and cause is not None:
        detail = (
            f"{detail} ({type(cause).__name__}: {cause})"  # the SDK's own text is only "Connection error."
        )
    where = f"HTTP {status}" if status else type(exc).__name__
    message = (
        f"{call_subject(node_id, model)} failed: {meaning} ({where}): {_redact(str(detail), secret)[:500]}"
    )
    return cls(message, node_id=node_id, reason=reason, model=model, status_code=status)
