"""The caps check of a published version's document (:func:`api.limits.check_published`):
the outcome of :func:`api.limits.check_document`, remembered by the version's content hash
and the caps - checked again under other caps, never remembered when over them."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

import api.limits as limits
from api.limits import check_document, check_published
from engine.compiler import content_hash
from engine.documents import document_caps
from engine.errors import CompileError
from engine.settings import Settings

from .conftest import hello_workflow, open_api


@pytest.fixture(autouse=True)
def _fresh(monkeypatch) -> None:
    monkeypatch.setattr(limits, "_PUBLISHED", type(limits._PUBLISHED)())


def _walks(monkeypatch) -> list[int]:
    """A list that grows by one each time a document is walked and encoded."""
    calls: list[int] = []
    real = limits.checked_document_text

    def counted(doc: Any, settings: Settings) -> Any:
        calls.append(1)
        return real(doc, settings)

    monkeypatch.setattr(limits, "checked_document_text", counted)
    return calls


def _chain(count: int) -> dict[str, Any]:
    ids = ["start", *[f"t{i}" for i in range(count - 2)], "say"]
    nodes: list[dict[str, Any]] = [{"id": "start", "type": "start"}]
    nodes += [{"id": i, "type": "template"} for i in ids[1:-1]]
    nodes.append({"id": "say", "type": "answer", "config": {"text": "x"}})
    return {"id": "c", "nodes": nodes, "edges": [{"source": a, "target": b} for a, b in pairwise(ids)]}


def test_the_same_outcome_as_check_document_walked_once(tmp_path, monkeypatch) -> None:
    settings = Settings(home=tmp_path)
    doc = hello_workflow()
    walks = _walks(monkeypatch)
    first = check_published(doc, content_hash(doc), settings)
    again = check_published(doc, content_hash(doc), settings)
    assert first == again == check_document(doc, settings)
    assert len(walks) == 2  # the first check_published and check_document itself


def test_other_caps_check_again_and_a_document_over_them_is_refused_each_time(tmp_path, monkeypatch) -> None:
    doc = _chain(5)
    digest = content_hash(doc)
    walks = _walks(monkeypatch)
    check_published(doc, digest, Settings(home=tmp_path))
    tight = Settings(home=tmp_path, max_nodes=4)
    for _ in range(2):
        with pytest.raises(CompileError) as refused:
            check_published(doc, digest, tight)
        assert refused.value.problems[0].code == "too_many_nodes"
    assert len(walks) == 3
    assert check_published(doc, digest, Settings(home=tmp_path))[1] == document_caps(Settings(home=tmp_path))
    assert len(walks) == 3  # the first caps' text still kept


def test_long_documents_and_many_versions_are_not_all_kept(tmp_path, monkeypatch) -> None:
    settings = Settings(home=tmp_path)
    monkeypatch.setattr(limits, "_PUBLISHED_MAX", 3)
    monkeypatch.setattr(limits, "_PUBLISHED_CHARS", 400)
    big = _chain(30)
    walks = _walks(monkeypatch)
    check_published(big, content_hash(big), settings)
    check_published(big, content_hash(big), settings)
    assert len(walks) == 2 and not limits._PUBLISHED
    for count in range(3, 8):
        doc = _chain(count)
        check_published(doc, content_hash(doc), settings)
    assert len(limits._PUBLISHED) == 3


async def test_a_published_version_over_caps_lowered_since_is_refused(tmp_path) -> None:
    settings = Settings(home=tmp_path / "h", database_url=f"sqlite+aiosqlite:///{tmp_path / 'h'}.db")
    async with open_api(settings) as api:
        doc = hello_workflow()
        assert (await api.client.post("/v1/workflows", json=doc, headers=api.auth())).status_code == 201
        url = f"/v1/workflows/{doc['id']}"
        assert (await api.client.post(f"{url}/publish", json={}, headers=api.auth())).status_code == 201
        ran = await api.client.post(f"{url}/runs", json={"inputs": {"name": "Ada"}}, headers=api.auth())
        assert ran.status_code == 200 and ran.json()["status"] == "succeeded"
        api.app.state.settings = Settings(home=tmp_path / "h", max_nodes=len(doc["nodes"]) - 1)
        refused = await api.client.post(f"{url}/runs", json={"inputs": {"name": "Ada"}}, headers=api.auth())
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["problems"][0]["code"] == "too_many_nodes"
