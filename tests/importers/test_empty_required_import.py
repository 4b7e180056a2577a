"""A source node whose required field is empty (a FastGPT answer node with no text) converts
to a node the compiler reports as ``empty_required``. The importer treats it like every
other compile error of a converted node: a plain import fails naming the source node and
the field, so the author fills it in; ``allow_partial`` puts a failing placeholder in its
place. The corpus has no such node (tests/importers/test_corpus.py imports it unchanged)."""

from __future__ import annotations

import json

import pytest

from nodes.importers import ImportFailed
from tests.support.catalog import import_workflow

from . import fastgpt_docs as fg


def empty_answer() -> bytes:
    doc = fg.wrap([fg.start(), fg.node("say", "answerNode", [fg.inp("text", "  ", "any")])], [fg.edge("start", "say")])
    return json.dumps(doc).encode()


def test_a_plain_import_fails_naming_the_source_node_and_the_field():
    with pytest.raises(ImportFailed) as failed:
        import_workflow(empty_answer())
    errors = [(i.code, i.node_id, i.message) for i in failed.value.report if i.severity == "error"]
    assert errors == [("compile_empty_required", "say", "text is required and empty (path config.text)")]


def test_a_partial_import_puts_a_placeholder_saying_why():
    result = import_workflow(empty_answer(), allow_partial=True)
    say = next(n for n in result.workflow["nodes"] if n["id"] == "say")
    assert say["type"] == "unsupported" and "text is required and empty" in say["config"]["reason"]
