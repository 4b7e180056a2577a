"""``/v1/datasets``: the caller's tenant's knowledge bases, through the knowledge service.

- ``POST /v1/datasets`` (``DatasetCreate``; 409 when the id is taken), ``GET /v1/datasets``,
  ``GET/PATCH/DELETE /v1/datasets/{id}``: datasets. A new ``embedding_model`` in a
  ``PATCH`` re-indexes the dataset (searches keep the old index until the new one is ready).
- ``POST /v1/datasets/{id}/documents``: add documents, as multipart files (field
  ``files``, repeatable; optional ``metadata``: a JSON object given to each) or as JSON
  ``{name, text, metadata}``. One outcome per file: ``created`` (queued for ingestion),
  ``unchanged`` (same name and bytes already there) or ``rejected`` with its own
  ``status`` (413 over the per-document cap, 422 unreadable) while the other files are
  kept. The answer is 202 when at least one file was kept; when every file was rejected
  it is the error itself: 413 when each was too large, else 422, with every file's
  outcome in ``problems``.
- ``GET /v1/datasets/{id}/documents``, ``GET/DELETE .../documents/{doc_id}``,
  ``POST .../documents/{doc_id}/reindex`` (202: queued again).
- ``GET .../documents/{doc_id}/chunks`` (``offset``, ``limit``): the chunk preview, a
  page of the document's chunks in position order with their total.
- ``POST /v1/datasets/{id}/search``: hit testing, the ranked hits with their scores.
- ``GET /v1/datasets/{id}/events``: SSE of the documents' ingestion (``progress`` events
  ``{document_id, source_name, status, chunks_done, chunk_count, error}``) until every
  document (or the ``document_id`` ones) is ``ready`` or ``failed``, then ``done``.

Who may do what: datasets belong to the tenant, not to an app. A key of the whole
tenant does everything; a key scoped to an app may read and search (its app's
workflows search the tenant's datasets anyway) and gets 403 for every change. Another
tenant's dataset or document is 404 exactly as one that does not exist.

Quotas: embedding tokens count in the tenant's tokens per day (:mod:`api.quotas`); a
tenant whose tokens are used up gets 429 for uploads, re-indexing, a change of
embedding model and searches, before any model is called.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from engine.knowledge.ports import DatasetNotFound, DocumentNotFound, DocumentRejected
from engine.knowledge.service import DocumentOutcome, Upload, duplicate_name
from engine.shapes import key_remedy, missing_key_env
from nodes.llm.call import LLMError
from schemas.api import ErrorBody
from schemas.api_knowledge import (
    ChunkOut,
    ChunkPage,
    DatasetCreated,
    DatasetList,
    DatasetOut,
    DatasetSearch,
    DatasetSearchResult,
    DatasetWarning,
    DocumentList,
    DocumentOut,
    DocumentProgress,
    DocumentRejection,
    DocumentText,
    DocumentUploadItem,
    DocumentUploadResult,
)
from schemas.knowledge import DatasetCreate, DatasetUpdate, DocumentStatus
from schemas.knowledge_search import SearchMode

from ..auth import Caller, Knowledge, Principal
from ..deployment import Heartbeat, Service
from ..errors import ApiError, parse_body
from ..openapi import SSE_CONTENT
from ..sse import EventStreamResponse, Frame, event_stream
from .quotas import Policy as QuotaPolicy

if TYPE_CHECKING:
    from engine.service import RunService

__all__ = ["MAX_UPLOAD_FILES", "router"]

#: files one upload may carry (each becomes a document)
MAX_UPLOAD_FILES = 100

_E: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (401, 403, 404, 422)}
_QUOTA: dict[int | str, dict[str, Any]] = {
    429: {"model": ErrorBody, "description": "the tenant's tokens per day are used up (`Retry-After`)"}
}
router = APIRouter(prefix="/v1/datasets", tags=["datasets"], responses=_E)

#: what a stored id can look like; anything else is 404 without a query (ids are made of these)
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
DatasetId = Annotated[str, Path(min_length=1, max_length=200, description="the dataset's id")]
DocumentId = Annotated[str, Path(min_length=1, max_length=200, description="the document's id")]
_DONE = (DocumentStatus.ready, DocumentStatus.failed)


def _dataset_id(dataset_id: str) -> str:
    if not _ID.match(dataset_id):
        raise DatasetNotFound(f"no dataset {dataset_id!r}")
    return dataset_id


def _document_id(document_id: str) -> str:
    if not _ID.match(document_id):
        raise DocumentNotFound(f"no document {document_id!r}")
    return document_id


def _writable(caller: Principal) -> None:
    """Changes need a key of the whole tenant. Raises ApiError 403 for an app key."""
    if caller.app_id is not None:
        raise ApiError(
            403,
            "forbidden",
            f"this key is scoped to app {caller.app_id!r}: changing datasets needs a key of the whole tenant",
        )


async def _tokens_left(quotas: QuotaPolicy, caller: Principal) -> None:
    """Raises QuotaExceeded (429) when the tenant's (or the key's app's) tokens per day are used up."""
    await quotas.check_tokens(caller.tenant_id, caller.app_id)


