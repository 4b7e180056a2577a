"""Errors of the HTTP API: one JSON shape, the real status, never a traceback.

Every error response is ``{"error": {"type", "message", "problems"?}}``
(:class:`schemas.api.ErrorBody`); an error raised after an SSE stream started becomes
an ``error`` event with the same data. :func:`describe` maps Flowloom's exceptions:

=====================================================  ======  =====================
exception                                              status  ``type``
=====================================================  ======  =====================
:class:`ApiError`                                      its     its
``CompileError``                                       422     ``invalid_workflow``
``InvalidInputs``                                      422     ``invalid_inputs``
``MissingModelKey`` (a model key the deployment lacks) 503     ``missing_api_key``
``UnknownDatasets`` (a searched dataset is missing)    422     ``unknown_dataset``
``InvalidAnswer`` (an answer that fits no option/field) 422    ``invalid_answer``
request validation, a body that cannot be parsed       422     ``invalid_request``
:class:`BodyRefused` (too deep, a lone surrogate)      422     ``invalid_request``
a body over ``max_request_bytes``                      413     ``payload_too_large``
a quota exceeded (:mod:`api.quotas`, ``Retry-After``)   429     ``quota_exceeded``
``RunNotFound``, ``KeyNotFound``, ``TenantNotFound``   404     ``not_found``
``RunNotResumable``, ``UnknownInterrupt``, ``RunOwned`` 409    ``conflict``
``WorkflowNotFound``                                   404    ``not_found``
``StaleVersion`` (+ ``current_version``), ``WorkflowExists`` 409 ``conflict``
``DatasetNotFound``, ``DocumentNotFound``              404    ``not_found``
``DatasetExists``                                      409    ``conflict``
``InvalidDataset`` (not an embedding model, no pgvector) 422   ``invalid_dataset``
``DocumentRejected``                                   413/422 ``payload_too_large`` / ``invalid_document``
``VectorSearchUnavailable`` (no pgvector)              422    ``vector_search_unavailable``
``InvalidRerank`` (a rerank / relevance model wrong)    422    ``invalid_request``
``EmbeddingError`` (an embeddings endpoint failed)     502    ``embedding_error``
``RerankError`` (a rerank endpoint failed)             502    ``rerank_error``
``QueueUnavailable`` (Redis away, ``Retry-After: 5``)  503    ``queue_unavailable``
``RunInterrupted`` (the store failed mid-run, ``Retry-After: 5``) 503 ``run_interrupted``
other ``StoreError``                                   503     ``store_error``
anything else                                          500     ``internal_error``
=====================================================  ======  =====================

An invalid request's message names each field at fault and what is wrong
(``messages: field required``, :func:`validation_message`), never pydantic's model
names; a JSON body sent as ``text/plain`` is told to send ``Content-Type:
application/json``, bytes that are not UTF-8 are said to be so, a body that is not
JSON says where it stops being JSON (``body is not valid JSON (at character 13):
expecting value``), one nested too deep names the limit.

On the OpenAI-compatible paths (``/v1/chat/completions``, ``/v1/models``) every
error, whoever raises it, is OpenAI's ``{"error": {message, type, code, param}}``
(:func:`openai_error`); the body-size middleware answers there the same way.

Another tenant's run or key is ``not_found``, exactly as a run that does not exist.
An unexpected exception is logged (type, message and stack, never request headers,
so never an API key) and answered with a generic message: its text may hold data the
caller must not see.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.errors import (
    CompileError,
    FlowloomError,
    InvalidInputs,
    MissingModelKey,
    UnknownDatasets,
    UnknownInterrupt,
)
from engine.execution import RunInterrupted
from engine.frontdoor import InvalidAnswer
from engine.knowledge.ports import (
    DatasetExists,
    DatasetNotFound,
    DocumentNotFound,
    DocumentRejected,
    EmbeddingError,
    RerankError,
    VectorSearchUnavailable,
)
from engine.knowledge.retrieval import InvalidRerank
from engine.knowledge.service import InvalidDataset
from engine.plain_errors import did_you_mean
from engine.ports import (
    ChatNotFound,
    KeyNotFound,
    QueueUnavailable,
    RunNotFound,
    RunOwned,
    StaleVersion,
    StoreError,
    TenantNotFound,
    WorkflowExists,
    WorkflowNotFound,
)
from engine.service import RunNotResumable

from .json_body import MAX_JSON_DEPTH, json_depth_over, lone_surrogate_path, may_hold_surrogate

__all__ = [
    "OPENAI_PATHS",
    "OPENAI_ROOT_PARTS",
    "ApiError",
    "BodyRefused",
    "body_message",
    "body_problem",
    "compile_message",
    "describe",
    "error_body",
    "field_path",
    "install_error_handlers",
    "is_json_type",
    "is_openai_path",
    "logger",
    "openai_error",
    "parse_body",
    "shaped_error",
    "validation_message",
]

logger = logging.getLogger("flowloom.api")

_Model = TypeVar("_Model", bound=BaseModel)

_STATUS_TYPES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    422: "invalid_request",
    429: "quota_exceeded",
}


class ApiError(Exception):
    """An error the API answers as it is: ``status``, ``type``, ``message`` and headers
    (e.g. ``WWW-Authenticate`` on a 401)."""

    def __init__(
        self,
        status: int,
        type: str,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        problems: list[Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.type, self.message = status, type, message
        self.headers = headers or {}
        self.problems = problems


class BodyRefused(StarletteHTTPException):
    """422: a JSON body the parser accepts but the API cannot use (nested deeper than
    :data:`~api.json_body.MAX_JSON_DEPTH`, a lone surrogate), found while the body is
    read (:class:`api.limits.JsonBodyCheck`). An HTTP exception, so FastAPI lets it
    through its body parsing untouched and the handlers answer it with ``problems``."""

    def __init__(self, message: str, problems: list[dict[str, Any]]) -> None:
        super().__init__(422, message)
        self.problems = problems


def body_problem(raw: bytes, suspect: bool | None = None) -> BodyRefused | None:
    """What makes the JSON body ``raw`` unusable though it parses, else None: nesting over
    :data:`~api.json_body.MAX_JSON_DEPTH`, or the field holding a lone surrogate (named
    by its path, ``messages[0].content``). ``suspect``: whether ``raw`` holds a surrogate
    escape (None: look). A body that is not JSON at all is left to the parser's message."""
    if json_depth_over(raw):
        message = (
            f"body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep "
            f"(the limit of a request body)"
        )
        return BodyRefused(message, [{"loc": ["body"], "message": message, "code": "too_deep"}])
    if suspect is None:
        suspect = may_hold_surrogate(raw)
    if not suspect:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    path = lone_surrogate_path(data)
    if path is None:
        return None
    loc: list[Any] = ["body", *path]
    what = (
        "text holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape), which is not a "
        "character; send valid Unicode text"
    )
    return BodyRefused(
        f"{field_path(loc) or 'body'}: {what}", [{"loc": loc, "message": what, "code": "lone_surrogate"}]
    )


