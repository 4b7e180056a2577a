"""Splitting parsed documents into chunks: the engine's :class:`~engine.knowledge.ports.Chunker`.

Sizes are tokens of OpenAI's cl100k tokenizer, counted by ``semantic-text-splitter``
(its tokenizer is compiled in: nothing is downloaded), in a child process of the
ingesting process when it can (:mod:`nodes.knowledge.splitting`: the splitter holds the
interpreter lock while it works; the chunks are the same either way). The splitter fills each chunk
with the largest semantic units that fit - sections, paragraphs, lines, sentences,
words - so a chunk breaks a sentence only when one sentence alone is too large.

The steps, by :class:`~schemas.knowledge.ChunkingSettings`:

1. ``split_headings`` (Markdown, HTML, DOCX and raw text; not .txt files or PDFs,
   whose ``#`` lines are text): the text is cut into sections at its Markdown headings (found by
   markdown-it, so a ``#`` inside a code block is not a heading); each section keeps
   its heading path (``["Install", "Linux"]``), which is put before the chunk's
   ``search_text`` ("Install > Linux") so a chunk that never names its subject is still
   found by it.
2. ``separators``: each section is cut at every separator given, in order, before the
   splitter's own split points (a ``"\\n---\\n"`` between FAQ entries, say).
3. The splitter cuts each piece to ``chunk_tokens`` with ``overlap_tokens`` shared.
4. ``parent_child``: those chunks are parents (returned by a search); each is split
   again to ``child_tokens`` (searched). A parent is followed by its children, which
   name its position.

QA documents (CSV/JSONL pairs) become one ``qa`` chunk per pair, searched by the
question and returned as ``Q: question`` / ``A: answer``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from engine.knowledge.ports import ParsedDocument
from schemas.knowledge import ChunkDraft, ChunkingSettings, ChunkKind

from .splitting import shared

__all__ = ["HEADING_SEPARATOR", "TextChunker", "qa_text", "sections"]

#: what joins a heading path in ``search_text``
HEADING_SEPARATOR = " > "
_MARKDOWN_TYPES = frozenset({"markdown", "html", "docx"})
#: types whose ``#`` lines are headings (HTML and DOCX headings were made Markdown; raw
#: text is often Markdown); a .txt or a PDF's "# 3" is just text
_HEADED_TYPES = _MARKDOWN_TYPES | {"text"}
#: a line that could make a heading: a setext underline (after any quote or list indent);
#: ATX headings need a ``#``. Text with neither skips markdown-it, which costs ~as much
#: as the splitter itself (a conservative filter: markdown-it still decides)
_SETEXT_LINE = re.compile(r"^[ \t>]*(?:=+|-+)[ \t]*$", re.M)


@dataclass(slots=True)
class Section:
    """Text under one heading path (the text before the first heading has an empty path)."""

    heading_path: list[str]
    text: str


def qa_text(question: str, answer: str) -> str:
    """How a QA chunk reads when returned: ``Q: ...`` then ``A: ...`` on the next line."""
    return f"Q: {question}\nA: {answer}" if answer else f"Q: {question}"


@functools.lru_cache(maxsize=1)
def _markdown() -> Any:
    """The CommonMark block parser (built once: it compiles its rules). Inline parsing
    is off: a heading's title is its inline token's raw ``content``, set by the block
    pass, and the inline pass costs twice the rest."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").disable("inline")


def _tokens(text: str) -> int:
    from nodes.llm.call import estimate_tokens

    return estimate_tokens(text)


