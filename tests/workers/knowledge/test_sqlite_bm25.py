"""The SQLite store's in-memory full-text ranking (workers.knowledge.bm25): it answers what
FTS5 answers (same chunks, order and scores, bit for bit), never blocks a search on a
build, follows other connections' writes and stays within its memory bound."""

from __future__ import annotations

import asyncio
import os
import random
import threading
from pathlib import Path

import pytest

from schemas.knowledge import ChunkKind, DocumentStatus, MetadataFilter
from workers.knowledge import SqliteKnowledgeStore, bm25, open_knowledge_store
from workers.knowledge.bm25 import fts5_varint
from workers.sql.connect import default_database_url

from .conftest import dataset, document, drafts

_WORDS = [f"w{i}" for i in range(24)] + ["知识", "库", "alpha", "beta"]


@pytest.fixture(autouse=True)
def _unpaced(monkeypatch):
    """Builds asked for are started whatever they cost (a build slowed by a loaded machine
    would otherwise pause the next one, and the tests wait for builds they asked for)."""
    monkeypatch.setattr(bm25, "PACED_BUILD_S", float("inf"))


async def _open(**options) -> SqliteKnowledgeStore:
    store = await open_knowledge_store(
        default_database_url(Path(os.environ["FLOWLOOM_HOME"])), Path(os.environ["FLOWLOOM_HOME"]), **options
    )
    assert isinstance(store, SqliteKnowledgeStore)
    return store


async def _settled(store: SqliteKnowledgeStore) -> None:
    """Wait for the builds asked for so far (they run on the build thread, in order)."""
    await asyncio.wrap_future(store._full_text._executor.submit(lambda: None))


async def _both(store, tenant, datasets, query, k, filters=()):
    """``(fts5, memory)``: each path's hits as ``(chunk id, score)``; memory None when it
    would not answer."""

    def run():
        conn = store._reader_conn()
        vocab = store._tenant_terms(conn, tenant)
        fts5 = store._search_fts5(conn, tenant, vocab, list(datasets), query, k, list(filters))
        memory = store._search_in_memory(conn, tenant, vocab, list(datasets), query, k, list(filters))
        pairs = [(h.id, h.score) for h in fts5]
        return pairs, None if memory is None else [(h.id, h.score) for h in memory]

    return await store._read_call(run)


async def _current(store, tenant, datasets, query, k, filters=()):
    """Both paths, after letting a build catch up; fails when memory still would not answer."""
    fts5, memory = await _both(store, tenant, datasets, query, k, filters)
    if memory is None:
        await _settled(store)
        fts5, memory = await _both(store, tenant, datasets, query, k, filters)
    assert memory is not None
    return fts5, memory


def _text(rng: random.Random) -> str:
    skew = rng.choice([1, 3])  # some words in most chunks: FTS5's idf floor (1e-6) is met
    return " ".join(
        rng.choice(_WORDS[: 4 * skew] if rng.random() < 0.5 else _WORDS) for _ in range(rng.randint(1, 14))
    )


