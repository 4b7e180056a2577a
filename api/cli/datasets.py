"""``flowloom datasets create | list | show | rm | add | reindex | search``: knowledge bases from the
command line, on the same stores and knowledge service as the HTTP API (``rm --document``
deletes documents, as ``DELETE /v1/datasets/{id}/documents/{doc_id}`` does).

``--tenant`` names the tenant (default ``default``). Ingestion: with
``FLOWLOOM_REDIS_URL`` set, ``add`` queues the documents for ``flowloom worker``
processes and returns (``--wait`` follows them to the end); without it (the embedded
default) the documents are ingested in this process before ``add`` exits, with a
progress bar under ``--wait`` and a line per document otherwise, so nothing is left
half-ingested behind a command that returned. A document left unfinished all the same
(Ctrl-C, a crash) is ingested again from where it stopped by the next ``add`` of the
dataset or by ``flowloom serve``. A document whose ingestion failed (a provider key
missing at the time) is ingested again when the same file is added again, or by
``reindex`` (``--failed``: every failed document of the dataset).

Exit codes: 0 done; 1 a document failed during ingestion (``add``, ``reindex``); 2 bad input, an
unknown dataset or document, a file rejected (unreadable, over the size cap), a
configuration problem, a deletion not confirmed (``rm``: nothing deleted).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from .common import (
    EXIT_INVALID,
    EXIT_OK,
    JsonFlag,
    SynonymGroup,
    abort,
    app,
    err,
    out,
    print_columns,
    settings,
    write_json,
)
from .running import with_service

__all__ = ["add", "create", "list_datasets", "reindex", "remove", "search", "show"]

datasets_app = typer.Typer(
    cls=SynonymGroup,
    help="Knowledge bases: datasets, their documents (ingested into chunks and vectors), and searches.",
    no_args_is_help=True,
)
app.add_typer(datasets_app, name="datasets")

TenantOption = Annotated[str, typer.Option("--tenant", help="the tenant of the datasets")]
DatasetArg = Annotated[str, typer.Argument(metavar="ID", help="the dataset's id (`flowloom datasets list`)")]


def _when(seconds: float | None) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) if seconds else "-"


async def _knowledge_errors(
    body: Any, service: Any = None, tenant: str = "default", dataset_id: str | None = None
) -> int:
    """``await body`` with the knowledge bases' errors as one line each and exit 2; an
    unknown ``dataset_id`` (one of several, comma-separated: the one the error names) is
    told the tenant's closest dataset id, when one is close."""
    from engine.knowledge.ports import (
        DatasetExists,
        DatasetNotFound,
        DocumentNotFound,
        DocumentRejected,
        EmbeddingError,
        VectorSearchUnavailable,
    )
    from engine.knowledge.retrieval import InvalidRerank
    from engine.knowledge.service import InvalidDataset

    try:
        return await body
    except InvalidRerank as exc:  # the field is --rerank-model's
        abort("invalid search:", [str(exc).replace("rerank.model", "--rerank-model", 1)])
    except (DatasetNotFound, DocumentNotFound) as exc:
        line = str(exc)
        # the id the error names: the whole comma-separated list is close to none of them
        named = [i for i in (dataset_id or "").split(",") if i and repr(i.strip()) in line]
        if isinstance(exc, DatasetNotFound) and service is not None and named and "did you mean" not in line:
            from engine.plain_errors import did_you_mean

            line += did_you_mean(
                named[0].strip(), [d.id for d in await service.knowledge.list_datasets(tenant)]
            )
        scope = f" --tenant {tenant}" if tenant != "default" else ""
        listing = (
            [f"list datasets with: flowloom datasets list{scope}"] if isinstance(exc, DatasetNotFound) else []
        )
        abort("not found:", [line, *listing])
    except (DatasetExists, InvalidDataset) as exc:
        abort("invalid dataset:", [str(exc)])
    except (DocumentRejected, VectorSearchUnavailable, EmbeddingError) as exc:
        abort("cannot do that:", [str(exc)])


