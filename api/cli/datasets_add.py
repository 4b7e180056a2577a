"""``flowloom datasets add``: read the files, add them to the dataset, follow their
ingestion (a rich progress bar per document under ``--wait``), report each file; and
``flowloom datasets reindex``: ingest documents of the dataset again, followed alike.

Where ingestion runs is said in :mod:`api.cli.datasets`: in this process without
``FLOWLOOM_REDIS_URL`` (``add`` returns when every document is ``ready`` or ``failed``),
on the workers with it (``add`` returns at once unless ``--wait``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.text import Text

from .common import EXIT_INVALID, EXIT_OK, EXIT_RUN_FAILED, err, out, write_json

__all__ = ["add_files", "chunks", "reindex_documents", "without_name"]

_FINAL = ("ready", "failed")
#: seconds between two checks that ingestion still runs here, and the idle checks that end following
_CHECK_S, _IDLE_CHECKS = 0.5, 4


def _read(paths: Sequence[Path], cap: int | None) -> tuple[list[Any], list[tuple[str, str]]]:
    """``(uploads, [(file, why it was not read)])``: a file over ``cap`` bytes is refused
    by its size, unread."""
    from engine.knowledge.service import Upload

    uploads, problems = [], []
    for path in paths:
        try:
            size = path.stat().st_size
            if not path.is_file():
                why = f"a folder: give its files (e.g. {path}/*)" if path.is_dir() else "not a file"
                problems.append((str(path), why))
                continue
            if cap is not None and size > cap:
                problems.append(
                    (str(path), f"too large: {size} bytes, the limit is {cap} bytes per document")
                )
                continue
            uploads.append(Upload(name=path.name, data=path.read_bytes()))
        except OSError as exc:
            problems.append((str(path), f"cannot read it: {exc.strerror or exc}"))
    return uploads, problems


def _idle_here(knowledge: Any) -> bool:
    """True when ingestion runs in this process and nothing is being ingested here."""
    from engine.knowledge.service import LocalIngestionQueue

    return isinstance(knowledge.queue, LocalIngestionQueue) and knowledge.queue.pending == 0


async def _follow(
    knowledge: Any, tenant: str, dataset_id: str, ids: list[str], *, bar: bool
) -> dict[str, Any]:
    """Follow the documents ``ids`` until each is ready or failed; their last state by id.
    ``bar``: a progress bar per document on stderr (chunks embedded of the total).

    With ingestion in this process, following also ends when nothing is being ingested
    here any more for a few checks (a document another process holds, or one whose
    ingestion stopped without an end): the command then says which are unfinished
    instead of waiting forever."""
    last: dict[str, Any] = {}
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
    )
    progress = Progress(*columns, console=err(), transient=False, disable=not bar)
    tasks: dict[str, Any] = {}

    async def consume() -> None:
        async for document in knowledge.follow(tenant, dataset_id, ids):
            last[document.id] = document
            task = tasks.get(document.id)
            if task is None:
                task = tasks[document.id] = progress.add_task(document.source_name, total=None, status="")
            progress.update(
                task,
                total=document.chunk_count or None,
                completed=document.chunks_done,
                status=str(document.status),
            )

    with progress:
        following = asyncio.create_task(consume())
        idle = 0
        while not following.done():
            await asyncio.wait({following}, timeout=_CHECK_S)
            idle = idle + 1 if not following.done() and _idle_here(knowledge) else 0
            if idle >= _IDLE_CHECKS:
                following.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await following
                break
        if following.done() and not following.cancelled():
            following.result()  # its errors (the dataset deleted meanwhile) are the command's
    return last


def _report(
    outcomes: list[Any],
    unread: list[tuple[str, str]],
    final: dict[str, Any],
    queued: bool,
    *,
    followed: bool,
    quiet: bool = False,
) -> int:
    """A line per file on stderr (none when ``quiet``); the exit code: 2 when a file was
    refused, 1 when a document failed in ingestion or was left unfinished (``followed``:
    the command waited for them), else 0."""
    console = err()
    console.quiet = quiet
    for name, why in unread:
        console.print(Text.assemble(("  ✗ ", "red"), (name, "bold"), f": {why}"))
    failed = unfinished = 0
    dataset_id = next((o.document.dataset_id for o in outcomes if o.document is not None), "ID")
    for outcome in outcomes:
        line, state = _outcome_line(outcome, final, queued, followed)
        console.print(line)
        failed += state == "failed"
        unfinished += state == "unfinished"
    if failed:
        console.print(
            Text(
                f"once the cause is fixed, ingest the failed documents again with: flowloom datasets "
                f"reindex {dataset_id} --failed --wait",
                style="dim",
            )
        )
    refused = len(unread) + sum(1 for o in outcomes if o.error is not None)
    return EXIT_INVALID if refused else EXIT_RUN_FAILED if failed or unfinished else EXIT_OK


def _outcome_line(outcome: Any, final: dict[str, Any], queued: bool, followed: bool) -> tuple[Text, str]:
    """The line of one uploaded file and its state: ``refused`` (not ingested), ``unfinished``
    (followed, not done), ``failed`` (in ingestion) or ``ok``."""
    if outcome.error is not None:
        reason = f": {without_name(str(outcome.error), outcome.source_name)} ({outcome.error.reason})"
        return Text.assemble(("  ✗ ", "red"), (outcome.source_name, "bold"), reason), "refused"
    document = final.get(outcome.document.id, outcome.document)
    status = str(document.status)
    if followed and status not in _FINAL:
        return Text.assemble(
            ("  … ", "yellow"),
            (outcome.source_name, "bold"),
            f": left {status} (ingestion stopped); continue it with `flowloom datasets "
            f"reindex {document.dataset_id} {document.id} --wait` or `flowloom serve`",
        ), "unfinished"
    if status == "failed":
        return Text.assemble(
            ("  ✗ ", "red"),
            (outcome.source_name, "bold"),
            f": ingestion failed: {document.error or 'no reason given'}",
        ), "failed"
    if _kind(outcome) == "continued":
        note = f"continued (its ingestion had not finished): {chunks(document.chunk_count) if status == 'ready' else status}"
    elif not outcome.created:
        note = "unchanged"
    elif status == "ready":
        note = chunks(document.chunk_count)
    else:
        note = f"{status} (for `flowloom worker`)" if queued else status
    if getattr(outcome, "retried", False):
        note = f"retried (its ingestion had failed): {note}"
    elif getattr(outcome, "changed", False):
        note = f"changed: {note}"
    return Text.assemble(("  ✓ ", "green"), (outcome.source_name, "bold"), f"  {document.id}  {note}"), "ok"


def _tally(outcomes: list[Any]) -> str:
    """``1 added, 2 unchanged``: what this command did to the dataset, by kind of outcome
    (the dataset's own count says the rest: a file of this call is one of many)."""
    kinds = {"added": 0, "changed": 0, "retried": 0, "continued": 0, "unchanged": 0, "refused": 0}
    for outcome in outcomes:
        kinds[_kind(outcome)] += 1
    return ", ".join(f"{count} {kind}" for kind, count in kinds.items() if count)


def _kind(outcome: Any) -> str:
    """What the upload of one file did: ``refused``, ``retried`` (its ingestion had
    failed), ``changed``, ``added``, ``continued`` (the same content, whose ingestion an
    earlier command or process left unfinished: it goes on now) or ``unchanged``."""
    if outcome.error is not None:
        return "refused"
    if getattr(outcome, "retried", False):
        return "retried"
    if getattr(outcome, "changed", False):
        return "changed"
    if outcome.created:
        return "added"
    return "unchanged" if str(outcome.document.status) in _FINAL else "continued"


def chunks(count: int) -> str:
    """``1 chunk``, ``3 chunks``."""
    return f"{count} chunk" if count == 1 else f"{count} chunks"


def without_name(message: str, name: str) -> str:
    """``message`` without a leading ``name: `` (the parser's messages name the file, which
    the CLI's line already shows first)."""
    prefix = f"{name}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def _json(outcomes: list[Any], unread: list[tuple[str, str]], final: dict[str, Any]) -> None:
    items: list[dict[str, Any]] = [
        {
            "source_name": name,
            "outcome": "rejected",
            "document": None,
            "error": {"status": 422, "reason": "unreadable", "message": why},
        }
        for name, why in unread
    ]
    for outcome in outcomes:
        if outcome.error is not None:
            items.append(
                {
                    "source_name": outcome.source_name,
                    "outcome": "rejected",
                    "document": None,
                    "error": {
                        "status": outcome.error.status,
                        "reason": outcome.error.reason,
                        "message": str(outcome.error),
                    },
                }
            )
            continue
        document = final.get(outcome.document.id, outcome.document)
        items.append(
            {
                "source_name": outcome.source_name,
                "outcome": "created" if outcome.created else "unchanged",
                "document": document.model_dump(mode="json", exclude={"tenant_id"}),
                "error": None,
            }
        )
    write_json({"documents": items})


async def _continue_unfinished(
    knowledge: Any, tenant: str, dataset_id: str, submitted: set[str]
) -> list[str]:
    """Queue again the dataset's unfinished documents that this add did not submit (left
    by an earlier command: Ctrl-C, a crash): ingestion resumes where it stopped (one that
    another live process is ingesting is left to it and only followed). Their ids."""
    left = [
        d.id
        for d in await knowledge.list_documents(tenant, dataset_id)
        if str(d.status) not in _FINAL and d.id not in submitted
    ]
    if left:
        await knowledge.queue.submit(tenant, dataset_id, left)
        err().print(Text(f"continuing {len(left)} unfinished document(s) of the dataset", style="dim"))
    return left


async def add_files(
    knowledge: Any,
    service: Any,
    tenant: str,
    dataset_id: str,
    paths: Sequence[Path],
    *,
    wait: bool,
    as_json: bool,
) -> int:
    """Add ``paths`` to the dataset and follow them (module docstring); the exit code."""
    await knowledge.get_dataset(tenant, dataset_id)  # an unknown dataset: exit 2 before any file is read
    uploads, unread = _read(paths, getattr(knowledge, "max_document_bytes", None))
    outcomes = await knowledge.add_documents(tenant, dataset_id, uploads) if uploads else []
    queued = bool(service.settings.redis_url)
    pending = [
        o.document.id
        for o in outcomes
        if o.error is None and o.document is not None and str(o.document.status) not in _FINAL
    ]
    submitted = {o.document.id for o in outcomes if o.created and o.document is not None}
    if not queued:
        pending = list(
            dict.fromkeys([*pending, *await _continue_unfinished(knowledge, tenant, dataset_id, submitted)])
        )
    final: dict[str, Any] = {}
    followed = bool(pending) and (wait or not queued)
    if followed:
        if not wait and not as_json:
            err().print(
                Text(
                    f"ingesting {len(pending)} document(s) in this process (FLOWLOOM_REDIS_URL unset)...",
                    style="dim",
                )
            )
        final = await _follow(knowledge, tenant, dataset_id, pending, bar=wait and not as_json)
    if as_json:
        _json(outcomes, unread, final)
    code = _report(outcomes, unread, final, queued and not wait, followed=followed, quiet=as_json)
    # a document that failed in ingestion is not in the dataset to search
    kept = [
        o
        for o in outcomes
        if o.error is not None or str(final.get(o.document.id, o.document).status) != "failed"
    ]
    if kept and not as_json:  # refused files too: the rest of the batch was kept, and says so
        held = (await knowledge.get_dataset(tenant, dataset_id)).document_count
        refused = f", {len(unread)} not read" if unread else ""
        out().print(
            f"{_tally(kept)}{refused}: dataset {dataset_id} now holds {held} document(s); search with: "
            f'flowloom datasets search {dataset_id} "..."'
        )
    return code


async def reindex_documents(
    knowledge: Any,
    service: Any,
    tenant: str,
    dataset_id: str,
    document_ids: Sequence[str],
    *,
    failed_only: bool,
    wait: bool,
    as_json: bool,
) -> int:
    """Ingest again the dataset's documents ``document_ids`` (default: all of them; with
    ``failed_only`` only those whose ingestion failed), then follow them as ``add`` does;
    the exit code as ``add`` gives (2 for an unknown document, before any is queued)."""
    from engine.knowledge.service import DocumentOutcome

    await knowledge.get_dataset(tenant, dataset_id)
    if document_ids:
        chosen = [await knowledge.get_document(tenant, dataset_id, d) for d in dict.fromkeys(document_ids)]
    else:
        chosen = await knowledge.list_documents(tenant, dataset_id)
    if failed_only:
        chosen = [d for d in chosen if str(d.status) == "failed"]
    if not chosen:
        if as_json:
            write_json({"documents": []})
        else:
            err().print(
                Text("no document to ingest again" + (" (none failed)" if failed_only else ""), style="dim")
            )
        return EXIT_OK
    documents = [await knowledge.reindex_document(tenant, dataset_id, d.id) for d in chosen]
    outcomes = [DocumentOutcome(d.source_name, doc, True) for d, doc in zip(chosen, documents, strict=True)]
    queued = bool(service.settings.redis_url)
    ids = [doc.id for doc in documents]
    final: dict[str, Any] = {}
    followed = wait or not queued
    if followed:
        if not wait and not as_json:
            err().print(
                Text(
                    f"ingesting {len(ids)} document(s) in this process (FLOWLOOM_REDIS_URL unset)...",
                    style="dim",
                )
            )
        final = await _follow(knowledge, tenant, dataset_id, ids, bar=wait and not as_json)
    if as_json:
        write_json(
            {
                "documents": [
                    final.get(doc.id, doc).model_dump(mode="json", exclude={"tenant_id"}) for doc in documents
                ]
            }
        )
    return _report(outcomes, [], final, queued and not wait, followed=followed, quiet=as_json)