async def _add(store, rng, tenant, datasets, docs):
    ds = rng.choice(datasets)
    meta = {"lang": rng.choice(["en", "fr"]), "year": rng.randint(2020, 2025)}
    doc, _ = await store.put_document(document(tenant, ds, f"{rng.random()}.txt", metadata=meta))
    texts = [_text(rng) for _ in range(rng.randint(1, 5))]
    if rng.random() < 0.2:
        texts.append(texts[0])  # a duplicate chunk: equal scores, ordered by row
    chunks = await store.replace_chunks(tenant, doc.id, drafts(*texts))
    if rng.random() < 0.2:  # a parent chunk is not in the full-text table
        await store.replace_chunks(
            tenant, doc.id, [*drafts(*texts), *drafts("w1 w2 parent", kind=ChunkKind.parent)]
        )
    if rng.random() < 0.1:  # failed documents are in the table (and its statistics), not in results
        await store.update_document(tenant, doc.id, status=DocumentStatus.failed)
    docs.append(doc.id)
    return chunks


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_memory_ranks_as_fts5_through_random_writes(seed):
    rng = random.Random(seed)
    store = await _open()
    try:
        tenants = {"t-a": ["d1", "d2", "d3"], "t-b": ["d1"]}
        docs: dict[str, list[str]] = {t: [] for t in tenants}
        for tenant, datasets in tenants.items():
            for ds in datasets:
                await store.create_dataset(dataset(tenant, ds))
        compared = 0
        for step in range(12):
            for tenant, datasets in tenants.items():
                for _ in range(rng.randint(2, 8)):
                    await _add(store, rng, tenant, datasets, docs[tenant])
                if docs[tenant] and step % 3 == 2:  # deletes
                    for doc_id in rng.sample(docs[tenant], k=min(2, len(docs[tenant]))):
                        await store.delete_document(tenant, doc_id)
                        docs[tenant].remove(doc_id)
                if docs[tenant] and step % 4 == 3:  # updates: a document's chunks replaced
                    await store.replace_chunks(
                        tenant, rng.choice(docs[tenant]), drafts(_text(rng), _text(rng))
                    )
                for _ in range(6):
                    scope = rng.sample(datasets, k=rng.randint(1, len(datasets)))
                    query = " ".join(rng.sample(_WORDS, k=rng.randint(1, 4)))
                    filters = []
                    if rng.random() < 0.3:
                        filters = [MetadataFilter(field="lang", op="eq", value=rng.choice(["en", "fr"]))]
                    k = rng.choice([1, 2, 5, 40])
                    fts5, memory = await _current(store, tenant, scope, query, k, filters)
                    assert memory == fts5, (tenant, scope, query, k, filters)
                    compared += bool(fts5)
        assert compared > 100
    finally:
        await store.close()


async def test_ties_and_the_scope_beyond_the_first_pool():
    """Many equal scores, and a dataset whose matches all rank below the first
    ``max(4k, 100)`` of the tenant's: memory walks the ranking as FTS5's second
    statement does."""
    store = await _open()
    try:
        tenant = "t-ties"
        for ds in ("big", "small"):
            await store.create_dataset(dataset(tenant, ds))
        doc, _ = await store.put_document(document(tenant, "big", "big.txt"))
        await store.replace_chunks(tenant, doc.id, drafts(*["alpha alpha"] * 150, *["alpha beta"] * 30))
        doc, _ = await store.put_document(document(tenant, "small", "small.txt"))
        await store.replace_chunks(tenant, doc.id, drafts(*["alpha w1 w2 w3 w4 w5"] * 3))
        for scope, k in ((["small"], 2), (["small"], 10), (["big"], 5), (["big", "small"], 200)):
            fts5, memory = await _current(store, tenant, scope, "alpha", k)
            assert memory == fts5 and len(fts5) == min(k, {"small": 3, "big": 180}.get("".join(scope), 183))
    finally:
        await store.close()


async def test_search_answers_from_memory_once_built_and_never_waits_for_a_build():
    store = await _open()
    try:
        tenant = "t-built"
        await store.create_dataset(dataset(tenant, "ds"))
        doc, _ = await store.put_document(document(tenant, "ds", "a.txt"))
        chunks = await store.replace_chunks(tenant, doc.id, drafts("alpha beta", "beta w1"))
        # the build thread busy: a search is answered by FTS5 at once
        gate = threading.Event()
        store._full_text._executor.submit(gate.wait)
        hits = await asyncio.wait_for(store.search_full_text(tenant, ["ds"], "alpha", 5), 5)
        assert [h.id for h in hits] == [chunks[0].id]
        fts5, memory = await _both(store, tenant, ["ds"], "alpha", 5)
        assert memory is None and store._full_text.builds == 0
        gate.set()
        await _settled(store)
        assert store._full_text.builds == 1
        fts5, memory = await _both(store, tenant, ["ds"], "beta", 5)
        assert memory == fts5 and len(fts5) == 2
    finally:
        await store.close()