def _run(body: Any, tenant: str = "default", dataset_id: str | None = None) -> None:
    """Run ``body(knowledge, service)`` on the configured stores for ``tenant`` (and
    ``dataset_id``, named when it is not found); exit with its code."""

    async def main(service: Any) -> int:
        return await _knowledge_errors(body(service.knowledge, service), service, tenant, dataset_id)

    raise typer.Exit(with_service(main, knowledge=True))


async def _warn_missing_key(service: Any, tenant: str, dataset: Any) -> None:
    """Say on stderr when the embedding model of ``dataset`` (a ``Dataset``) has a provider
    that needs a key this environment lacks: the dataset is made, but every document added
    to it would fail at embedding, long after the command that could have said so."""
    model = dataset.embedding_model
    if model is None:
        return
    from engine.shapes import key_remedy, missing_key_env

    models = await service.models_of(tenant)
    variable = missing_key_env(models, model, settings().environ()) if models is not None else None
    if variable is None:
        return
    err().print(
        Text.assemble(
            ("warning", "bold yellow"),
            f": embedding model {model!r} needs an API key in {variable}, which is not set here "
            f"({key_remedy(models, model, variable)}); documents added before then fail at "
            f"embedding (afterwards: flowloom datasets reindex {dataset.id} --failed)",
        )
    )


def _dataset_row(d: Any) -> tuple[str, ...]:
    index = d.active_index.embedding_model if d.active_index else ("building" if d.building_index else "-")
    return (
        d.id,
        d.name,
        d.embedding_model or "full text only",
        str(d.document_count),
        str(d.chunk_count),
        index,
        _when(d.updated_at),
    )


# -------------------------------------------------------------------- commands


@datasets_app.command()
def create(
    name: Annotated[str, typer.Argument(metavar="NAME", help="the dataset's name")],
    embedding_model: Annotated[
        str | None,
        typer.Option(
            "--embedding-model",
            help="a registry model of type embedding (default: none, full-text search only)",
        ),
    ] = None,
    chunk_tokens: Annotated[
        int | None, typer.Option("--chunk-tokens", help="largest chunk, in tokens (default 512)")
    ] = None,
    overlap: Annotated[
        int | None, typer.Option("--overlap", help="tokens neighbouring chunks share (default 64)")
    ] = None,
    description: Annotated[str, typer.Option("--description", help="what the dataset holds")] = "",
    dataset_id: Annotated[
        str | None, typer.Option("--id", help="the dataset's id (default: generated)")
    ] = None,
    tenant: TenantOption = "default",
    as_json: JsonFlag = False,
) -> None:
    """Create an empty dataset."""
    from pydantic import ValidationError

    from schemas.knowledge import ChunkingSettings, DatasetCreate

    chunking: dict[str, int] = {}
    if chunk_tokens is not None:
        chunking["chunk_tokens"] = chunk_tokens
    if overlap is not None:
        chunking["overlap_tokens"] = overlap
    try:
        request = DatasetCreate(
            name=name,
            description=description,
            embedding_model=embedding_model,
            chunking=ChunkingSettings(**chunking),
            id=dataset_id,
        )
    except ValidationError as exc:
        abort("invalid dataset:", [_problem(e) for e in exc.errors()])

    async def body(knowledge: Any, service: Any) -> int:
        await _tenant(service, tenant)
        dataset = await knowledge.create_dataset(tenant, request)
        if as_json:
            write_json(dataset.model_dump(mode="json", exclude={"tenant_id"}))
            return EXIT_OK
        out().print(dataset.id)
        what = (
            f"embedding model {dataset.embedding_model}"
            if dataset.embedding_model
            else "full-text search only"
        )
        err().print(
            Text.assemble(
                ("dataset created", "bold green"),
                f": {dataset.name} ({what}); add documents with: flowloom datasets add {dataset.id} FILE...",
            )
        )
        await _warn_missing_key(service, tenant, dataset)
        await _warn_namesakes(knowledge, tenant, dataset)
        return EXIT_OK

    _run(body)


async def _warn_namesakes(knowledge: Any, tenant: str, dataset: Any) -> None:
    """Say on stderr when another dataset of ``tenant`` has the name of ``dataset``: made all
    the same (ids tell them apart), but the canvas picks datasets by name."""
    from engine.knowledge.service import duplicate_name

    others = await knowledge.namesakes(tenant, dataset)
    if others:
        err().print(Text.assemble(("warning", "bold yellow"), f": {duplicate_name(dataset.name, others)}"))


