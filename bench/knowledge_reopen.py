"""The SQLite knowledge store's first vector search after a process opens it: building the
HNSW graph from the stored vectors, next to loading the graph a previous process saved in
``FLOWLOOM_HOME/indexes`` (and catching up on vectors another process added since).

Prints one JSON line (seconds)::

    python bench/knowledge_reopen.py                  # 100k vectors of 384 dimensions
    python bench/knowledge_reopen.py --vectors 20000  # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from schemas.knowledge import ChunkDraft, ChunkKind, Dataset, Document
from workers.knowledge import SqliteKnowledgeStore, open_knowledge_store
from workers.sql.connect import default_database_url

TENANT = "bench"
PER_DOCUMENT = 1000


def _vectors(rng: np.random.Generator, count: int, dimension: int) -> np.ndarray:
    """Clustered unit vectors (200 centres + noise), like embeddings of related texts."""
    centres = rng.normal(size=(200, dimension))
    rows = centres[rng.integers(0, 200, count)] + 0.6 * rng.normal(size=(count, dimension))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


async def _insert(store, index_id: str, vectors: np.ndarray) -> None:
    for start in range(0, len(vectors), PER_DOCUMENT):
        part, name = vectors[start:start + PER_DOCUMENT], uuid.uuid4().hex  # a new document each time
        doc, _ = await store.put_document(Document(
            id=name, tenant_id=TENANT, dataset_id="ds", source_name=name, content_type="text",
            content_hash=name, size_bytes=1, created_at=time.time()))
        drafts = [ChunkDraft(position=i, kind=ChunkKind.text, text=f"c{start + i}", search_text=f"c{start + i}",
                             tokens=1) for i in range(len(part))]
        chunks = await store.replace_chunks(TENANT, doc.id, drafts)
        await store.put_vectors(TENANT, index_id, [(c.id, v.tolist()) for c, v in zip(chunks, part, strict=True)])


async def _first_search(path: Path, directory: Path, index_id: str, query: np.ndarray) -> tuple[float, int]:
    store = await SqliteKnowledgeStore.open(path, index_directory=directory)
    try:
        started = time.perf_counter()
        await store.search_vectors(TENANT, index_id, query.tolist(), 10)
        return time.perf_counter() - started, store._memory.builds
    finally:
        await store.close()


async def run(count: int, dimension: int, added: int) -> dict:
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        store = await open_knowledge_store(default_database_url(home), home)
        await store.create_dataset(Dataset(id="ds", tenant_id=TENANT, name="ds"))
        index = await store.create_index(TENANT, "ds", "emb")
        await store.activate_index(TENANT, "ds", index.id)
        started = time.perf_counter()
        await _insert(store, index.id, _vectors(rng, count, dimension))
        insert_s = time.perf_counter() - started
        await store.close()
        query, directory = _vectors(rng, 1, dimension)[0], home / "indexes"

        build_s, builds = await _first_search(store.path, directory, index.id, query)  # builds and saves
        saved_mb = sum(p.stat().st_size for p in directory.glob("*.usearch")) / 1e6
        reopen_s, reopen_builds = await _first_search(store.path, directory, index.id, query)
        writer = await SqliteKnowledgeStore.open(store.path)
        await _insert(writer, index.id, _vectors(rng, added, dimension))
        await writer.close()
        catch_up_s, catch_up_builds = await _first_search(store.path, directory, index.id, query)
        return {"vectors": count, "dimension": dimension, "insert_s": round(insert_s, 2),
                "first_search_build_and_save_s": round(build_s, 2), "built": builds,
                "saved_file_mb": round(saved_mb, 1),
                "first_search_after_reopen_s": round(reopen_s, 3), "rebuilt_after_reopen": reopen_builds,
                f"first_search_after_{added}_added_s": round(catch_up_s, 3), "rebuilt_after_added": catch_up_builds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--added", type=int, default=1000, help="vectors another store adds before the last reopen")
    options = parser.parse_args(argv)
    print(json.dumps(asyncio.run(run(options.vectors, options.dimension, options.added))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
