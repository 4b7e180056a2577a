"""The chunker: heading paths, separators, token sizes, parent-child and QA chunks."""

from __future__ import annotations

from engine.knowledge.ports import ParsedDocument
from nodes.knowledge.chunking import TextChunker, sections
from schemas.knowledge import ChunkingSettings, ChunkKind, ParentChildSettings

chunker = TextChunker()

GUIDE = """Intro before any heading.

# Install

Download the package.

## Linux

Run apt install flowloom.

```
# this is a comment in code, not a heading
```

## Mac

Run brew install flowloom.

# Use

Start it with flowloom serve.
"""


def test_headings_cut_sections_and_their_path_prefixes_the_search_text():
    drafts = chunker.split(ParsedDocument("markdown", GUIDE), ChunkingSettings())
    assert [d.heading_path for d in drafts] == [[], ["Install"], ["Install", "Linux"], ["Install", "Mac"], ["Use"]]
    linux = drafts[2]
    assert linux.text.startswith("Run apt install flowloom.") and "# this is a comment" in linux.text
    assert linux.search_text == "Install > Linux\n" + linux.text
    assert drafts[0].search_text == drafts[0].text == "Intro before any heading."
    assert [d.position for d in drafts] == list(range(5)) and all(d.kind == ChunkKind.text for d in drafts)
    assert all(d.tokens > 0 for d in drafts)


def test_without_split_headings_the_document_is_one_flow():
    drafts = chunker.split(ParsedDocument("markdown", GUIDE), ChunkingSettings(split_headings=False))
    assert len(drafts) == 1 and drafts[0].heading_path == [] and drafts[0].text.startswith("Intro")


def test_chunks_respect_the_token_size():
    text = "\n\n".join(f"Paragraph {i} talks about topic {i} in a sentence of some length." for i in range(60))
    drafts = chunker.split(ParsedDocument("txt", text), ChunkingSettings(chunk_tokens=64, overlap_tokens=0))
    assert len(drafts) > 5
    assert all(d.tokens <= 64 + 8 for d in drafts)  # the estimate errs high, never far
    joined = " ".join(d.text for d in drafts)
    assert all(f"Paragraph {i} " in joined for i in range(60))


def test_separators_split_first():
    text = "alpha one\n---\nbeta two\n---\ngamma three"
    drafts = chunker.split(ParsedDocument("txt", text), ChunkingSettings(separators=["\n---\n"]))
    assert [d.text for d in drafts] == ["alpha one", "beta two", "gamma three"]
    plain = chunker.split(ParsedDocument("txt", text), ChunkingSettings())
    assert len(plain) == 1


def test_parent_child_children_follow_their_parent_and_name_its_position():
    text = "\n\n".join(f"Sentence number {i} is about subject {i} and more words." for i in range(40))
    settings = ChunkingSettings(chunk_tokens=128, overlap_tokens=0,
                                parent_child=ParentChildSettings(child_tokens=32, child_overlap_tokens=0))
    drafts = chunker.split(ParsedDocument("txt", text), settings)
    parents = [d for d in drafts if d.kind == ChunkKind.parent]
    children = [d for d in drafts if d.kind == ChunkKind.child]
    assert len(parents) >= 2 and len(children) > len(parents)
    assert [d.position for d in drafts] == list(range(len(drafts)))
    for child in children:
        parent = drafts[child.parent]
        assert parent.kind == ChunkKind.parent and child.text in parent.text
        assert child.position > parent.position
    assert all(c.tokens <= 32 + 6 for c in children)


def test_qa_pairs_become_one_qa_chunk_each_searched_by_question():
    drafts = chunker.split(ParsedDocument("csv_qa", qa_pairs=[("What do pandas eat?", "Bamboo."), ("Q2?", "A2")]),
                           ChunkingSettings())
    assert [(d.kind, d.search_text, d.text) for d in drafts] == [
        (ChunkKind.qa, "What do pandas eat?", "Q: What do pandas eat?\nA: Bamboo."),
        (ChunkKind.qa, "Q2?", "Q: Q2?\nA: A2")]


def test_setext_headings_and_text_before_them():
    found = sections("lead\n\nTitle\n=====\n\nbody\n\nSub\n---\n\nmore")
    assert [(s.heading_path, s.text) for s in found] == [([], "lead"), (["Title"], "body"), (["Title", "Sub"], "more")]


def test_chinese_text_is_split_by_tokens_with_nothing_lost():
    sentence = "知识库把文档切分成片段，并为每个片段计算向量。"
    text = "\n\n".join(f"第{i}段：{sentence}" for i in range(30))
    drafts = chunker.split(ParsedDocument("markdown", f"# 指南\n\n{text}"), ChunkingSettings(chunk_tokens=64,
                                                                                            overlap_tokens=0))
    assert len(drafts) > 3 and all(d.heading_path == ["指南"] for d in drafts)
    joined = "".join(d.text for d in drafts)
    assert all(f"第{i}段" in joined for i in range(30))
