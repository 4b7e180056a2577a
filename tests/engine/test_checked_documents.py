"""A document checked by its caller (a route, with the app's settings) is not checked
and encoded a second time by the compile when those caps are the process's own; with
other caps the compile checks it against its own, as before."""

from __future__ import annotations

import pytest

import engine.documents as documents
from engine.documents import canonical_document, canonical_json, checked_document_text, document_caps
from engine.errors import CompileError
from engine.settings import Settings, get_settings
from tests.support.workflows import build, node


def _doc() -> dict:
    return build([node("say", "answer", {"text": "hi"})], [])


def test_the_checked_text_is_the_canonical_text_and_the_caps_of_its_settings() -> None:
    doc = _doc()
    text, caps = checked_document_text(doc, get_settings())
    assert text == canonical_json(doc) and caps == document_caps(get_settings())


def test_the_compile_takes_the_text_of_a_document_checked_with_its_own_caps() -> None:
    doc = _doc()
    marked = ("a text only the caller could have made", document_caps(get_settings()))
    found, text = canonical_document(doc, marked)
    assert found == doc and found is not doc  # a copy, as an unchecked document gets
    assert text == marked[0]


def test_a_document_checked_with_other_caps_is_checked_again_with_the_process_caps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doc = build([node(f"n{i}", "template", {"template": "x"}) for i in range(5)], [])
    checked = checked_document_text(doc, Settings(max_nodes=1000))  # the route's looser caps
    stricter = Settings(max_nodes=3)  # the process's own
    monkeypatch.setattr(documents, "get_settings", lambda: stricter)
    with pytest.raises(CompileError) as refused:
        canonical_document(doc, checked)
    assert [p.code for p in refused.value.problems] == ["too_many_nodes"]


def test_a_caller_checking_over_its_caps_is_refused_as_check_document_limits_words_it() -> None:
    doc = build([node("n" * 300, "answer", {"text": "x"})], [])
    with pytest.raises(CompileError) as refused:
        checked_document_text(doc, Settings(max_id_length=64))
    assert [p.code for p in refused.value.problems] == ["too_long"]
