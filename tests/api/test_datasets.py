"""``/v1/datasets`` over the real app: CRUD, uploads of every format with bad files in the
batch, the progress stream, searches in each mode through the scripted embeddings
server, tenant isolation on every route, app keys, quotas (embedding tokens counted,
429) and size limits (413).

Full-text datasets run on SQLite and on Debian's PostgreSQL (no pgvector); datasets with
an embedding model on SQLite (sqlite-vec) and on a PostgreSQL with pgvector (pgserver),
where they store and search vectors; on a PostgreSQL without pgvector they are refused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from engine.settings import Settings
from tests.support.knowledge_files import EMBEDDING_MODEL, RERANK_MODEL, corpus, knowledge_models

from .conftest import SCRIPTED_KEY_ENV, Api, hello_workflow, open_api

#: the per-document cap of these tests' app (bytes)
DOCUMENT_CAP = 64 * 1024
DEADLINE_S = 30.0


@pytest.fixture
def models_file(tmp_path, openai_server, monkeypatch):
    monkeypatch.setenv(SCRIPTED_KEY_ENV, "sk-scripted-test")
    return knowledge_models(tmp_path / "models.toml", openai_server.base_url, SCRIPTED_KEY_ENV)


@dataclass
class Kb:
    """The app (``api``) and the scripted server (``llm``)."""

    api: Api
    llm: Any

    @property
    def client(self) -> Any:
        return self.api.client

    def auth(self, key: str | None = None) -> dict[str, str]:
        return self.api.auth(key)


async def _open(database_url: str, tmp_path, models, llm, sweep_s: float = 30.0, **overrides: Any
                ) -> AsyncIterator[Kb]:
    settings = Settings(home=tmp_path / "home", database_url=database_url, models=models,
                        knowledge_max_document_bytes=DOCUMENT_CAP, **overrides)
    async with open_api(settings, sweep_s=sweep_s) as api:
        yield Kb(api, llm)


# the database URLs come from sync fixtures: the PostgreSQL ones are made with asyncio.run


@pytest.fixture(params=["sqlite", "pgvector"])
def vector_url(request, tmp_path) -> str:
    """SQLite, or a fresh database of a PostgreSQL with pgvector (pgserver)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'kb.db'}"
    return request.getfixturevalue("make_pgvector_database")()


@pytest.fixture
def plain_postgres_url(make_postgres_database) -> str:
    return make_postgres_database()


@pytest.fixture
async def fts(database_url, tmp_path, models_file, openai_server) -> AsyncIterator[Kb]:
    """The app for full-text datasets: SQLite, or Debian's PostgreSQL (no pgvector)."""
    async for kb in _open(database_url, tmp_path, models_file, openai_server):
        yield kb


@pytest.fixture
async def kb(vector_url, tmp_path, models_file, openai_server) -> AsyncIterator[Kb]:
    """The app for datasets with an embedding model."""
    async for handle in _open(vector_url, tmp_path, models_file, openai_server):
        yield handle


async def _dataset(kb: Kb, **fields: Any) -> dict[str, Any]:
    body = {"name": "Notes", **fields}
    response = await kb.client.post("/v1/datasets", json=body, headers=kb.auth())
    assert response.status_code == 201, response.text
    return response.json()


async def _upload(kb: Kb, dataset_id: str, files: dict[str, bytes], key: str | None = None) -> Any:
    return await kb.client.post(f"/v1/datasets/{dataset_id}/documents", headers=kb.auth(key),
                                files=[("files", (name, data)) for name, data in files.items()])