def _problem(error: Any) -> str:
    """``field: what is wrong`` for one pydantic error."""
    from engine.plain_errors import plain_message

    where = ".".join(str(part) for part in error.get("loc", ()))
    return f"{where}: {plain_message(error)}" if where else plain_message(error)


async def _tenant(service: Any, tenant: str) -> None:
    """Make sure ``tenant`` exists (datasets belong to one)."""
    from api.app import key_store_of

    await key_store_of(service).ensure_tenant(tenant)


@datasets_app.command("list")
def list_datasets(tenant: TenantOption = "default", as_json: JsonFlag = False) -> None:
    """The tenant's datasets: model, documents, chunks."""

    async def body(knowledge: Any, service: Any) -> int:
        found = await knowledge.list_datasets(tenant)
        if as_json:
            write_json([d.model_dump(mode="json", exclude={"tenant_id"}) for d in found])
        elif not found:
            out().print(f"no dataset for tenant {tenant}; create one with: flowloom datasets create NAME")
        else:
            print_columns(
                ("ID", "NAME", "EMBEDDING MODEL", "DOCUMENTS", "CHUNKS", "INDEX", "UPDATED"),
                [_dataset_row(d) for d in found],
            )
        return EXIT_OK

    _run(body)


@datasets_app.command()
def show(dataset_id: DatasetArg, tenant: TenantOption = "default", as_json: JsonFlag = False) -> None:
    """A dataset with its settings and its documents' ingestion status."""

    async def body(knowledge: Any, service: Any) -> int:
        dataset = await knowledge.get_dataset(tenant, dataset_id)
        documents = await knowledge.list_documents(tenant, dataset_id)
        if as_json:
            write_json(
                {
                    **dataset.model_dump(mode="json", exclude={"tenant_id"}),
                    "documents": [d.model_dump(mode="json", exclude={"tenant_id"}) for d in documents],
                }
            )
            return EXIT_OK
        console = out()
        console.print(Text.assemble(("dataset ", "bold"), dataset.id, f"  {dataset.name}"))
        chunking = dataset.chunking
        for label, value in (
            ("description", dataset.description or "-"),
            ("embedding model", dataset.embedding_model or "none (full-text search only)"),
            ("active index", _index(dataset.active_index)),
            ("building index", _index(dataset.building_index)),
            (
                "chunking",
                f"{chunking.chunk_tokens} tokens, overlap {chunking.overlap_tokens}"
                + (", parent-child" if chunking.parent_child else ""),
            ),
            ("documents", f"{dataset.document_count}, {dataset.chunk_count} chunks"),
        ):
            console.print(Text(f"  {label}: {value}"))
        if documents:
            print_columns(
                ("DOCUMENT", "NAME", "TYPE", "STATUS", "CHUNKS", "ERROR"),
                [
                    (
                        d.id,
                        d.source_name,
                        d.content_type,
                        str(d.status),
                        f"{d.chunks_done}/{d.chunk_count}",
                        d.error or "",
                    )
                    for d in documents
                ],
            )
        return EXIT_OK

    _run(body, tenant, dataset_id)


def _index(index: Any) -> str:
    if index is None:
        return "-"
    dimension = f", {index.dimension} dimensions" if index.dimension else ""
    return f"{index.embedding_model} ({index.state}{dimension})"


@datasets_app.command("rm")
def remove(
    dataset_id: DatasetArg,
    documents: Annotated[
        list[str] | None,
        typer.Option(
            "--document",
            "-d",
            metavar="DOC",
            help="delete only this document (its id or file name, `flowloom datasets show ID`); repeatable",
        ),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="delete a dataset that holds documents without asking")
    ] = False,
    tenant: TenantOption = "default",
) -> None:
    """Delete a dataset with its documents, chunks and vectors; or, with --document, only
    those documents. On a terminal, a dataset that holds documents is deleted only once
    confirmed (or with --yes)."""

    async def body(knowledge: Any, service: Any) -> int:
        if documents:
            return await _remove_documents(knowledge, tenant, dataset_id, documents)
        dataset = await knowledge.get_dataset(tenant, dataset_id)
        if dataset.document_count and not yes and _stdin_is_terminal():
            import asyncio

            question = (
                f"delete dataset {dataset_id} ({dataset.name}) with its {dataset.document_count} document(s)?"
            )
            if not await asyncio.to_thread(typer.confirm, question, default=False, err=True):
                err().print(Text("nothing was deleted", style="dim"))
                return EXIT_INVALID
        await knowledge.delete_dataset(tenant, dataset_id)
        err().print(Text.assemble((f"dataset {dataset_id} deleted", "bold yellow")))
        return EXIT_OK

    _run(body, tenant, dataset_id)