def error_body(type: str, message: str, problems: list[Any] | None = None) -> dict[str, Any]:
    """``{"error": {...}}`` (``problems`` only when given)."""
    detail: dict[str, Any] = {"type": type, "message": message}
    if problems is not None:
        detail["problems"] = problems
    return {"error": detail}


def describe(exc: BaseException) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, body, headers)`` of the response for ``exc`` (table in the module docstring).
    Logs unexpected exceptions."""
    if isinstance(exc, ApiError):
        return exc.status, error_body(exc.type, exc.message, exc.problems), exc.headers
    if isinstance(exc, StarletteHTTPException):  # raised where no handler answers it (a body over the cap)
        return (
            exc.status_code,
            error_body(
                _STATUS_TYPES.get(exc.status_code, "http_error"),
                str(exc.detail),
                getattr(exc, "problems", None),
            ),
            dict(exc.headers or {}),
        )
    if isinstance(exc, CompileError):
        errors = [p for p in exc.problems if p.severity == "error"]
        return (
            422,
            error_body("invalid_workflow", compile_message(errors), [p.to_dict() for p in exc.problems]),
            {},
        )
    if isinstance(exc, InvalidInputs):
        return 422, error_body("invalid_inputs", "the inputs do not fit the workflow", list(exc.problems)), {}
    if isinstance(exc, InvalidAnswer):
        return 422, error_body("invalid_answer", str(exc), list(exc.problems)), {}
    if isinstance(exc, MissingModelKey):  # the deployment's to fix, not the caller's: nothing ran
        # the environment meant is the server's (and its workers'), read when they start
        message = (
            f"{exc} (the environment or .env of the server and its workers: restart them after setting it)"
        )
        return 503, error_body("missing_api_key", message, [p.to_dict() for p in exc.problems]), {}
    if isinstance(exc, UnknownDatasets):  # the tenant's to fix (make the dataset): nothing ran
        return 422, error_body("unknown_dataset", str(exc), [p.to_dict() for p in exc.problems]), {}
    if isinstance(exc, QueueUnavailable):
        return 503, error_body("queue_unavailable", str(exc)), {"Retry-After": "5"}
    if isinstance(exc, (RunNotFound, KeyNotFound, TenantNotFound, ChatNotFound)):
        return 404, error_body("not_found", str(exc)), {}
    if isinstance(exc, WorkflowNotFound):
        return 404, error_body("not_found", str(exc)), {}
    if isinstance(exc, StaleVersion):
        return 409, {**error_body("conflict", str(exc)), "current_version": exc.current_version}, {}
    if isinstance(exc, WorkflowExists):  # the two ways on: change that one, or take another id
        message = f"{exc}: change it with PUT /v1/workflows/{{id}}, or give the document another id"
        return 409, error_body("conflict", message), {}
    if isinstance(exc, (RunNotResumable, UnknownInterrupt, RunOwned)):
        return 409, error_body("conflict", str(exc)), {}
    knowledge = _knowledge_error(exc)
    if knowledge is not None:
        return knowledge
    if isinstance(exc, RunInterrupted):  # the run's outcome is not stored yet: the client follows it again
        logger.error("run store problem: %s", exc)
        return 503, error_body("run_interrupted", exc.public), {"Retry-After": "5"}
    if isinstance(exc, StoreError):
        logger.error("run store problem: %s", exc)
        return 503, error_body("store_error", "the run store is not available; see the server log"), {}
    logger.error("internal error: %s: %s", type(exc).__name__, exc, exc_info=exc)
    return 500, error_body("internal_error", "internal error; the server log has the details"), {}


def _knowledge_error(exc: BaseException) -> tuple[int, dict[str, Any], dict[str, str]] | None:
    """The answer to an error of the knowledge bases (table in the module docstring), else None."""
    if isinstance(exc, (DatasetNotFound, DocumentNotFound)):
        return 404, error_body("not_found", str(exc)), {}
    if isinstance(exc, DatasetExists):
        return 409, error_body("conflict", str(exc)), {}
    if isinstance(exc, InvalidDataset):
        return (
            422,
            error_body(
                "invalid_dataset",
                str(exc),
                [{"loc": ["body", exc.field], "message": str(exc), "code": "invalid_dataset"}],
            ),
            {},
        )
    if isinstance(exc, DocumentRejected):
        kind = "payload_too_large" if exc.status == 413 else "invalid_document"
        return exc.status, error_body(kind, str(exc), [{"reason": exc.reason, "message": str(exc)}]), {}
    if isinstance(exc, VectorSearchUnavailable):
        return 422, error_body("vector_search_unavailable", str(exc)), {}
    if isinstance(exc, InvalidRerank):  # the caller's input, before any model call: not a 502
        return (
            422,
            error_body(
                "invalid_request",
                str(exc),
                [{"loc": ["body", *exc.field.split(".")], "message": str(exc), "code": "invalid_rerank"}],
            ),
            {},
        )
    if isinstance(exc, RerankError):
        logger.warning("rerank endpoint problem: %s", exc)
        return 502, error_body("rerank_error", str(exc)), {}
    if isinstance(exc, EmbeddingError):
        logger.warning("embeddings endpoint problem: %s", exc)
        return 502, error_body("embedding_error", str(exc)), {}
    return None


#: the OpenAI-compatible paths: every error of theirs is in OpenAI's shape (the
#: ``openai`` SDK and the tools built on it read ``error.code`` and ``error.param``)
OPENAI_PATHS = frozenset({"/v1/chat/completions", "/v1/models"})
#: first parts of the paths of OpenAI's API a client calls below its base URL: at the
#: root, they come from a client whose base URL lacks ``/v1`` (``OpenAI(base_url=
#: "http://127.0.0.1:8400")``), answered by a 404 saying so rather than by the canvas
OPENAI_ROOT_PARTS = frozenset({"models", "chat", "completions", "embeddings", "responses"})
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}
_OPENAI_CODES = {"unauthorized": "invalid_api_key", "not_found": "model_not_found"}


def is_openai_path(path: str) -> bool:
    """True for a path whose errors are OpenAI-shaped (:data:`OPENAI_PATHS`)."""
    return (path.rstrip("/") or "/") in OPENAI_PATHS


def _openai_root(path: str) -> bool:
    """True for a path of OpenAI's API without the ``/v1`` (``/models``, ``/chat/completions``)."""
    return path.lstrip("/").split("/", 1)[0] in OPENAI_ROOT_PARTS