# -------------------------------------------------------------------- datasets


@router.post(
    "",
    status_code=201,
    response_model=DatasetCreated,
    summary="Create a dataset",
    responses={409: {"model": ErrorBody}},
)
async def create_dataset(
    body: DatasetCreate, caller: Caller, knowledge: Knowledge, service: Service
) -> DatasetCreated:
    """A new, empty dataset. ``embedding_model`` must be a registry model with an
    embeddings endpoint (422 otherwise; none: full-text search only). 409 when ``id`` is
    taken. ``warnings`` names an embedding model whose provider key this deployment
    lacks: the dataset is made, but its documents would fail at embedding until it is set;
    and another dataset of the tenant with the same name (``duplicate_name``: made all the
    same, as ids tell datasets apart, but the canvas lists them by name)."""
    _writable(caller)
    dataset = await knowledge.create_dataset(caller.tenant_id, body)
    created = DatasetCreated(**dataset.model_dump(exclude={"tenant_id"}))
    namesakes = await knowledge.namesakes(caller.tenant_id, dataset)
    if namesakes:
        created.warnings.append(
            DatasetWarning(
                code="duplicate_name",
                message=f"{duplicate_name(dataset.name, namesakes)}; rename one with "
                f'PATCH /v1/datasets/{{id}} {{"name": ...}}',
                field="name",
            )
        )
    model = dataset.embedding_model
    models = await service.models_of(caller.tenant_id) if model is not None else None
    if models is None or model is None:
        return created
    variable = missing_key_env(models, model, service.settings.environ())
    if variable is not None:
        created.warnings.append(
            DatasetWarning(
                code="missing_api_key",
                message=f"embedding model {model!r} needs an API key in {variable}, which is not set "
                f"in this deployment ({key_remedy(models, model, variable)}); documents added before "
                f"then fail at embedding (afterwards: POST /v1/datasets/{dataset.id}/documents/"
                f"{{document_id}}/reindex)",
                field="embedding_model",
                variable=variable,
            )
        )
    return created


@router.get("", response_model=DatasetList, summary="List the tenant's datasets")
async def list_datasets(caller: Caller, knowledge: Knowledge) -> DatasetList:
    """By name, with document and chunk counts."""
    return DatasetList(datasets=[DatasetOut.of(d) for d in await knowledge.list_datasets(caller.tenant_id)])


@router.get("/{dataset_id}", response_model=DatasetOut, summary="A dataset")
async def get_dataset(dataset_id: DatasetId, caller: Caller, knowledge: Knowledge) -> DatasetOut:
    """Its settings, indexes and counts."""
    return DatasetOut.of(await knowledge.get_dataset(caller.tenant_id, _dataset_id(dataset_id)))


@router.patch("/{dataset_id}", response_model=DatasetOut, summary="Change a dataset", responses=_QUOTA)
async def update_dataset(
    dataset_id: DatasetId, body: DatasetUpdate, caller: Caller, knowledge: Knowledge, quotas: QuotaPolicy
) -> DatasetOut:
    """Only the fields given change. A new ``embedding_model`` builds a new index of every
    document (searches keep the old one until it is ready; it spends embedding tokens:
    429 when the tenant's are used up); new ``chunking`` applies to documents added or
    re-indexed later."""
    _writable(caller)
    dataset_id = _dataset_id(dataset_id)
    if body.embedding_model is not None:
        await knowledge.get_dataset(caller.tenant_id, dataset_id)  # 404 before 429
        await _tokens_left(quotas, caller)
    return DatasetOut.of(await knowledge.update_dataset(caller.tenant_id, dataset_id, body))


@router.delete("/{dataset_id}", status_code=204, summary="Delete a dataset")
async def delete_dataset(dataset_id: DatasetId, caller: Caller, knowledge: Knowledge) -> Response:
    """With its documents, chunks, indexes and vectors."""
    _writable(caller)
    await knowledge.delete_dataset(caller.tenant_id, _dataset_id(dataset_id))
    return Response(status_code=204)