def _stdin_is_terminal() -> bool:
    """Whether a person can answer a question here (scripts and pipes are not asked)."""
    import sys

    return sys.stdin.isatty()


async def _remove_documents(knowledge: Any, tenant: str, dataset_id: str, wanted: list[str]) -> int:
    """Delete the documents ``wanted`` names (ids or file names) from the dataset; every name
    is resolved before any is deleted, so a typo deletes nothing (DocumentNotFound, with the
    closest name)."""
    from engine.knowledge.ports import DocumentNotFound
    from engine.plain_errors import did_you_mean

    held = await knowledge.list_documents(tenant, dataset_id)
    by_key = {d.id: d for d in held} | {d.source_name: d for d in held}
    missing = [w for w in dict.fromkeys(wanted) if w not in by_key]
    if missing:
        names = [d.source_name for d in held]
        raise DocumentNotFound(
            f"document {missing[0]!r} not found in dataset {dataset_id!r}{did_you_mean(missing[0], names)}"
            f" (its documents: `flowloom datasets show {dataset_id}`)"
        )
    for document in {by_key[w].id: by_key[w] for w in wanted}.values():
        await knowledge.delete_document(tenant, dataset_id, document.id)
        err().print(
            Text.assemble(("  deleted ", "yellow"), (document.source_name, "bold"), f"  {document.id}")
        )
    left = (await knowledge.get_dataset(tenant, dataset_id)).document_count
    out().print(f"dataset {dataset_id} now holds {left} document(s)")
    return EXIT_OK


@datasets_app.command()
def add(
    dataset_id: DatasetArg,
    files: Annotated[
        list[Path],
        typer.Argument(metavar="FILE", help="files: txt, md, html, pdf, docx, csv or jsonl QA pairs"),
    ],
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="show each document's progress until it is ingested (with "
            "FLOWLOOM_REDIS_URL: wait for the workers)",
        ),
    ] = False,
    tenant: TenantOption = "default",
    as_json: JsonFlag = False,
) -> None:
    """Add documents to a dataset and ingest them.

    A file already there with the same name and bytes is left as it is, unless its
    ingestion failed: it is ingested again. Without FLOWLOOM_REDIS_URL the documents are
    ingested in this process before the command returns; with it, `flowloom worker`
    processes ingest them and the command returns at once unless --wait. Exit 0 when
    every document is ingested, 1 when one failed, 2 when a file was refused."""
    from .datasets_add import add_files

    _run(
        lambda knowledge, service: add_files(
            knowledge, service, tenant, dataset_id, files, wait=wait, as_json=as_json
        ),
        tenant,
        dataset_id,
    )


@datasets_app.command()
def reindex(
    dataset_id: DatasetArg,
    document_ids: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="DOC_ID",
            help="the documents to ingest again (default: every document of the dataset; "
            "ids from `flowloom datasets show ID`)",
        ),
    ] = None,
    failed: Annotated[
        bool, typer.Option("--failed", help="only the documents whose ingestion failed")
    ] = False,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="show each document's progress until it is ingested (with "
            "FLOWLOOM_REDIS_URL: wait for the workers)",
        ),
    ] = False,
    tenant: TenantOption = "default",
    as_json: JsonFlag = False,
) -> None:
    """Ingest documents again: after a failure (a provider key set since) or a change of
    chunking settings. Chunks whose text did not change keep their vectors. Runs like
    `add` (in this process without FLOWLOOM_REDIS_URL) with its exit codes: 0 every
    document ingested, 1 one failed, 2 an unknown dataset or document."""
    from .datasets_add import reindex_documents

    _run(
        lambda knowledge, service: reindex_documents(
            knowledge,
            service,
            tenant,
            dataset_id,
            document_ids or [],
            failed_only=failed,
            wait=wait,
            as_json=as_json,
        ),
        tenant,
        dataset_id,
    )