def sections(text: str) -> list[Section]:
    """``text`` cut at its Markdown headings (ATX and setext; not inside code blocks),
    each section with its heading path; sections with no text of their own are left out."""
    if "#" not in text and not _SETEXT_LINE.search(text):
        body = text.strip()
        return [Section([], body)] if body else []
    lines = text.split("\n")
    tokens = _markdown().parse(text)
    headings: list[tuple[int, int, int, str]] = []  # (first line, end line, level, title)
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.map is not None:
            title = tokens[i + 1].content.strip() if i + 1 < len(tokens) else ""
            headings.append((token.map[0], token.map[1], int(token.tag[1:]), title))
    found: list[Section] = []
    path: list[tuple[int, str]] = []
    start = 0
    for first, end, level, title in headings:
        body = "\n".join(lines[start:first]).strip()
        if body:
            found.append(Section([t for _, t in path], body))
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, title))
        start = end
    body = "\n".join(lines[start:]).strip()
    if body:
        found.append(Section([t for _, t in path], body))
    return found


def _cut(text: str, separators: list[str]) -> list[str]:
    """``text`` cut at every separator, in the order given (empty pieces dropped)."""
    pieces = [text]
    for sep in separators:
        if sep:
            pieces = [part for piece in pieces for part in piece.split(sep)]
    return [p.strip() for p in pieces if p.strip()]


class TextChunker:
    """The chunker of every parsed type (module docstring). Thread-safe."""

    def split(self, document: ParsedDocument, settings: ChunkingSettings) -> list[ChunkDraft]:
        """The chunks in position order (see the module docstring)."""
        if document.qa_pairs is not None:
            return [
                ChunkDraft(
                    position=i,
                    kind=ChunkKind.qa,
                    text=qa_text(q, a),
                    search_text=q,
                    tokens=_tokens(qa_text(q, a)),
                )
                for i, (q, a) in enumerate(document.qa_pairs)
            ]
        markdown = document.content_type in _MARKDOWN_TYPES
        headed = settings.split_headings and document.content_type in _HEADED_TYPES
        parts = sections(document.text) if headed else [Section([], document.text.strip())]
        # every piece of the document split in one request (to the splitting child, when
        # there is one), then each chunk's children in one more
        where = [(section, piece) for section in parts for piece in _cut(section.text, settings.separators)]
        splitting = shared()
        cut = splitting.chunks(
            markdown, settings.chunk_tokens, settings.overlap_tokens, [piece for _, piece in where]
        )
        texts = [
            (section, text)
            for (section, _), chunks in zip(where, cut, strict=True)
            for text in chunks
            if text.strip()
        ]
        pc = settings.parent_child
        children: list[list[str]] | None = None
        if pc is not None:
            overlap = min(pc.child_overlap_tokens, pc.child_tokens // 2)
            children = splitting.chunks(markdown, pc.child_tokens, overlap, [text for _, text in texts])
        drafts: list[ChunkDraft] = []
        for i, (section, text) in enumerate(texts):
            self._add(drafts, text, section.heading_path, None if children is None else children[i])
        return drafts

    @staticmethod
    def _add(drafts: list[ChunkDraft], text: str, path: list[str], children: list[str] | None) -> None:
        """Append the chunk ``text`` of the section under ``path``; with ``children`` (its
        pieces under ``parent_child``) as a parent followed by them."""
        prefix = HEADING_SEPARATOR.join(path)

        def search(t: str) -> str:
            return f"{prefix}\n{t}" if prefix else t

        if children is None:
            drafts.append(
                ChunkDraft(
                    position=len(drafts),
                    text=text,
                    search_text=search(text),
                    heading_path=list(path),
                    tokens=_tokens(text),
                )
            )
            return
        parent = len(drafts)
        drafts.append(
            ChunkDraft(
                position=parent,
                kind=ChunkKind.parent,
                text=text,
                search_text=search(text),
                heading_path=list(path),
                tokens=_tokens(text),
            )
        )
        for child in children:
            if child.strip():
                drafts.append(
                    ChunkDraft(
                        position=len(drafts),
                        kind=ChunkKind.child,
                        text=child,
                        search_text=search(child),
                        heading_path=list(path),
                        parent=parent,
                        tokens=_tokens(child),
                    )
                )