def openai_error(
    status: int, body: dict[str, Any], headers: dict[str, str]
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, body, headers)`` of an error (:func:`describe`) in OpenAI's shape:
    ``{"error": {message, type, code, param, problems?}}``. ``code`` is Flowloom's
    ``type`` (``model_not_found``, ``payload_too_large``...), ``param`` the field of the
    first validation problem. Adds ``x-should-retry: false``: the SDK would otherwise
    retry 409 and 5xx, running a turn again."""
    error = body.get("error", {})
    code = error.get("code") or _OPENAI_CODES.get(error.get("type", ""), error.get("type"))
    problems = error.get("problems")
    message = _with_problems(error.get("message", "error"), problems)
    if error.get("type") == "invalid_inputs":  # the SDKs have no parameter for them: say where they go
        message += (
            ' (inputs go in the request body as "inputs"; with the openai SDK: extra_body={"inputs": {...}})'
        )
    detail: dict[str, Any] = {
        "message": message,
        "type": _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "api_error"),
        "code": code,
        "param": "inputs" if error.get("type") == "invalid_inputs" else _param(problems),
    }
    if error.get("problems") is not None:
        detail["problems"] = error["problems"]
    return status, {"error": detail}, {**headers, "x-should-retry": "false"}


def _with_problems(message: str, problems: Any) -> str:
    """``message`` followed by the problems given as text (the SDKs show only the message;
    ``problems`` stays in the body for clients that read it), at most five of them."""
    texts = [p for p in problems if isinstance(p, str)] if isinstance(problems, list) else []
    if not texts:
        return message
    more = f" (and {len(texts) - 5} more)" if len(texts) > 5 else ""
    return f"{message}: {'; '.join(texts[:5])}{more}"


def _param(problems: Any) -> str | None:
    """OpenAI's ``param``: the request field of the first validation problem (``messages``)."""
    if isinstance(problems, list) and problems and isinstance(problems[0], dict) and problems[0].get("loc"):
        path = field_path(problems[0]["loc"])
        return path if path and path != "body" else None  # the body as a whole is no parameter
    return None