@datasets_app.command()
def search(
    dataset_id: Annotated[
        str,
        typer.Argument(
            metavar="ID[,ID...]",
            help="the dataset's id (`flowloom datasets list`); several, comma-separated, are searched together",
        ),
    ],
    query: Annotated[str, typer.Argument(metavar="QUERY", help="what to look for")],
    mode: Annotated[
        str,
        typer.Option(
            "--mode", help="semantic, full_text or hybrid (semantic and hybrid need an embedding model)"
        ),
    ] = "hybrid",
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=200, help="hits to return")] = 5,
    fusion: Annotated[
        str, typer.Option("--fusion", help="how a hybrid search merges its passes: rrf or weighted")
    ] = "rrf",
    semantic_weight: Annotated[
        float | None,
        typer.Option("--semantic-weight", help="weighted fusion: the semantic score's weight (0-1)"),
    ] = None,
    score_threshold: Annotated[
        float | None,
        typer.Option("--score-threshold", help="the least cosine (weighted fusion: fused score) a hit needs"),
    ] = None,
    rerank_model: Annotated[
        str | None, typer.Option("--rerank-model", help="rerank the hits with this registry rerank model")
    ] = None,
    max_quote_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-quote-tokens",
            help="the hits' token budget, as a node's quote limit: hits past it are left out "
            "(default 3000; 0: no budget, every one of --top-k)",
        ),
    ] = None,
    tenant: TenantOption = "default",
    as_json: JsonFlag = False,
) -> None:
    """Search a dataset, or several together (hit testing): the hits with their scores, best
    first, merged as a knowledge_retrieval node over those datasets merges them."""
    from pydantic import ValidationError

    from schemas.knowledge import SearchRequest

    options: dict[str, Any] = {"fusion": fusion}
    if semantic_weight is not None:
        options["semantic_weight"] = semantic_weight
    if score_threshold is not None:
        options["score_threshold"] = score_threshold
    if rerank_model is not None:
        options["rerank"] = {"model": rerank_model}
    if max_quote_tokens is not None:
        options["max_quote_tokens"] = max_quote_tokens
    if not query.strip():  # as the API's hit testing: a search of nothing is a mistake of the command
        abort("invalid search:", ["query: required (the text to search for)"])
    try:
        ids = [part.strip() for part in dataset_id.split(",") if part.strip()]  # ids hold no comma
        request = SearchRequest(dataset_ids=ids, query=query, mode=mode, top_k=top_k, **options)
    except ValidationError as exc:
        abort("invalid search:", [_problem(e) for e in exc.errors()])

    async def body(knowledge: Any, service: Any) -> int:
        result = await knowledge.search(tenant, request)
        if as_json:
            write_json(result.model_dump(mode="json"))
            return EXIT_OK
        for note in result.notes:
            err().print(Text(f"note: {note}", style="yellow"))
        if not result.hits:
            out().print("no hit")
            return EXIT_OK
        console = out()
        for rank, hit in enumerate(result.hits, 1):
            passes = ", ".join(f"{name} {value:.3f}" for name, value in hit.scores.items())
            console.print(
                Text.assemble(
                    (f"{rank}. ", "bold"),
                    (f"{hit.score:.3f}", "bold cyan"),
                    f"  {hit.dataset_id}: " if len(request.dataset_ids) > 1 else "  ",
                    f"{hit.source_name} #{hit.position}",
                    f"  {' > '.join(hit.heading_path)}" if hit.heading_path else "",
                    (f"  ({passes})" if passes else "", "dim"),
                )
            )
            preview = " ".join(hit.text.split())
            console.print(Text(f"   {preview[:300]}{'...' if len(preview) > 300 else ''}"))
        if result.embedding_tokens:
            err().print(Text(f"{result.embedding_tokens} embedding tokens", style="dim"))
        return EXIT_OK

    _run(body, tenant, dataset_id)