async def _until_ingested(kb: Kb, dataset_id: str) -> list[dict[str, Any]]:
    """The dataset's documents once none is queued, parsing or embedding."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        documents = (await kb.client.get(f"/v1/datasets/{dataset_id}/documents", headers=kb.auth())).json()["documents"]
        if all(d["status"] in ("ready", "failed") for d in documents):
            return documents
        assert time.monotonic() < deadline, documents
        await asyncio.sleep(0.05)


# ------------------------------------------------------------------------ CRUD


async def test_datasets_are_created_listed_read_changed_and_deleted(fts):
    created = await _dataset(fts, id="handbook", description="the staff handbook",
                             chunking={"chunk_tokens": 256, "overlap_tokens": 32})
    assert created["id"] == "handbook" and created["embedding_model"] is None
    assert created["chunking"]["chunk_tokens"] == 256 and "tenant_id" not in created
    again = await fts.client.post("/v1/datasets", json={"name": "x", "id": "handbook"}, headers=fts.auth())
    assert again.status_code == 409 and again.json()["error"]["type"] == "conflict"
    listed = (await fts.client.get("/v1/datasets", headers=fts.auth())).json()["datasets"]
    assert [d["id"] for d in listed] == ["handbook"]
    changed = await fts.client.patch("/v1/datasets/handbook", json={"name": "Handbook 2"}, headers=fts.auth())
    assert changed.status_code == 200 and changed.json()["name"] == "Handbook 2"
    assert changed.json()["description"] == "the staff handbook"
    assert (await fts.client.get("/v1/datasets/handbook", headers=fts.auth())).json()["name"] == "Handbook 2"
    typo = await fts.client.post("/v1/datasets/handbok/search", json={"query": "x"}, headers=fts.auth())
    assert typo.status_code == 404 and typo.json()["error"]["message"] == "dataset 'handbok' not found; did you mean 'handbook'?"
    far = await fts.client.get("/v1/datasets/zzz", headers=fts.auth())
    assert far.status_code == 404 and "did you mean" not in far.json()["error"]["message"]
    other = await fts.client.get("/v1/datasets/handbok", headers=fts.auth(fts.api.other_key))
    assert other.status_code == 404 and "handbook" not in other.text  # another tenant's ids are never named
    assert (await fts.client.delete("/v1/datasets/handbook", headers=fts.auth())).status_code == 204
    gone = await fts.client.get("/v1/datasets/handbook", headers=fts.auth())
    assert gone.status_code == 404 and gone.json()["error"]["type"] == "not_found"
    assert (await fts.client.get("/v1/datasets", headers=fts.auth())).json()["datasets"] == []


async def test_an_import_mapping_to_a_dataset_the_tenant_lacks_is_warned_with_its_closest_id(fts):
    from tests.importers.helpers import FASTGPT, require_corpus_or_fail

    require_corpus_or_fail()
    await _dataset(fts, id="office-sem")
    source = (FASTGPT / "CQ_template.json").read_text(encoding="utf-8")

    async def unknown(dataset_map: dict[str, str], key: str | None = None) -> list[dict[str, Any]]:
        body = {"source": source, "dataset_map": dataset_map, "model_map": {"*": "default"}}
        answer = await fts.client.post("/v1/workflows/import", json=body, headers=fts.auth(key))
        assert answer.status_code == 200, answer.text
        return [i for i in answer.json()["report"] if i["code"] == "unknown_dataset"]

    (typo,) = await unknown({"*": "ofice-sem"})
    assert typo["severity"] == "warning" and "did you mean 'office-sem'?" in typo["message"]
    assert '"dataset_map": {"*": "office-sem"}' in typo["message"]
    assert 'POST /v1/datasets {"name": "NAME", "id": "ofice-sem"}' in typo["message"]
    assert await unknown({"*": "office-sem"}) == []
    (elsewhere,) = await unknown({"*": "ofice-sem"}, fts.api.other_key)
    assert "office-sem'" not in elsewhere["message"].replace("'ofice-sem'", "")  # another tenant's ids never named


async def test_validate_warns_about_a_semantic_search_of_a_dataset_without_an_embedding_model(fts):
    import json
    from pathlib import Path

    await _dataset(fts, id="handbook")  # full text only
    flow = json.loads((Path(__file__).resolve().parents[2] / "examples" / "knowledge_qa.json").read_text())
    search = next(n for n in flow["nodes"] if n["type"] == "knowledge_retrieval")

    async def degraded(mode: str) -> list[dict[str, Any]]:
        search["config"]["mode"] = mode
        answer = await fts.client.post("/v1/workflows/validate", json=flow, headers=fts.auth())
        assert answer.status_code == 200 and answer.json()["valid"], answer.text
        return [p for p in answer.json()["problems"] if p["code"] == "retrieval_degraded"]

    (warning,) = await degraded("semantic")
    assert (warning["node_id"], warning["path"], warning["severity"]) == (search["id"], "config.mode", "warning")
    assert "dataset 'handbook' has no embedding model" in warning["message"]
    assert await degraded("full_text") == []


async def test_an_id_that_is_a_name_is_told_the_form_and_a_name_taken_is_a_warning(fts):
    named = await fts.client.post("/v1/datasets", json={"name": "My KB", "id": "My KB"}, headers=fts.auth())
    assert named.status_code == 422 and named.json()["error"]["message"] == (
        "id: 'My KB' is not a dataset id: use only letters, digits, '_', '.' and '-' (no spaces); e.g. 'my-kb'")
    assert (await _dataset(fts, name="Office", id="office"))["warnings"] == []
    twin = await _dataset(fts, name="Office", id="office-2")
    [warning] = twin["warnings"]
    assert (warning["code"], warning["field"], warning["variable"]) == ("duplicate_name", "name", None)
    assert "named 'Office' too (office)" in warning["message"] and "PATCH /v1/datasets/{id}" in warning["message"]


async def test_invalid_datasets_are_refused_naming_the_field(fts):
    overlap = await fts.client.post("/v1/datasets", json={"name": "x", "chunking": {"chunk_tokens": 64,
                                                                                    "overlap_tokens": 64}},
                                    headers=fts.auth())
    assert overlap.status_code == 422 and "overlap_tokens" in overlap.json()["error"]["message"]
    chat_model = await fts.client.post("/v1/datasets", json={"name": "x", "embedding_model": "default"},
                                       headers=fts.auth())
    assert chat_model.status_code == 422, chat_model.text
    assert "default" in chat_model.json()["error"]["message"]
    unknown = await fts.client.post("/v1/datasets", json={"name": "x", "embedding_model": "nosuch"}, headers=fts.auth())
    assert unknown.status_code == 422 and "nosuch" in unknown.json()["error"]["message"]
    for weird in ("a b", "%00", "x" * 300):
        assert (await fts.client.get(f"/v1/datasets/{weird}", headers=fts.auth())).status_code in (404, 422)


async def test_postgres_without_pgvector_keeps_full_text_datasets_and_refuses_embedding_ones(tmp_path, models_file,
                                                                                             openai_server,
                                                                                             plain_postgres_url):
    async for kb in _open(plain_postgres_url, tmp_path, models_file, openai_server):
        refused = await kb.client.post("/v1/datasets", json={"name": "x", "embedding_model": EMBEDDING_MODEL},
                                       headers=kb.auth())
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["type"] == "invalid_dataset"
        assert "vector" in refused.json()["error"]["message"]
        dataset = await _dataset(kb)
        assert (await _upload(kb, dataset["id"], {"rockets.txt": corpus()["rockets.txt"]})).status_code == 202
        assert [d["status"] for d in await _until_ingested(kb, dataset["id"])] == ["ready"]
        found = await kb.client.post(f"/v1/datasets/{dataset['id']}/search", json={"query": "rocket nozzle",
                                                                                    "mode": "full_text"},
                                     headers=kb.auth())
        assert found.status_code == 200 and found.json()["hits"][0]["source_name"] == "rockets.txt"


# --------------------------------------------------------------------- uploads


async def test_an_upload_of_every_format_keeps_the_good_files_and_rejects_each_bad_one(kb):
    dataset = await _dataset(kb, embedding_model=EMBEDDING_MODEL)
    files = {**corpus(), "fake.pdf": b"this is text, not a PDF", "empty.txt": b"", "big.txt": b"word " * DOCUMENT_CAP,
             "app.exe": b"MZ\x90\x00binary"}
    response = await _upload(kb, dataset["id"], files)
    assert response.status_code == 202, response.text
    body = response.json()
    items = {item["source_name"]: item for item in body["documents"]}
    assert [item["source_name"] for item in body["documents"]] == list(files)
    assert body["accepted"] == len(corpus()) and body["rejected"] == 4
    for name in corpus():
        assert items[name]["outcome"] == "created" and items[name]["document"]["id"], items[name]
    assert items["fake.pdf"]["error"]["status"] == 422 and items["fake.pdf"]["error"]["reason"] == "type_mismatch"
    assert items["empty.txt"]["error"] == {**items["empty.txt"]["error"], "status": 422, "reason": "empty"}
    assert items["big.txt"]["error"]["status"] == 413 and items["big.txt"]["error"]["reason"] == "too_large"
    assert items["app.exe"]["error"]["reason"] == "unsupported"
    documents = await _until_ingested(kb, dataset["id"])
    assert {d["source_name"]: d["status"] for d in documents} == {name: "ready" for name in corpus()}
    types = {d["source_name"]: d["content_type"] for d in documents}
    assert types == {"rockets.txt": "txt", "tea.md": "markdown", "volcano.html": "html", "bridges.pdf": "pdf",
                     "cheese.docx": "docx", "pandas.csv": "csv_qa", "flamingos.jsonl": "jsonl_qa"}
    assert all(d["chunks_done"] == d["chunk_count"] > 0 for d in documents)
    detail = (await kb.client.get(f"/v1/datasets/{dataset['id']}", headers=kb.auth())).json()
    assert detail["document_count"] == len(corpus()) and detail["active_index"]["embedding_model"] == EMBEDDING_MODEL
    again = (await _upload(kb, dataset["id"], {"rockets.txt": corpus()["rockets.txt"]})).json()
    assert again["documents"][0]["outcome"] == "unchanged"


async def test_an_upload_whose_every_file_is_rejected_is_the_error_itself(fts):
    dataset = await _dataset(fts)
    too_big = await _upload(fts, dataset["id"], {"a.txt": b"a " * DOCUMENT_CAP, "b.txt": b"b " * DOCUMENT_CAP})
    assert too_big.status_code == 413, too_big.text
    error = too_big.json()["error"]
    assert error["type"] == "payload_too_large" and [p["source_name"] for p in error["problems"]] == ["a.txt", "b.txt"]
    assert "first: a.txt: " in error["message"] and error["message"].count("a.txt") == 1, error["message"]
    mixed = await _upload(fts, dataset["id"], {"a.txt": b"a " * DOCUMENT_CAP, "fake.docx": b"plain text"})
    assert mixed.status_code == 422 and mixed.json()["error"]["type"] == "invalid_document"
    assert [p["error"]["reason"] for p in mixed.json()["error"]["problems"]] == ["too_large", "type_mismatch"]
    nothing = await fts.client.post(f"/v1/datasets/{dataset['id']}/documents", headers=fts.auth(),
                                    files={"other": ("x.txt", b"text")})
    assert nothing.status_code == 422 and "files" in nothing.json()["error"]["message"]
    assert (await fts.client.get(f"/v1/datasets/{dataset['id']}/documents", headers=fts.auth())).json() == {
        "documents": []}


async def test_a_text_given_as_json_becomes_a_document_with_its_metadata(fts):
    dataset = await _dataset(fts)
    body = {"name": "faq", "text": "# Refunds\n\nRefunds are paid within fourteen days.", "metadata": {"lang": "en"}}
    response = await fts.client.post(f"/v1/datasets/{dataset['id']}/documents", json=body, headers=fts.auth())
    assert response.status_code == 202, response.text
    item = response.json()["documents"][0]
    assert item["outcome"] == "created" and item["document"]["metadata"] == {"lang": "en"}
    (document,) = await _until_ingested(fts, dataset["id"])
    assert document["status"] == "ready" and document["chunk_count"] >= 1
    one = await fts.client.get(f"/v1/datasets/{dataset['id']}/documents/{document['id']}", headers=fts.auth())
    assert one.json()["source_name"] == "faq"
    tagged = await fts.client.post(f"/v1/datasets/{dataset['id']}/documents", headers=fts.auth(),
                                   files=[("files", ("C:\\docs\\notes.txt", b"Shipping takes three days."))],
                                   data={"metadata": '{"lang": "en", "team": "ops"}'})
    assert tagged.status_code == 202, tagged.text
    assert tagged.json()["documents"][0]["document"]["metadata"] == {"lang": "en", "team": "ops"}
    assert tagged.json()["documents"][0]["source_name"] == "notes.txt"
    not_object = await fts.client.post(f"/v1/datasets/{dataset['id']}/documents", headers=fts.auth(),
                                       files=[("files", ("n.txt", b"x"))], data={"metadata": "[1]"})
    assert not_object.status_code == 422 and "metadata" in not_object.json()["error"]["message"]
    bad = await fts.client.post(f"/v1/datasets/{dataset['id']}/documents", json={"name": "x"}, headers=fts.auth())
    assert bad.status_code == 422 and "text" in bad.json()["error"]["message"]
    empty = await fts.client.post(f"/v1/datasets/{dataset['id']}/documents", json={"name": "x", "text": "  "},
                                  headers=fts.auth())
    assert empty.status_code == 422 and empty.json()["error"]["problems"][0]["error"]["reason"] == "empty"


async def test_the_same_file_again_retries_a_failed_document_and_a_failed_one_is_never_searched(kb):
    from tests.support.openai_server import http_error

    dataset = await _dataset(kb, embedding_model=EMBEDDING_MODEL)
    kb.llm.script_embeddings(http_error(400, "no such key"))
    files = {"rockets.txt": corpus()["rockets.txt"]}
    (first,) = (await _upload(kb, dataset["id"], files)).json()["documents"]
    [failed] = await _until_ingested(kb, dataset["id"])
    assert failed["status"] == "failed" and failed["chunks_done"] == 0
    for mode in ("full_text", "hybrid"):
        search = {"query": "rocket kerosene", "mode": mode}
        found = await kb.client.post(f"/v1/datasets/{dataset['id']}/search", json=search, headers=kb.auth())
        assert found.status_code == 200 and found.json()["hits"] == [], found.text
        assert any("none of its 1 document(s) is ready (1 failed, 0 still being ingested" in note
                   for note in found.json()["notes"]), found.json()["notes"]
    (again,) = (await _upload(kb, dataset["id"], files)).json()["documents"]
    assert again["outcome"] == "created" and again["document"]["id"] == first["document"]["id"]
    assert again["document"]["status"] == "queued" and again["document"]["error"] is None
    assert [d["status"] for d in await _until_ingested(kb, dataset["id"])] == ["ready"]


async def test_a_document_is_reindexed_and_deleted(fts):
    dataset = await _dataset(fts)
    (item,) = (await _upload(fts, dataset["id"], {"tea.md": corpus()["tea.md"]})).json()["documents"]
    await _until_ingested(fts, dataset["id"])
    path = f"/v1/datasets/{dataset['id']}/documents/{item['document']['id']}"
    reindexed = await fts.client.post(f"{path}/reindex", headers=fts.auth())
    assert reindexed.status_code == 202 and reindexed.json()["id"] == item["document"]["id"]
    assert [d["status"] for d in await _until_ingested(fts, dataset["id"])] == ["ready"]
    search = {"query": "green tea brewing", "mode": "full_text"}
    assert (await fts.client.post(f"/v1/datasets/{dataset['id']}/search", json=search, headers=fts.auth())).json()["hits"]
    assert (await fts.client.delete(path, headers=fts.auth())).status_code == 204
    assert (await fts.client.get(path, headers=fts.auth())).status_code == 404
    assert (await fts.client.post(f"{path}/reindex", headers=fts.auth())).status_code == 404
    after = await fts.client.post(f"/v1/datasets/{dataset['id']}/search", json=search, headers=fts.auth())
    assert after.status_code == 200 and after.json()["hits"] == []


async def test_a_documents_chunks_are_previewed_page_by_page_in_position_order(fts):
    dataset = await _dataset(fts, chunking={"chunk_tokens": 32, "overlap_tokens": 0})
    sections = "".join(f"# Part {n}\n\nSection {n} says the number {n} in words.\n\n" for n in range(1, 6))
    (item,) = (await _upload(fts, dataset["id"], {"parts.md": sections.encode()})).json()["documents"]
    await _until_ingested(fts, dataset["id"])
    path = f"/v1/datasets/{dataset['id']}/documents/{item['document']['id']}/chunks"
    first = (await fts.client.get(path, params={"limit": 2}, headers=fts.auth())).json()
    rest = (await fts.client.get(path, params={"offset": 2, "limit": 50}, headers=fts.auth())).json()
    assert first["total"] == rest["total"] == 5 and (first["offset"], first["limit"]) == (0, 2)
    chunks = first["chunks"] + rest["chunks"]
    assert [c["position"] for c in chunks] == sorted(c["position"] for c in chunks)
    assert [c["heading_path"] for c in chunks] == [[f"Part {n}"] for n in range(1, 6)]
    assert "Section 3 says" in chunks[2]["text"] and chunks[2]["kind"] == "text" and chunks[2]["tokens"] > 0
    beyond = (await fts.client.get(path, params={"offset": 9}, headers=fts.auth())).json()
    assert beyond["chunks"] == [] and beyond["total"] == 5
    assert (await fts.client.get(path, params={"limit": 0}, headers=fts.auth())).status_code == 422
    other = await _dataset(fts, name="Other")
    misplaced = f"/v1/datasets/{other['id']}/documents/{item['document']['id']}/chunks"
    assert (await fts.client.get(misplaced, headers=fts.auth())).status_code == 404


async def test_a_document_left_queued_is_ingested_by_the_servers_sweeper(database_url, tmp_path, models_file,
                                                                        openai_server):
    from engine.knowledge.ports import ParsedDocument
    from schemas.knowledge import Document

    async for kb in _open(database_url, tmp_path, models_file, openai_server, sweep_s=0.2):
        dataset = await _dataset(kb)
        store = kb.api.app.state.knowledge.store  # as a process that stopped before queueing it left it
        left = Document(id="left-behind", tenant_id="default", dataset_id=dataset["id"], source_name="left.txt",
                        content_type="txt", content_hash="h" * 64, size_bytes=40)
        document, created = await store.put_document(left)
        await store.save_content("default", document.id, ParsedDocument("txt", "Harbour cranes lift containers."))
        assert created and document.status == "queued"
        (ready,) = await _until_ingested(kb, dataset["id"])
        assert ready["id"] == "left-behind" and ready["status"] == "ready" and ready["chunk_count"] == 1


# -------------------------------------------------------------------- progress


async def test_the_events_stream_follows_each_document_until_it_is_ingested(kb):
    dataset = await _dataset(kb, embedding_model=EMBEDDING_MODEL, chunking={"chunk_tokens": 32, "overlap_tokens": 0})
    kb.llm.hold_embeddings()
    long_text = "\n\n".join(f"Paragraph {i} tells about harbour cranes lifting container number {i}." for i in range(40))
    upload = await _upload(kb, dataset["id"], {"cranes.txt": long_text.encode(), "rockets.txt": corpus()["rockets.txt"]})
    assert upload.status_code == 202
    await asyncio.to_thread(kb.llm.wait_held, 2)  # both documents wait for their first vectors
    http = await kb.api.http()
    async with http.stream("GET", f"/v1/datasets/{dataset['id']}/events", headers=kb.auth()) as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        reader = SseReader(stream)
        first = await reader.until(lambda m: m["event"] == "progress" and m["data"]["status"] == "embedding"
                                   and m["data"]["source_name"] == "cranes.txt")
        kb.llm.release_embeddings()
        rest = await reader.until(lambda m: m["event"] == "done")
    messages = first + rest
    progress = [m["data"] for m in messages if m["event"] == "progress"]
    assert set(progress[0]) == {"document_id", "source_name", "status", "chunks_done", "chunk_count", "error"}
    cranes = [p for p in progress if p["source_name"] == "cranes.txt"]
    assert cranes[-1]["status"] == "ready" and cranes[-1]["chunks_done"] == cranes[-1]["chunk_count"] > 1
    assert any(p["status"] == "embedding" and p["chunks_done"] < p["chunk_count"] for p in cranes)
    done = messages[-1]
    assert done["event"] == "done" and done["data"] == {"dataset_id": dataset["id"], "ready": 2, "failed": 0}


class SseReader:
    """SSE messages of one live response (comments skipped), read in steps."""

    def __init__(self, response: Any) -> None:
        self._chunks = response.aiter_text()
        self._buffer = ""

    async def until(self, stop: Any) -> list[dict[str, Any]]:
        """The messages up to and including the first one ``stop`` accepts."""
        from .conftest import parse_sse

        messages: list[dict[str, Any]] = []
        async with asyncio.timeout(DEADLINE_S):
            while True:
                while "\n\n" in self._buffer:
                    block, self._buffer = self._buffer.split("\n\n", 1)
                    for message in parse_sse(block + "\n\n"):
                        if "comment" not in message:
                            messages.append(message)
                            if stop(message):
                                return messages
                self._buffer += await self._chunks.__anext__()


# ---------------------------------------------------------------------- search


@pytest.mark.parametrize("mode", ["semantic", "full_text", "hybrid"])
async def test_each_search_mode_ranks_the_matching_document_first(kb, mode):
    dataset = await _dataset(kb, embedding_model=EMBEDDING_MODEL)
    assert (await _upload(kb, dataset["id"], corpus())).status_code == 202
    await _until_ingested(kb, dataset["id"])
    for query, source in (("rocket engines burn kerosene", "rockets.txt"), ("suspension bridge cables", "bridges.pdf"),
                          ("what do pandas eat", "pandas.csv")):
        response = await kb.client.post(f"/v1/datasets/{dataset['id']}/search",
                                        json={"query": query, "mode": mode, "top_k": 3}, headers=kb.auth())
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["mode"] == mode and result["hits"], result
        assert result["hits"][0]["source_name"] == source, (query, result["hits"])
        scores = [hit["score"] for hit in result["hits"]]
        assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
        assert (result["embedding_tokens"] > 0) == (mode != "full_text")
    reranked = await kb.client.post(f"/v1/datasets/{dataset['id']}/search", headers=kb.auth(),
                                    json={"query": "green tea", "mode": mode, "rerank": {"model": RERANK_MODEL}})
    assert reranked.status_code == 200 and reranked.json()["hits"][0]["source_name"] == "tea.md"
    assert "rerank" in reranked.json()["hits"][0]["scores"]


@pytest.mark.parametrize("rerank, field, says", [
    ({"llm": EMBEDDING_MODEL}, "rerank.llm", f"model {EMBEDDING_MODEL!r} is an embedding model, not a chat model"),
    ({"llm": "nosuch"}, "rerank.llm", "unknown model 'nosuch'; known chat models: default"),
    ({"model": "default"}, "rerank.model", "model 'default' is a chat model, not a rerank model"),
    ({"model": "nosuch"}, "rerank.model", f"unknown model 'nosuch'; known rerank models: {RERANK_MODEL}"),
])
async def test_a_rerank_or_relevance_model_of_the_wrong_type_is_422_naming_the_field_before_any_model_call(
        fts, rerank, field, says):
    dataset = await _dataset(fts)
    assert (await _upload(fts, dataset["id"], {"tea.md": corpus()["tea.md"]})).status_code == 202
    await _until_ingested(fts, dataset["id"])
    sent = len(fts.llm.requests)
    response = await fts.client.post(f"/v1/datasets/{dataset['id']}/search", headers=fts.auth(),
                                     json={"query": "green tea", "mode": "full_text", "rerank": rerank})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request" and error["message"].startswith(f"{field}: {says}"), error
    assert error["problems"][0]["loc"] == ["body", *field.split(".")]
    assert len(fts.llm.requests) == sent and fts.llm.rerank_calls == 0


async def test_a_rerank_endpoint_that_fails_is_a_502_rerank_error_naming_the_model(fts):
    from tests.support.openai_script import http_error

    dataset = await _dataset(fts)
    assert (await _upload(fts, dataset["id"], {"tea.md": corpus()["tea.md"]})).status_code == 202
    await _until_ingested(fts, dataset["id"])
    fts.llm.script_embeddings(http_error(400, "documents must not be empty"))
    response = await fts.client.post(f"/v1/datasets/{dataset['id']}/search", headers=fts.auth(),
                                     json={"query": "green tea", "mode": "full_text", "rerank": {"model": RERANK_MODEL}})
    assert response.status_code == 502, response.text
    error = response.json()["error"]
    assert error["type"] == "rerank_error" and RERANK_MODEL in error["message"], error


# ------------------------------------------------------------- tenants and keys


async def test_another_tenants_key_gets_404_on_every_dataset_route(fts):
    dataset = await _dataset(fts)
    (item,) = (await _upload(fts, dataset["id"], {"tea.md": corpus()["tea.md"]})).json()["documents"]
    await _until_ingested(fts, dataset["id"])
    base, doc = f"/v1/datasets/{dataset['id']}", f"/v1/datasets/{dataset['id']}/documents/{item['document']['id']}"
    calls = [("GET", base, None), ("PATCH", base, {"name": "mine"}), ("DELETE", base, None),
             ("GET", f"{base}/documents", None), ("POST", f"{base}/documents", {"name": "x", "text": "y"}),
             ("GET", doc, None), ("GET", f"{doc}/chunks", None), ("DELETE", doc, None), ("POST", f"{doc}/reindex", None),
             ("POST", f"{base}/search", {"query": "tea", "mode": "full_text"}), ("GET", f"{base}/events", None)]
    for method, path, body in calls:
        response = await fts.client.request(method, path, json=body, headers=fts.auth(fts.api.other_key))
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["type"] == "not_found" and "tea" not in response.text
    upload = await _upload(fts, dataset["id"], {"x.txt": b"text"}, key=fts.api.other_key)
    assert upload.status_code == 404
    assert (await fts.client.get("/v1/datasets", headers=fts.auth(fts.api.other_key))).json()["datasets"] == []
    other_doc = await fts.client.get(f"/v1/datasets/{dataset['id']}/documents/{item['document']['id']}",
                                     headers=fts.auth())
    assert other_doc.status_code == 200  # all still there for its tenant
    assert (await fts.client.get(base, headers=fts.auth())).json()["name"] == "Notes"


async def test_a_search_with_nothing_to_search_is_422_naming_query(fts):
    dataset = await _dataset(fts)
    for body in ({"mode": "full_text"}, {"query": "  ", "queries": ["", " "]}):
        response = await fts.client.post(f"/v1/datasets/{dataset['id']}/search", json=body, headers=fts.auth())
        assert response.status_code == 422, response.text
        assert response.json()["error"]["message"].startswith("query: required"), response.text
    typo = await fts.client.post(f"/v1/datasets/{dataset['id']}/search", json={"query": "x", "mode": "fulltext"},
                                 headers=fts.auth())
    assert typo.status_code == 422 and typo.json()["error"]["message"] == (
        "mode: input should be 'semantic', 'full_text' or 'hybrid'; did you mean 'full_text'?")
    only_queries = await fts.client.post(f"/v1/datasets/{dataset['id']}/search", json={"queries": ["tea"]},
                                         headers=fts.auth())
    assert only_queries.status_code == 200, only_queries.text


async def test_an_app_key_reads_and_searches_but_changes_nothing(fts):
    dataset = await _dataset(fts)
    (item,) = (await _upload(fts, dataset["id"], {"tea.md": corpus()["tea.md"]})).json()["documents"]
    await _until_ingested(fts, dataset["id"])
    _record, app_key = await fts.api.keys.create_key("default", name="app", app_id="helpdesk")
    base, doc = f"/v1/datasets/{dataset['id']}", f"/v1/datasets/{dataset['id']}/documents/{item['document']['id']}"
    for path in ("/v1/datasets", base, f"{base}/documents", doc):
        assert (await fts.client.get(path, headers=fts.auth(app_key))).status_code == 200, path
    search = await fts.client.post(f"{base}/search", json={"query": "green tea", "mode": "full_text"},
                                   headers=fts.auth(app_key))
    assert search.status_code == 200 and search.json()["hits"]
    writes = [("POST", "/v1/datasets", {"name": "x"}), ("PATCH", base, {"name": "x"}), ("DELETE", base, None),
              ("POST", f"{base}/documents", {"name": "x", "text": "y"}), ("DELETE", doc, None),
              ("POST", f"{doc}/reindex", None)]
    for method, path, body in writes:
        response = await fts.client.request(method, path, json=body, headers=fts.auth(app_key))
        assert response.status_code == 403, (method, path, response.text)
        assert "whole tenant" in response.json()["error"]["message"]


# -------------------------------------------------------------- quotas, limits


async def test_embedding_tokens_count_in_the_tenants_quota_and_429_when_used_up(kb):
    dataset = await _dataset(kb, embedding_model=EMBEDDING_MODEL)
    await _upload(kb, dataset["id"], {"rockets.txt": corpus()["rockets.txt"]})
    await _until_ingested(kb, dataset["id"])
    usage = (await kb.client.get("/v1/quotas", headers=kb.auth())).json()["tenant"]["usage"]
    assert usage["tokens_today"] > 0 and usage["runs_last_minute"] == 0
    search = await kb.client.post(f"/v1/datasets/{dataset['id']}/search", json={"query": "rocket", "mode": "semantic"},
                                  headers=kb.auth())
    spent = search.json()["embedding_tokens"]
    assert spent > 0
    after = (await kb.client.get("/v1/quotas", headers=kb.auth())).json()["tenant"]["usage"]["tokens_today"]
    assert after == usage["tokens_today"] + spent
    limit = await kb.client.put("/v1/quotas", json={"tokens_per_day": after}, headers=kb.auth())
    assert limit.status_code == 200
    refused = [await kb.client.post(f"/v1/datasets/{dataset['id']}/search", json={"query": "rocket"}, headers=kb.auth()),
               await _upload(kb, dataset["id"], {"tea.md": corpus()["tea.md"]}),
               await kb.client.post(f"/v1/datasets/{dataset['id']}/documents", json={"name": "n", "text": "t"},
                                    headers=kb.auth())]
    for response in refused:
        assert response.status_code == 429, response.text
        assert response.json()["error"]["type"] == "quota_exceeded" and int(response.headers["retry-after"]) >= 1
    assert len((await kb.client.get(f"/v1/datasets/{dataset['id']}/documents", headers=kb.auth())).json()[
        "documents"]) == 1
    other = await kb.client.post("/v1/datasets", json={"name": "b"}, headers=kb.auth(kb.api.other_key))
    assert other.status_code == 201  # another tenant's quota is its own


async def test_a_body_over_the_request_cap_is_413_before_it_is_read(tmp_path, models_file, openai_server):
    async for kb in _open(f"sqlite:///{tmp_path / 'kb.db'}", tmp_path, models_file, openai_server,
                          max_request_bytes=32 * 1024):
        dataset = await _dataset(kb)
        response = await _upload(kb, dataset["id"], {"big.txt": b"x" * (40 * 1024)})
        assert response.status_code == 413 and response.json()["error"]["type"] == "payload_too_large"
        assert "FLOWLOOM_MAX_REQUEST_BYTES" in response.json()["error"]["message"]
        capped = await _upload(kb, dataset["id"], {"ok.txt": b"fine text", "big.txt": b"y " * 14 * 1024})
        assert capped.status_code == 202 and capped.json()["accepted"] == 2  # under both caps


# ----------------------------------------------------------------- runs search


async def test_a_run_of_the_api_searches_the_tenants_dataset_and_its_tokens_count_as_the_runs(kb):
    dataset = await _dataset(kb, embedding_model=EMBEDDING_MODEL)
    await _upload(kb, dataset["id"], corpus())
    await _until_ingested(kb, dataset["id"])
    workflow = {"id": "ask", "name": "ask", "nodes": [
        {"id": "start", "type": "start"},
        {"id": "kr", "type": "knowledge_retrieval", "config": {"datasets": [dataset["id"]], "mode": "hybrid",
                                                               "top_k": 1}},
        {"id": "say", "type": "answer", "config": {"text": "{{ kr.quote }}"}}],
        "edges": [{"id": "e1", "source": "start", "target": "kr"}, {"id": "e2", "source": "kr", "target": "say"}]}
    response = await kb.client.post("/v1/runs", json={"workflow": workflow, "message": "suspension bridge cables"},
                                    headers=kb.auth())
    assert response.status_code == 200, response.text
    run = response.json()
    assert run["status"] == "succeeded", run
    assert "Suspension bridges hang the bridge deck" in run["answer"]
    assert run["tokens_in"] > 0  # the query's embedding, as the node's usage
    other = await kb.client.post("/v1/runs", json={"workflow": workflow, "message": "bridges"},
                                 headers=kb.auth(kb.api.other_key))
    # another tenant's dataset is as missing as one that does not exist: refused before anything runs
    assert other.status_code == 422 and other.json()["error"]["type"] == "unknown_dataset", other.text
    assert other.json()["error"]["problems"][0]["node_id"] and dataset["id"] in other.json()["error"]["message"]


async def test_a_new_embedding_model_reindexes_the_dataset_and_semantic_search_follows(kb):
    dataset = await _dataset(kb)  # full text only
    await _upload(kb, dataset["id"], {"rockets.txt": corpus()["rockets.txt"], "tea.md": corpus()["tea.md"]})
    await _until_ingested(kb, dataset["id"])
    before = await kb.client.post(f"/v1/datasets/{dataset['id']}/search", json={"query": "kerosene",
                                                                                "mode": "semantic"},
                                  headers=kb.auth())
    assert before.status_code == 200 and before.json()["notes"]  # no index: searched by full text, and said
    changed = await kb.client.patch(f"/v1/datasets/{dataset['id']}", json={"embedding_model": EMBEDDING_MODEL},
                                    headers=kb.auth())
    assert changed.status_code == 200, changed.text
    assert changed.json()["embedding_model"] == EMBEDDING_MODEL
    deadline = time.monotonic() + DEADLINE_S
    while (current := (await kb.client.get(f"/v1/datasets/{dataset['id']}", headers=kb.auth())).json())[
            "active_index"] is None or current["building_index"] is not None:
        assert time.monotonic() < deadline, current
        await asyncio.sleep(0.05)
    assert current["active_index"]["embedding_model"] == EMBEDDING_MODEL
    after = await kb.client.post(f"/v1/datasets/{dataset['id']}/search",
                                 json={"query": "rocket engines burn kerosene", "mode": "semantic"}, headers=kb.auth())
    assert after.json()["hits"][0]["source_name"] == "rockets.txt" and after.json()["embedding_tokens"] > 0


async def test_an_app_keys_searches_count_in_its_apps_quota(kb):
    dataset = await _dataset(kb, embedding_model=EMBEDDING_MODEL)
    await _upload(kb, dataset["id"], {"rockets.txt": corpus()["rockets.txt"]})
    await _until_ingested(kb, dataset["id"])
    _record, app_key = await kb.api.keys.create_key("default", name="app", app_id="helpdesk")
    helpdesk = {**hello_workflow(), "id": "helpdesk"}  # an app quota is for an app the tenant has
    assert (await kb.client.post("/v1/workflows", json=helpdesk, headers=kb.auth())).status_code == 201
    limited = await kb.client.put("/v1/quotas/apps/helpdesk", json={"tokens_per_day": 1}, headers=kb.auth())
    assert limited.status_code == 200
    search = {"query": "rocket engines", "mode": "semantic"}
    first = await kb.client.post(f"/v1/datasets/{dataset['id']}/search", json=search, headers=kb.auth(app_key))
    assert first.status_code == 200 and first.json()["embedding_tokens"] > 0
    refused = await kb.client.post(f"/v1/datasets/{dataset['id']}/search", json=search, headers=kb.auth(app_key))
    assert refused.status_code == 429 and "helpdesk" in refused.json()["error"]["message"]
    app_usage = (await kb.client.get("/v1/quotas/apps/helpdesk", headers=kb.auth())).json()["usage"]
    assert app_usage["tokens_today"] == first.json()["embedding_tokens"]
    tenant = await kb.client.post(f"/v1/datasets/{dataset['id']}/search", json=search, headers=kb.auth())
    assert tenant.status_code == 200  # the tenant's own key is not held by the app's limit


async def test_the_catalog_names_the_registrys_embedding_models_apart_from_chat_models(fts):
    catalog = (await fts.client.get("/v1/node-kinds", headers=fts.auth())).json()
    assert catalog["embedding_models"] == [EMBEDDING_MODEL]
    assert EMBEDDING_MODEL not in catalog["models"] and "default" in catalog["models"]


async def test_a_dataset_whose_embedding_key_is_not_set_is_made_with_a_warning(kb, monkeypatch):
    monkeypatch.delenv(SCRIPTED_KEY_ENV)
    made = await kb.client.post("/v1/datasets", json={"name": "kb", "embedding_model": EMBEDDING_MODEL},
                                headers=kb.auth())
    assert made.status_code == 201, made.text
    [warning] = made.json()["warnings"]
    assert (warning["code"], warning["field"], warning["variable"]) == (
        "missing_api_key", "embedding_model", SCRIPTED_KEY_ENV)
    assert repr(EMBEDDING_MODEL) in warning["message"] and "/reindex" in warning["message"]
    text_only = await kb.client.post("/v1/datasets", json={"name": "fts"}, headers=kb.auth())
    assert (text_only.status_code, text_only.json()["warnings"]) == (201, [])
    monkeypatch.setenv(SCRIPTED_KEY_ENV, "sk-value-never-shown")
    keyed = await kb.client.post("/v1/datasets", json={"name": "kb3", "embedding_model": EMBEDDING_MODEL},
                                 headers=kb.auth())
    assert (keyed.status_code, keyed.json()["warnings"]) == (201, [])
    assert "sk-value-never-shown" not in keyed.text


async def test_a_semantic_search_whose_embedding_key_is_not_set_is_503_missing_api_key_before_any_call(kb, monkeypatch):
    made = await kb.client.post("/v1/datasets", json={"name": "kb", "embedding_model": EMBEDDING_MODEL},
                                headers=kb.auth())
    dataset = made.json()["id"]
    monkeypatch.delenv(SCRIPTED_KEY_ENV)
    calls = kb.llm.embedding_calls
    refused = await kb.client.post(f"/v1/datasets/{dataset}/search", json={"query": "rocket", "mode": "semantic"},
                                   headers=kb.auth())
    assert refused.status_code == 503, refused.text
    error = refused.json()["error"]
    assert error["type"] == "missing_api_key" and SCRIPTED_KEY_ENV in error["message"], error
    assert error["message"].startswith("embedding_model: ") and "nothing was searched" in error["message"]
    assert kb.llm.embedding_calls == calls
    hybrid = await kb.client.post(f"/v1/datasets/{dataset}/search", json={"query": "rocket", "mode": "hybrid"},
                                  headers=kb.auth())  # falls back to full text, saying so
    assert hybrid.status_code == 200, hybrid.text