def shaped_error(
    path: str, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The error as the endpoint at ``path`` answers it: OpenAI's shape on
    :data:`OPENAI_PATHS`, the API's own elsewhere."""
    if is_openai_path(path):
        return openai_error(status, body, dict(headers or {}))
    return status, body, dict(headers or {})


def _respond(
    request: Request, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> JSONResponse:
    status, body, headers = shaped_error(request.url.path, status, body, headers)
    return JSONResponse(body, status_code=status, headers=headers or None)


def compile_message(errors: list[Any]) -> str:
    """``the workflow has N problem(s)``, then the first one with its path (so a client
    that shows only the message still learns where: ``nodes[3].name: ...``). ``errors``:
    the error-severity problems (:class:`engine.errors.Problem`, or anything whose ``str``
    names its place)."""
    if not errors:
        return "the workflow has 0 problem(s)"
    first = str(errors[0])
    return f"the workflow has {len(errors)} problem(s); first: {first if len(first) <= 300 else first[:300] + '...'}"


#: pydantic's codes for "the value is not an object": pydantic's message may
#: name the model class, which the client never sees
_NOT_AN_OBJECT = frozenset({"dict_type", "model_type", "model_attributes_type"})


def _validation_problems(
    exc: RequestValidationError | ValidationError, prefix: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """Where and what, without the input values (a body may hold secrets). ``prefix``:
    ``("body",)`` for a body a route validated itself, so its ``loc`` reads as FastAPI's."""
    return [
        _json_invalid(error)
        if error.get("type") == "json_invalid"
        else {
            "loc": [*prefix, *(str(part) for part in error.get("loc", ()))],
            "message": _not_an_object(error) if error.get("type") in _NOT_AN_OBJECT else _in_words(error),
            "code": error.get("type", ""),
        }
        for error in exc.errors()
    ]


def _in_words(error: Any) -> str:
    """pydantic's message; a validator's own (``value_error``) without pydantic's "Value
    error, " before it; and for a value that must be one of a few (``literal_error``,
    ``enum``) the closest of them: ``Input should be 'semantic', 'full_text' or 'hybrid';
    did you mean 'full_text'?`` for ``fulltext``, as node configs and the CLI answer. The
    value sent is compared, never echoed (a body may hold secrets)."""
    message = str(error.get("msg", ""))
    if error.get("type") == "value_error":
        return message.removeprefix("Value error, ")
    if error.get("type") not in ("literal_error", "enum"):
        return message
    options = re.findall(r"'([^']*)'", str((error.get("ctx") or {}).get("expected", "")))
    return message + did_you_mean(error.get("input"), options)


def _not_an_object(error: Any) -> str:
    """The message of a value that should be an object; a ``workflow`` given as a string
    is most likely a saved workflow's id (only its type is looked at: values stay out)."""
    loc = error.get("loc") or ()
    if loc and loc[-1] == "workflow" and isinstance(error.get("input"), str):
        return (
            "Input should be a JSON object (the workflow document; a saved workflow runs by its "
            "id at POST /v1/workflows/{id}/runs)"
        )
    return "Input should be a JSON object"


def _json_invalid(error: Any) -> dict[str, Any]:
    """FastAPI's ``("body", position)`` problem of a body it could not parse, as the
    body's own problem: ``body is not valid JSON (at character 13): expecting value``
    (the position is a character offset, not a field)."""
    loc = error.get("loc", ())
    where = f" (at character {loc[-1]})" if loc and isinstance(loc[-1], int) else ""
    reason = str((error.get("ctx") or {}).get("error") or "")
    return {"loc": ["body"], "message": _not_json(where, reason), "code": "json_invalid"}


def _not_json(where: str, reason: str) -> str:
    """``body is not valid JSON (at character 13): expecting value``; a reason that names a
    place (``Unterminated string starting at``) gets it back, so it does not read cut off."""
    if reason.endswith(" at") and where:
        return f"body is not valid JSON: {reason[:1].lower()}{reason[1:]} {where.strip(' ()').removeprefix('at ')}"
    return f"body is not valid JSON{where}" + (f": {reason[:1].lower()}{reason[1:]}" if reason else "")


def field_path(loc: Sequence[Any]) -> str:
    """The field a validation error is about, as a client names it: ``messages``,
    ``messages[0].content``, ``query.limit``, ``body`` for the body as a whole (the
    ``body`` of a body field is left out: the body is the request's main part, its
    fields need no prefix)."""
    parts = list(loc[1:] if len(loc) > 1 and loc[0] == "body" else loc)
    text = ""
    for part in parts:
        if isinstance(part, int) or (isinstance(part, str) and part.isdigit()):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


#: problems of the body as a whole whose message says so itself
_WHOLE_BODY = frozenset({"json_invalid", "too_deep"})


#: what a field another API names (Dify's, a search's) is here: said after "extra inputs
#: are not permitted", since a client ported from Dify sends its own names
_FIELD_HINTS = {
    "workflow_id": "a saved workflow runs at POST /v1/workflows/{workflow_id}/runs",
    "query": "the user's message is `message`",
    "question": "the user's message is `message` (a dataset search's text is `query`)",
    "conversation_id": "a conversation is `chat_id`",
    "user": "the run's user is its API key's; a conversation is `chat_id`",
    "datasets_map": "it is `dataset_map`",
    "models_map": "it is `model_map`",
}


def _hinted(problem: dict[str, Any], text: str) -> str:
    """``text`` with the hint for a field this route does not take, when there is one."""
    loc = problem.get("loc") or []
    if problem.get("code") == "extra_forbidden" and loc and str(loc[-1]) in _FIELD_HINTS:
        return f"{text} ({_FIELD_HINTS[str(loc[-1])]})"
    return text


def _bare_workflow(problems: list[dict[str, Any]]) -> bool:
    """Whether the problems are those of a workflow document sent as the body itself, where a
    run start wants it under ``workflow``: ``workflow`` missing, ``nodes``/``edges`` unknown."""
    missing = any(
        p.get("code") == "missing" and list(p.get("loc") or [])[-1:] == ["workflow"] for p in problems
    )
    return missing and any(
        p.get("code") == "extra_forbidden" and list(p.get("loc") or [])[-1:] in (["nodes"], ["edges"])
        for p in problems
    )


def validation_message(problems: list[dict[str, Any]], limit: int = 3) -> str:
    """``field: what is wrong`` for the first ``limit`` problems (``_validation_problems``
    items), ``; ``-separated, then ``(+N more)``: the message alone says which field and
    why, instead of pydantic's ``1 validation error for <model>`` (a class the client
    never sees)."""
    if _bare_workflow(problems):
        return (
            "this body is a workflow document: send it wrapped as "
            '`{"workflow": <the document>, "inputs": {...}}` (a saved workflow runs at '
            "POST /v1/workflows/{id}/runs)"
        )
    parts = []
    for problem in problems[:limit]:
        if problem.get("code") in _WHOLE_BODY:  # its message names the body already
            parts.append(str(problem.get("message")))
            continue
        text = str(problem.get("message") or problem.get("code") or "invalid")
        text = _hinted(problem, text[:1].lower() + text[1:])
        where = field_path(problem.get("loc") or [])
        parts.append(f"{where}: {text}" if where else text)
    more = f" (+{len(problems) - limit} more)" if len(problems) > limit else ""
    return "; ".join(parts) + more if parts else "the request is not valid"


def is_json_type(content_type: str) -> bool:
    """``application/json`` or a ``+json`` type (what FastAPI parses as JSON); no type
    at all counts too (FastAPI then reads the body as JSON)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return not media or media == "application/json" or media.endswith("+json")


def _body_not_an_object(problems: list[dict[str, Any]]) -> bool:
    return any(p.get("loc") == ["body"] and p.get("code") in _NOT_AN_OBJECT for p in problems)


def body_message(problems: list[dict[str, Any]], content_type: str | None = None) -> str:
    """:func:`validation_message`, except for a body that is not an object because it
    was sent with a type that is not JSON (``text/plain``): FastAPI never parsed it,
    so the fix is the header, not the body."""
    if content_type is not None and not is_json_type(content_type) and _body_not_an_object(problems):
        media = content_type.split(";", 1)[0].strip()
        return f"send the body as JSON with `Content-Type: application/json` (this request's is `{media}`)"
    return validation_message(problems)


def parse_body(raw: bytes, model: type[_Model], lead: str = "") -> _Model:
    """``raw`` as UTF-8 JSON validated by ``model``, for a route that reads its body
    itself (to answer in its own terms or shape).

    Raises:
        ApiError: 422 ``invalid_request``, ``lead`` then what is wrong: not UTF-8, not
        JSON, or the fields at fault (with every problem).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(
            422,
            "invalid_request",
            f"{lead}the body is not UTF-8 JSON (byte {exc.start} is not "
            "UTF-8; send the text encoded as UTF-8)",
        ) from None
    refused = body_problem(raw)
    if refused is not None:
        raise ApiError(422, "invalid_request", lead + str(refused.detail), problems=refused.problems)
    try:
        data = json.loads(text or "null")
    except json.JSONDecodeError as exc:
        raise ApiError(
            422,
            "invalid_request",
            lead + _not_json(f" (at character {exc.pos})", exc.msg),
            problems=[
                {
                    "loc": ["body"],
                    "message": _not_json(f" (at character {exc.pos})", exc.msg),
                    "code": "json_invalid",
                }
            ],
        ) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = _validation_problems(exc, ("body",))
        raise ApiError(422, "invalid_request", lead + body_message(problems), problems=problems) from None


def _unparsable(request: Request, exc: StarletteHTTPException) -> str:
    """Why the framework could not parse the body (the cause of its 400)."""
    if isinstance(exc.__cause__, RecursionError):
        return f"body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep (the limit of a request body)"
    if is_json_type(request.headers.get("content-type", "")):
        return "the request body is not UTF-8 JSON (send the text encoded as UTF-8)"
    return f"the request body cannot be read: {exc.detail}"


#: Dify's routes a ported client calls, and what does their work here
_DIFY_ROUTES = {
    "/v1/chat-messages": "a chat turn is POST /v1/workflows/{id}/runs with `message` (and `chat_id` "
    "to continue), or POST /v1/chat/completions with the workflow id as `model`",
    "/v1/completion-messages": "a completion is POST /v1/workflows/{id}/runs with `message`, or POST "
    "/v1/chat/completions with the workflow id as `model`",
    "/v1/workflows/run": "a saved workflow runs at POST /v1/workflows/{id}/runs, a document at POST /v1/runs",
}


def _missing_route(path: str, method: str | None = None, base: str = "http://HOST:PORT/") -> str:
    """The message of a path no route serves (404: ``no route {path}``) or serves for
    other methods (405: ``{method} is not served at {path}``), and where the work is done
    when the path is another platform's, one of OpenAI's without ``/v1`` (``base``: the
    server's URL, ending in ``/``) or a near miss (``.../run``)."""
    hint = _DIFY_ROUTES.get(path.rstrip("/"))
    if hint is None and _openai_root(path):
        hint = (
            f"the OpenAI-compatible API is under /v1 (/v1/models, /v1/chat/completions): use the base "
            f'URL ending in /v1, {base}v1 (openai SDK: OpenAI(base_url="{base}v1"))'
        )
    if hint is None and path.rstrip("/").endswith("/run") and len(path) <= 200:
        hint = f"did you mean {path.rstrip('/')}s?"
    text = f"no route {path[:200]}" if method is None else f"{method} is not served at {path[:200]}"
    return f"{text}: {hint}" if hint else f"{text} (the routes are listed at /openapi.json)"


def install_error_handlers(app: FastAPI) -> None:
    """Answer every exception of ``app`` with the JSON error shape."""

    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = _validation_problems(exc)
        message = body_message(problems, request.headers.get("content-type", ""))
        return _respond(request, 422, error_body("invalid_request", message, problems))

    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            # only the framework raises 400 (a body it cannot parse: bytes that are not
            # UTF-8 for a JSON body, nesting past the parser's recursion, broken
            # multipart): an invalid request, answered as every other one
            return _respond(request, 422, error_body("invalid_request", _unparsable(request, exc)))
        kind = _STATUS_TYPES.get(exc.status_code, "http_error")
        message = str(exc.detail)
        if exc.status_code == 404 and message == "Not Found":  # no route: the router's own 404
            message = _missing_route(request.url.path, base=str(request.base_url))
        elif exc.status_code == 405 and message == "Method Not Allowed":
            message = _missing_route(request.url.path, request.method)
        return _respond(
            request,
            exc.status_code,
            error_body(kind, message, getattr(exc, "problems", None)),
            getattr(exc, "headers", None),
        )

    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        return _respond(request, *describe(exc))

    # Starlette types a handler's error as Exception; each of these is given its own class
    app.add_exception_handler(RequestValidationError, on_validation)  # type: ignore[arg-type]  # see above
    app.add_exception_handler(StarletteHTTPException, on_http)  # type: ignore[arg-type]  # see above
    for kind in (ApiError, FlowloomError):
        app.add_exception_handler(kind, on_error)
    app.add_middleware(_CatchAll)


class _CatchAll:
    """ASGI middleware: an exception no handler took becomes the JSON 500 (logged), not a
    re-raised error with a bare text body; once a response has started (a stream), it
    can only end the connection, so the routes turn their errors into SSE events first."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            status, body, headers = shaped_error(scope.get("path", ""), *describe(exc))
            if started:
                return
            await JSONResponse(body, status_code=status, headers=headers or None)(scope, receive, send)