async def test_writes_through_another_store_on_the_same_file_are_seen():
    first = await _open()
    # the second store opened without migrating: Alembic's sqlite3 closing the file would
    # drop the first store's POSIX locks (two SQLite libraries in one process)
    second = await SqliteKnowledgeStore.open(first.path)
    try:
        tenant = "t-two"
        await first.create_dataset(dataset(tenant, "ds"))
        doc, _ = await first.put_document(document(tenant, "ds", "a.txt"))
        await first.replace_chunks(tenant, doc.id, drafts("alpha one", "beta two"))
        await _current(first, tenant, ["ds"], "alpha", 5)  # first's index built and current
        builds = first._full_text.builds
        other, _ = await second.put_document(document(tenant, "ds", "b.txt"))
        added = await second.replace_chunks(tenant, other.id, drafts("alpha alpha alpha"))
        hits = await first.search_full_text(tenant, ["ds"], "alpha", 5)
        assert hits[0].id == added[0].id  # the insert is seen by the very next search
        fts5, memory = await _current(first, tenant, ["ds"], "alpha", 5)
        assert memory == fts5 and first._full_text.builds == builds + 1
        await second.delete_document(tenant, other.id)
        hits = await first.search_full_text(tenant, ["ds"], "alpha", 5)
        assert added[0].id not in {h.id for h in hits} and len(hits) == 1  # and the delete
        fts5, memory = await _current(first, tenant, ["ds"], "alpha", 5)
        assert memory == fts5
    finally:
        await first.close()
        await second.close()


async def test_memory_bound_drops_the_least_recently_searched_tenant():
    store = await _open(full_text_memory_bytes=1)
    try:
        for tenant in ("t-x", "t-y", "t-z", "t-w"):
            await store.create_dataset(dataset(tenant, "ds"))
            doc, _ = await store.put_document(document(tenant, "ds", "a.txt"))
            await store.replace_chunks(tenant, doc.id, drafts("alpha beta"))
        await _both(store, "t-x", ["ds"], "alpha", 5)
        await _settled(store)
        _, memory = await _both(store, "t-x", ["ds"], "alpha", 5)
        await _settled(store)
        assert memory is None and store._full_text.memory() == 0  # larger than the bound: FTS5
        assert store._full_text.builds == 1  # and not built again while nothing changed
        store._full_text.memory_bytes = 10**9
        await _current(store, "t-y", ["ds"], "alpha", 5)
        one = store._full_text.memory()
        store._full_text.memory_bytes = 2 * one  # room for two of the (equal) indexes
        await _current(store, "t-z", ["ds"], "alpha", 5)
        await _current(store, "t-y", ["ds"], "alpha", 5)  # t-z is now the least recently used
        await _current(store, "t-w", ["ds"], "alpha", 5)
        assert list(store._full_text._indexes) == ["t-y", "t-w"] and store._full_text.memory() <= 2 * one
    finally:
        await store.close()


async def test_off_and_varints():
    store = await _open(full_text_memory_bytes=0)
    try:
        await store.create_dataset(dataset("t-off", "ds"))
        doc, _ = await store.put_document(document("t-off", "ds", "a.txt"))
        chunks = await store.replace_chunks("t-off", doc.id, drafts("alpha"))
        assert [h.id for h in await store.search_full_text("t-off", ["ds"], "alpha", 5)] == [chunks[0].id]
        await _settled(store)
        assert store._full_text.builds == 0
    finally:
        await store.close()
    assert fts5_varint(bytes([0x05])) == (5, 1)
    assert fts5_varint(bytes([0x81, 0x00])) == (128, 2)
    assert fts5_varint(bytes([0xFF] * 8 + [0x01])) == ((2**56 - 1) << 8 | 1, 9)


