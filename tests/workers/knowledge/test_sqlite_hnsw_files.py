"""The SQLite store's saved HNSW graphs: a store opened later on the same files loads the
graph instead of building it, catches up on the rows added since, and rebuilds when
vectors were deleted since or the file is unusable; deleting a dataset or retiring an
index removes its file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from workers.knowledge import SqliteKnowledgeStore, open_knowledge_store
from workers.knowledge.hnsw import _new_graph
from workers.sql.connect import default_database_url

from .conftest import dataset, document, drafts

#: 48 dimensions: graphs from 209 vectors on
CELLS = 10_000
DIMENSION = 48


@pytest.fixture
async def stores(tenant):
    """``open(**options)`` -> a store on the test's SQLite file saving graphs in
    ``FLOWLOOM_HOME/indexes`` (a second one is like a second process); all closed after."""
    home = Path(os.environ["FLOWLOOM_HOME"])
    first = await open_knowledge_store(default_database_url(home), home)
    assert isinstance(first, SqliteKnowledgeStore)
    opened = [first]

    async def open_store(**options) -> SqliteKnowledgeStore:
        store = await SqliteKnowledgeStore.open(first.path, exact_max_cells=CELLS,
                                                index_directory=home / "indexes", **options)
        opened.append(store)
        return store

    await first.create_dataset(dataset(tenant))
    yield open_store
    for store in opened:
        await store.close()


async def _fill(store, tenant: str, source: str, index_id: str, vectors: np.ndarray) -> list[str]:
    doc, _ = await store.put_document(document(tenant, "ds", source))
    chunks = await store.replace_chunks(tenant, doc.id, drafts(*[f"{source} {i}" for i in range(len(vectors))]))
    await store.put_vectors(tenant, index_id, [(c.id, v.tolist()) for c, v in zip(chunks, vectors, strict=True)])
    return [c.id for c in chunks]


def _files(index_id: str) -> list[str]:
    directory = Path(os.environ["FLOWLOOM_HOME"]) / "indexes"
    return sorted(p.name for p in directory.glob(f"{index_id}*")) if directory.is_dir() else []


async def _assert_exact(store, tenant: str, index_id: str, queries: np.ndarray) -> None:
    """The graph holds exactly the table's rows, and its answers are exact search's (recall@10
    at least 0.95: a graph search is approximate)."""
    rows = await store._call(lambda: [r[0] for r in store._conn.execute(
        "SELECT seq FROM kb_vectors WHERE index_id = ?", (index_id,))])
    found = exact = 0
    for query in queries:
        hits = await store.search_vectors(tenant, index_id, query.tolist(), 10)
        truth = await store.exact_search_vectors(tenant, index_id, query.tolist(), 10)
        graph = store._memory._memory[index_id].graph
        truth_scores = {h.chunk.id: h.score for h in truth}
        for hit in hits:  # the scores of the stored vectors
            if hit.chunk.id in truth_scores:
                assert hit.score == pytest.approx(truth_scores[hit.chunk.id], abs=1e-5)
        found += len({h.chunk.id for h in hits} & set(truth_scores))
        exact += len(truth)
    assert found / exact >= 0.95
    assert graph is not None and sorted(int(k) for k in graph.keys) == sorted(rows)


async def _built_index(open_store, tenant: str, rng) -> tuple[str, SqliteKnowledgeStore]:
    """An index of 400 vectors whose graph one store built and saved (then closed)."""
    builder = await open_store()
    index = await builder.create_index(tenant, "ds", "emb")
    await builder.activate_index(tenant, "ds", index.id)
    await _fill(builder, tenant, "a.txt", index.id, rng.normal(size=(400, DIMENSION)).astype(np.float32))
    await builder.search_vectors(tenant, index.id, rng.normal(size=DIMENSION).tolist(), 5)
    assert builder._memory.builds == 1
    assert _files(index.id) == [f"{index.id}-g0-s400.usearch"]  # saved right after the build
    return index.id, builder


async def test_a_reopened_store_loads_the_graph_and_catches_up(stores, tenant):
    rng = np.random.default_rng(3)
    index_id, builder = await _built_index(stores, tenant, rng)
    writer = await stores()
    near = rng.normal(size=DIMENSION).astype(np.float32)
    added = await _fill(writer, tenant, "b.txt", index_id, np.stack([near, *rng.normal(size=(29, DIMENSION))]))

    reader = await stores()
    await _assert_exact(reader, tenant, index_id, np.stack([near, *rng.normal(size=(20, DIMENSION))]))
    assert reader._memory.builds == 0  # loaded, then the 30 newer rows added
    hits = await reader.search_vectors(tenant, index_id, near.tolist(), 1)
    assert hits[0].chunk.id == added[0] and hits[0].score == pytest.approx(1.0, abs=1e-5)
    # 30 new vectors are less than the growth that saves again, here and on close
    await reader.close()
    assert _files(index_id) == [f"{index_id}-g0-s400.usearch"]
    await builder.close()


async def test_deleted_vectors_rebuild_the_graph(stores, tenant):
    rng = np.random.default_rng(4)
    index_id, _ = await _built_index(stores, tenant, rng)
    writer = await stores()
    extra = await _fill(writer, tenant, "b.txt", index_id, rng.normal(size=(50, DIMENSION)).astype(np.float32))
    await writer.delete_document(tenant, (await writer.get_chunks(tenant, extra[:1]))[0].document_id)

    reader = await stores()
    await _assert_exact(reader, tenant, index_id, rng.normal(size=(10, DIMENSION)).astype(np.float32))
    assert reader._memory.builds == 1
    names = _files(index_id)  # the old generation's file replaced by the rebuilt graph's
    assert len(names) == 1 and "-g0-" not in names[0]
    hits = await reader.search_vectors(tenant, index_id, rng.normal(size=DIMENSION).tolist(), 100)
    assert not {h.chunk.id for h in hits} & set(extra)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
async def test_an_unusable_file_is_rebuilt_without_an_error(stores, tenant, damage):
    rng = np.random.default_rng(5)
    index_id, _ = await _built_index(stores, tenant, rng)
    path = Path(os.environ["FLOWLOOM_HOME"]) / "indexes" / _files(index_id)[0]
    data = path.read_bytes()
    path.write_bytes({"truncated": data[: len(data) // 2], "garbage": b"not a graph" * 100, "empty": b""}[damage])

    reader = await stores()
    await _assert_exact(reader, tenant, index_id, rng.normal(size=(10, DIMENSION)).astype(np.float32))
    assert reader._memory.builds == 1
    assert path.read_bytes() != data[: len(data) // 2] and len(path.read_bytes()) > 0  # saved again


async def test_a_file_of_another_dimension_is_not_loaded(stores, tenant):
    rng = np.random.default_rng(6)
    index_id, _ = await _built_index(stores, tenant, rng)
    directory = Path(os.environ["FLOWLOOM_HOME"]) / "indexes"
    # a graph of as many 8-dimensional vectors saved under this index's name and generation
    graph = _new_graph(8)
    graph.add(np.arange(1, 401, dtype=np.uint64), rng.normal(size=(400, 8)).astype(np.float32))
    graph.save(str(directory / f"{index_id}-g0-s400.usearch"))
    reader = await stores()
    await _assert_exact(reader, tenant, index_id, rng.normal(size=(5, DIMENSION)).astype(np.float32))
    assert reader._memory.builds == 1


async def test_deleting_the_dataset_or_retiring_the_index_removes_its_file(stores, tenant):
    rng = np.random.default_rng(8)
    index_id, builder = await _built_index(stores, tenant, rng)
    replacement = await builder.create_index(tenant, "ds", "emb-2")
    await builder.activate_index(tenant, "ds", replacement.id)  # retires index_id
    assert _files(index_id) == []

    vectors = rng.normal(size=(300, DIMENSION)).astype(np.float32)
    await _fill(builder, tenant, "c.txt", replacement.id, vectors)
    await builder.search_vectors(tenant, replacement.id, vectors[0].tolist(), 3)
    assert len(_files(replacement.id)) == 1
    await builder.delete_dataset(tenant, "ds")
    assert _files(replacement.id) == []



async def test_a_graph_grown_by_a_tenth_is_saved_again(stores, tenant):
    rng = np.random.default_rng(10)
    index_id, _ = await _built_index(stores, tenant, rng)
    writer = await stores()
    await _fill(writer, tenant, "b.txt", index_id, rng.normal(size=(100, DIMENSION)).astype(np.float32))
    reader = await stores()
    await _assert_exact(reader, tenant, index_id, rng.normal(size=(5, DIMENSION)).astype(np.float32))
    assert reader._memory.builds == 0
    assert _files(index_id) == [f"{index_id}-g0-s500.usearch"]  # 400 + 100: saved on that search

    later = await stores()
    await later.search_vectors(tenant, index_id, rng.normal(size=DIMENSION).tolist(), 3)
    assert later._memory.builds == 0 and later._memory._memory[index_id].max_seq == 500


async def test_saved_graphs_are_private_to_the_user(stores, tenant):
    """The graphs hold the vectors of every tenant's documents: ``indexes`` is 0700 and its
    files 0600, whatever the umask."""
    old = os.umask(0o022)
    try:
        index_id, _ = await _built_index(stores, tenant, np.random.default_rng(8))
    finally:
        os.umask(old)
    directory = Path(os.environ["FLOWLOOM_HOME"]) / "indexes"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert [(p.name, stat.S_IMODE(p.stat().st_mode)) for p in directory.iterdir()] == [
        (f"{index_id}-g0-s400.usearch", 0o600)]