# ------------------------------------------------------------------- documents

_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["files"],
                    "properties": {
                        "files": {
                            "type": "array",
                            "items": {"type": "string", "format": "binary"},
                            "description": "the files (txt, md, html, pdf, docx, csv or jsonl QA pairs)",
                        },
                        "metadata": {
                            "type": "string",
                            "description": "JSON object: metadata given to every file",
                        },
                    },
                }
            },
            "application/json": {"schema": DocumentText.model_json_schema()},
        },
    }
}


def _item(outcome: DocumentOutcome) -> DocumentUploadItem:
    """One file's outcome as the API shows it."""
    if outcome.error is not None:
        error: DocumentRejected = outcome.error
        return DocumentUploadItem(
            source_name=outcome.source_name,
            outcome="rejected",
            error=DocumentRejection(status=error.status, reason=error.reason, message=str(error)),
        )
    document = DocumentOut.of(outcome.document) if outcome.document is not None else None
    return DocumentUploadItem(
        source_name=outcome.source_name,
        outcome="created" if outcome.created else "unchanged",
        document=document,
    )


def _metadata(raw: Any) -> dict[str, Any]:
    """The form's ``metadata`` field as an object. Raises ApiError 422."""
    if raw is None or raw == "":
        return {}
    try:
        value = json.loads(str(raw))
    except ValueError as exc:
        raise ApiError(422, "invalid_request", f"metadata: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ApiError(422, "invalid_request", "metadata: must be a JSON object")
    return value


async def _uploads(request: Request) -> list[Upload]:
    """The files of a multipart upload as ``Upload``s. Raises ApiError 422 without files."""
    form = await request.form(max_files=MAX_UPLOAD_FILES, max_fields=MAX_UPLOAD_FILES + 10)
    try:
        metadata = _metadata(form.get("metadata"))
        files = [f for name in ("files", "file") for f in form.getlist(name) if not isinstance(f, str)]
        if not files:
            raise ApiError(
                422,
                "invalid_request",
                "send the documents as multipart files in the field `files` "
                '(repeatable), or one text as JSON {"name", "text", '
                '"metadata"}',
            )
        uploads = []
        for index, upload in enumerate(files):
            # the name only, never a client's path (``C:\\docs\\a.pdf``, ``../a.pdf``)
            name = (upload.filename or "").replace("\\", "/").rsplit("/", 1)[-1] or f"file-{index + 1}"
            uploads.append(Upload(name=name, data=await upload.read(), metadata=dict(metadata)))
        return uploads
    finally:
        await form.close()  # spooled temporary files are removed now, not at garbage collection


def _all_rejected(items: list[DocumentUploadItem]) -> ApiError:
    """The error of an upload none of whose files was kept: 413 when each was too large, else 422."""
    statuses = {item.error.status for item in items if item.error is not None}
    status = 413 if statuses == {413} else 422
    first = items[0].error.message if items[0].error is not None else ""
    return ApiError(
        status,
        "payload_too_large" if status == 413 else "invalid_document",
        # each rejection's message starts with its file's name already
        f"no document was kept ({len(items)} rejected); first: {first}",
        problems=[item.model_dump(mode="json", exclude={"document"}) for item in items],
    )


@router.post(
    "/{dataset_id}/documents",
    status_code=202,
    response_model=DocumentUploadResult,
    openapi_extra=_UPLOAD_BODY,
    summary="Add documents (files or a text)",
    responses={
        413: {"model": ErrorBody, "description": "every file was over the per-document cap"},
        422: {
            "model": ErrorBody,
            "description": "no file was kept (each one's reason in `problems`), or no file was sent",
        },
        **_QUOTA,
    },
)
async def add_documents(
    dataset_id: DatasetId, caller: Caller, knowledge: Knowledge, quotas: QuotaPolicy, request: Request
) -> DocumentUploadResult:
    """Each file is kept or rejected on its own (module docstring); kept ones are queued
    for ingestion (follow them with ``GET .../events``). Re-sending the same bytes under
    the same name changes nothing; new bytes under a known name re-ingest that document."""
    _writable(caller)
    dataset_id = _dataset_id(dataset_id)
    await knowledge.get_dataset(caller.tenant_id, dataset_id)  # 404 before anything is read or refused
    await _tokens_left(quotas, caller)
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        outcomes = await knowledge.add_documents(caller.tenant_id, dataset_id, await _uploads(request))
    else:
        text = parse_body(
            await request.body(),
            DocumentText,
            'send the files as multipart `files`, or JSON {"name", "text", "metadata"}: ',
        )
        outcomes = [
            await knowledge.add_text(caller.tenant_id, dataset_id, text.name, text.text, text.metadata)
        ]
    items = [_item(o) for o in outcomes]
    if items and all(item.outcome == "rejected" for item in items):
        raise _all_rejected(items)
    rejected = sum(1 for item in items if item.outcome == "rejected")
    return DocumentUploadResult(documents=items, accepted=len(items) - rejected, rejected=rejected)


@router.get("/{dataset_id}/documents", response_model=DocumentList, summary="The dataset's documents")
async def list_documents(dataset_id: DatasetId, caller: Caller, knowledge: Knowledge) -> DocumentList:
    """Oldest first, each with its ingestion status and progress."""
    found = await knowledge.list_documents(caller.tenant_id, _dataset_id(dataset_id))
    return DocumentList(documents=[DocumentOut.of(d) for d in found])


@router.get("/{dataset_id}/documents/{document_id}", response_model=DocumentOut, summary="A document")
async def get_document(
    dataset_id: DatasetId, document_id: DocumentId, caller: Caller, knowledge: Knowledge
) -> DocumentOut:
    """Its status (``failed`` with ``error``), chunk counts and metadata."""
    return DocumentOut.of(
        await knowledge.get_document(caller.tenant_id, _dataset_id(dataset_id), _document_id(document_id))
    )


@router.delete("/{dataset_id}/documents/{document_id}", status_code=204, summary="Delete a document")
async def delete_document(
    dataset_id: DatasetId, document_id: DocumentId, caller: Caller, knowledge: Knowledge
) -> Response:
    """With its chunks and vectors: searches no longer find it."""
    _writable(caller)
    await knowledge.delete_document(caller.tenant_id, _dataset_id(dataset_id), _document_id(document_id))
    return Response(status_code=204)


@router.get(
    "/{dataset_id}/documents/{document_id}/chunks",
    response_model=ChunkPage,
    summary="A page of a document's chunks (chunk preview)",
)
async def document_chunks(
    dataset_id: DatasetId,
    document_id: DocumentId,
    caller: Caller,
    knowledge: Knowledge,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
) -> ChunkPage:
    """The chunks from ``offset`` (at most ``limit``), in position order, with their
    total: what ingestion made of the document. Empty (``total`` 0) until it is split."""
    chunks, total = await knowledge.document_chunks(
        caller.tenant_id, _dataset_id(dataset_id), _document_id(document_id), offset=offset, limit=limit
    )
    return ChunkPage(chunks=[ChunkOut.of(c) for c in chunks], offset=offset, limit=limit, total=total)


@router.post(
    "/{dataset_id}/documents/{document_id}/reindex",
    status_code=202,
    response_model=DocumentOut,
    summary="Ingest a document again",
    responses=_QUOTA,
)
async def reindex_document(
    dataset_id: DatasetId, document_id: DocumentId, caller: Caller, knowledge: Knowledge, quotas: QuotaPolicy
) -> DocumentOut:
    """Split it again with the dataset's current chunking and embed what changed (chunks
    whose text is unchanged keep their vectors); queued like a new document."""
    _writable(caller)
    dataset_id, document_id = _dataset_id(dataset_id), _document_id(document_id)
    await knowledge.get_document(caller.tenant_id, dataset_id, document_id)  # 404 before 429
    await _tokens_left(quotas, caller)
    return DocumentOut.of(await knowledge.reindex_document(caller.tenant_id, dataset_id, document_id))


# ---------------------------------------------------------------------- search


@router.post(
    "/{dataset_id}/search",
    response_model=DatasetSearchResult,
    summary="Search the dataset (hit testing)",
    responses={
        **_QUOTA,
        502: {"model": ErrorBody, "description": "an embeddings, rerank or relevance model failed"},
        503: {
            "model": ErrorBody,
            "description": "a model the search needs lacks its key (`missing_api_key`)",
        },
    },
)
async def search_dataset(
    dataset_id: DatasetId,
    body: DatasetSearch,
    caller: Caller,
    knowledge: Knowledge,
    quotas: QuotaPolicy,
    service: Service,
) -> DatasetSearchResult:
    """The hits a ``knowledge_retrieval`` node would get for this query: best first,
    ``score`` in [0, 1] with each recall pass's own in ``scores``. Semantic and hybrid
    searches embed the query (tokens counted in the tenant's quota). 422 ``invalid_request``
    naming ``query`` when neither ``query`` nor ``queries`` has text, and naming
    ``rerank.model`` / ``rerank.llm`` when it is not a rerank / chat model of the
    registry (checked before any model call)."""
    dataset_id = _dataset_id(dataset_id)
    if not any(q.strip() for q in [body.query, *body.queries]):
        # a node's query may resolve to nothing at run time (it notes so); a hit test with
        # nothing to search is a mistake of the request
        raise ApiError(
            422, "invalid_request", "query: required (the text to search for; or `queries`: a list)"
        )
    dataset = await knowledge.get_dataset(caller.tenant_id, dataset_id)  # 404 before 429
    await _keys_present(service, caller, dataset.embedding_model, body)
    await _tokens_left(quotas, caller)
    try:
        result = await knowledge.search(caller.tenant_id, body.of_dataset(dataset_id))
    except LLMError as exc:  # the relevance pass's chat model (rerank.llm)
        raise ApiError(502, "model_error", f"the relevance pass failed: {exc}") from None
    spent = result.embedding_tokens + result.rerank_tokens + result.llm_tokens_in + result.llm_tokens_out
    await quotas.record_tokens(caller.tenant_id, spent, result.cost, app_id=caller.app_id, source="search")
    return DatasetSearchResult.of(result)


async def _keys_present(
    service: RunService, caller: Principal, embedding: str | None, body: DatasetSearch
) -> None:
    """Raise 503 ``missing_api_key`` (as a run start does) when a model the search must call
    lacks its provider key in this deployment: the dataset's embedding model for a semantic
    search (a hybrid one falls back to full text, saying so), the rerank and relevance models.
    Checked before any model call, so nothing is spent on a search that cannot finish."""
    named: list[tuple[str, str | None]] = (
        [("embedding_model", embedding)] if body.mode == SearchMode.semantic else []
    )
    if body.rerank is not None:
        named += [("rerank.model", body.rerank.model), ("rerank.llm", body.rerank.llm)]
    wanted = [(field, model) for field, model in named if model]
    if not wanted:
        return
    models = await service.models_of(caller.tenant_id)
    if models is None:  # no registry: the search itself says which model is unknown
        return
    for field, model in wanted:
        variable = missing_key_env(models, model, service.settings.environ())
        if variable is not None:
            raise ApiError(
                503,
                "missing_api_key",
                f"{field}: model {model!r} needs an API key in {variable}, which this deployment does not "
                f"set ({key_remedy(models, model, variable)}; the environment of the server: restart it "
                "after setting it); nothing was searched",
            )


# ---------------------------------------------------------------------- events

_PROGRESS_SSE = {
    "description": "server-sent events: `progress` (data: DocumentProgress) per change, then `done` "
    "`{dataset_id, ready, failed}`; an `error` event if following fails",
    "content": SSE_CONTENT,
}


async def _progress(
    knowledge: Any, tenant_id: str, dataset_id: str, document_ids: list[str] | None, poll_s: float
) -> AsyncIterator[Frame]:
    last: dict[str, DocumentProgress] = {}
    async for document in knowledge.follow(tenant_id, dataset_id, document_ids, poll_s=poll_s):
        progress = DocumentProgress.of(document)
        if last.get(document.id) != progress:
            last[document.id] = progress
            yield "progress", None, progress.model_dump(mode="json")
    ready = sum(1 for p in last.values() if p.status is DocumentStatus.ready)
    failed = sum(1 for p in last.values() if p.status is DocumentStatus.failed)
    yield "done", None, {"dataset_id": dataset_id, "ready": ready, "failed": failed}


@router.get(
    "/{dataset_id}/events",
    response_class=Response,
    responses={200: _PROGRESS_SSE},
    summary="Ingestion progress of the dataset's documents (SSE)",
)
async def dataset_events(
    dataset_id: DatasetId,
    caller: Caller,
    knowledge: Knowledge,
    heartbeat_s: Heartbeat,
    document_id: Annotated[
        list[str] | None,
        Query(max_length=MAX_UPLOAD_FILES, description="follow only these documents (repeatable)"),
    ] = None,
) -> Response:
    """A ``progress`` event for each document as it is now, then one per change (status
    or chunks embedded), until each is ``ready`` or ``failed``; then ``done``."""
    dataset_id = _dataset_id(dataset_id)
    await knowledge.get_dataset(caller.tenant_id, dataset_id)  # 404 as JSON, before the stream
    ids = [_document_id(d) for d in document_id] if document_id else None
    for one in ids or ():
        await knowledge.get_document(caller.tenant_id, dataset_id, one)
    frames = _progress(knowledge, caller.tenant_id, dataset_id, ids, poll_s=min(0.2, heartbeat_s))
    return EventStreamResponse(event_stream(frames, heartbeat_s))