async def test_a_file_from_before_the_state_table_gets_it_on_open():
    import sqlean

    store = await _open()
    tenant = "t-old"
    await store.create_dataset(dataset(tenant, "ds"))
    doc, _ = await store.put_document(document(tenant, "ds", "a.txt"))
    await store.replace_chunks(tenant, doc.id, drafts("alpha beta", "alpha"))
    await store.close()
    conn = sqlean.connect(str(store.path), isolation_level=None)
    for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name GLOB 'kb_fts_*_?eleted' OR name GLOB 'kb_fts_*_inserted'"
    ).fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("DROP TABLE kb_fts_state")
    conn.close()
    store = await SqliteKnowledgeStore.open(store.path)
    try:
        fts5, memory = await _current(store, tenant, ["ds"], "alpha", 5)
        assert memory == fts5 and len(fts5) == 2
        other, _ = await store.put_document(document(tenant, "ds", "b.txt"))
        await store.replace_chunks(tenant, other.id, drafts("alpha alpha"))
        await store.delete_document(tenant, doc.id)
        fts5, memory = await _both(store, tenant, ["ds"], "alpha", 5)
        assert memory is None and len(fts5) == 1  # the triggers are back: the change is seen
        fts5, memory = await _current(store, tenant, ["ds"], "alpha", 5)
        assert memory == fts5
    finally:
        await store.close()


async def test_terms_fts5_splits_otherwise_leave_the_tenant_on_fts5():
    """A row whose stored terms FTS5's tokenizer splits differently from the index's split
    (written by hand here) fails the vocabulary check: no index, FTS5 answers, and the
    build is not repeated while nothing changes."""
    import sqlean

    store = await _open()
    try:
        tenant = "t-split"
        await store.create_dataset(dataset(tenant, "ds"))
        doc, _ = await store.put_document(document(tenant, "ds", "a.txt"))
        chunks = await store.replace_chunks(tenant, doc.id, drafts("alpha beta", "beta"))
        conn = sqlean.connect(str(store.path), isolation_level=None)
        conn.execute(
            "INSERT INTO kb_chunks (id, tenant_id, dataset_id, document_id, position, kind, text, "
            "search_text, text_hash, heading_path, parent_id, tokens, search_terms) SELECT 'odd', tenant_id, "
            "dataset_id, document_id, 9, kind, text, search_text, text_hash, heading_path, parent_id, tokens, "
            "'alpha-beta' FROM kb_chunks WHERE id = ?",
            (chunks[0].id,),
        )
        conn.close()
        fts5, memory = await _both(store, tenant, ["ds"], "alpha", 5)
        await _settled(store)
        fts5, memory = await _both(store, tenant, ["ds"], "alpha", 5)
        await _settled(store)
        assert memory is None and [h[0] for h in fts5] == [chunks[0].id, "odd"]
        assert store._full_text.builds == 1
    finally:
        await store.close()


@pytest.mark.parametrize(("megabytes", "expected"), [(0, 0), (3, 3 * 1024 * 1024)])
async def test_the_memory_setting_reaches_the_store_the_deployment_opens(tmp_path, monkeypatch, megabytes, expected):
    from api.composition import open_service
    from engine.settings import Settings

    monkeypatch.setenv("FLOWLOOM_KNOWLEDGE_FULL_TEXT_MEMORY_MB", str(megabytes))
    async with open_service(Settings(home=tmp_path / "home")) as service:
        assert service.knowledge.store._full_text.memory_bytes == expected


async def test_a_slow_build_is_not_asked_for_again_before_its_pause(monkeypatch):
    monkeypatch.setattr(bm25, "PACED_BUILD_S", -1.0)  # every build counts as slow
    monkeypatch.setattr(bm25, "REBUILD_PACE", 3600.0)
    store = await _open()
    try:
        tenant = "t-paced"
        await store.create_dataset(dataset(tenant, "ds"))
        doc, _ = await store.put_document(document(tenant, "ds", "a.txt"))
        await store.replace_chunks(tenant, doc.id, drafts("alpha one", "beta two"))
        await _current(store, tenant, ["ds"], "alpha", 5)
        assert store._full_text.builds == 1
        other, _ = await store.put_document(document(tenant, "ds", "b.txt"))
        added = await store.replace_chunks(tenant, other.id, drafts("alpha alpha"))
        hits = await store.search_full_text(tenant, ["ds"], "alpha", 5)
        await _settled(store)
        assert hits[0].id == added[0].id and store._full_text.builds == 1  # FTS5 answered; no build
        store._full_text._not_before[tenant] = 0.0  # the pause is over
        fts5, memory = await _current(store, tenant, ["ds"], "alpha", 5)
        assert memory == fts5 and store._full_text.builds == 2
    finally:
        await store.close()
