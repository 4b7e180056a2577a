"""Reading uploaded documents: the engine's :class:`~engine.knowledge.ports.Parser`.

The real type is read from the bytes, never trusted from the name: ``filetype`` knows
PDF and DOCX (and other binary formats, which are refused); anything else must decode
as text. The name's extension must agree with the content - ``report.pdf`` holding
plain text, or ``notes.docx`` holding a PDF, is a ``type_mismatch`` - because an upload
whose name lies is more often a mistake (a renamed export) than a format to guess at.

Formats and libraries:

========== ===================== =====================================================
type       extensions            how
========== ===================== =====================================================
txt        .txt .text            the text as it is
markdown   .md .markdown         the text as it is (headings are already ``#`` lines)
html       .html .htm            BeautifulSoup: scripts and styles dropped, ``h1``-``h6``
                                 become ``#`` lines, blocks become paragraphs
pdf        .pdf                  pypdf, page by page (an encrypted PDF that opens with
                                 no password is read; one that needs a password is
                                 ``encrypted``; one pypdf cannot read is ``corrupt``)
docx       .docx                 python-docx: heading and title styles become ``#``
                                 lines, tables rows of ``a | b`` cells
csv_qa     .csv                  ``csv``: columns ``q``/``a`` or ``question``/``answer``
                                 (FastGPT's QA datasets), one pair per row; a row with
                                 an answer but no question is refused, naming the row;
                                 separated by ``,`` ``;`` tab or ``|`` (the header's)
jsonl_qa   .jsonl                one JSON object per line with ``q``/``a`` or
                                 ``question``/``answer``
text       (no extension)        raw text
========== ===================== =====================================================

pypdf's own log messages (``EOF marker not found`` ...) are silenced while parsing: a
PDF it cannot read is a ``corrupt`` refusal already, and a log line on the server's
stderr would tell the operator nothing the refusal does not.

Every refusal is a :class:`~engine.knowledge.ports.DocumentRejected` (422) naming the
file; the size cap is the service's (checked before parsing).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import PurePosixPath

from engine.knowledge.ports import DocumentRejected, ParsedDocument
from engine.plain_errors import a_or_an

__all__ = ["DocumentParser", "TEXT_EXTENSIONS", "content_type_for"]

#: extension -> the type its content must have
TEXT_EXTENSIONS = {
    ".txt": "txt",
    ".text": "txt",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".csv": "csv_qa",
    ".jsonl": "jsonl_qa",
    "": "text",
}
BINARY_EXTENSIONS = {".pdf": "pdf", ".docx": "docx"}
_QUESTION_KEYS = ("q", "question", "问题")
_ANSWER_KEYS = ("a", "answer", "答案")
_DROPPED_TAGS = ("script", "style", "noscript", "template", "svg", "head")
_BLOCK_TAGS = (
    "p",
    "div",
    "section",
    "article",
    "li",
    "tr",
    "br",
    "pre",
    "blockquote",
    "table",
    "ul",
    "ol",
    "dd",
    "dt",
    "header",
    "footer",
    "main",
    "nav",
    "aside",
    "figure",
    "figcaption",
)


def content_type_for(filename: str) -> str | None:
    """The type a file of that name must hold (None: an extension no parser reads)."""
    ext = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
    return TEXT_EXTENSIONS.get(ext) or BINARY_EXTENSIONS.get(ext)


def _reject(filename: str, message: str, reason: str) -> DocumentRejected:
    return DocumentRejected(f"{filename}: {message}", reason=reason)


class DocumentParser:
    """The parser of every supported format (module docstring). Stateless and thread-safe:
    the service calls it in a worker thread, since PDF parsing can take seconds."""

    def parse(self, data: bytes, filename: str) -> ParsedDocument:
        """The document's text (or QA pairs). Raises DocumentRejected with ``reason``
        ``type_mismatch``, ``encrypted``, ``corrupt``, ``empty`` or ``unsupported``."""
        ext = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
        claimed = TEXT_EXTENSIONS.get(ext) or BINARY_EXTENSIONS.get(ext)
        if claimed is None:
            raise _reject(
                filename,
                f"unsupported file type {ext!r} (supported: .txt, .md, .html, .pdf, .docx, "
                f".csv and .jsonl question-answer files)",
                "unsupported",
            )
        detected = _detect(data)
        if detected in ("pdf", "docx"):
            if claimed != detected:
                raise _reject(
                    filename,
                    f"the name says {claimed} but the content is a {detected.upper()} file",
                    "type_mismatch",
                )
            parsed = _parse_pdf(data, filename) if detected == "pdf" else _parse_docx(data, filename)
        elif detected is not None:
            if claimed in BINARY_EXTENSIONS.values():
                raise _reject(
                    filename,
                    f"the name says {claimed} but the content is {a_or_an(detected)} file",
                    "type_mismatch",
                )
            raise _reject(filename, f"{a_or_an(detected)} file cannot be read as text", "unsupported")
        else:
            text = _decode(data)
            if text is None:
                if claimed in BINARY_EXTENSIONS.values():
                    raise _reject(
                        filename,
                        f"the name says {claimed} but the content is not a {claimed.upper()} file",
                        "type_mismatch" if data else "empty",
                    )
                raise _reject(filename, "the content is binary, not text", "unsupported")
            if claimed in BINARY_EXTENSIONS.values():
                if not text.strip():
                    raise _reject(filename, "the file is empty", "empty")
                raise _reject(filename, f"the name says {claimed} but the content is text", "type_mismatch")
            if claimed in ("txt", "markdown") and _HTML_DOCUMENT.match(text):
                # indexed as text, its tags and scripts would be searched and quoted
                raise _reject(
                    filename,
                    f"the name says {claimed} but the content is an HTML document (name it .html: "
                    "its text is then read without the markup)",
                    "type_mismatch",
                )
            parsed = _parse_text(text, claimed, filename)
        if not parsed.qa_pairs and not parsed.text.strip():
            raise _reject(filename, "no text found in the document", "empty")
        return parsed


#: a whole HTML document (what a browser's "save page" or an export writes), not a
#: Markdown file with some inline HTML
_HTML_DOCUMENT = re.compile(r"\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html[\s>])", re.IGNORECASE | re.DOTALL)


def _detect(data: bytes) -> str | None:
    """``pdf``, ``docx``, another binary type's extension, or None (maybe text)."""
    import filetype

    kind = filetype.guess(data[:8192]) if data else None
    if kind is None:
        # filetype wants the PDF magic at byte 0; PDF readers accept it within the first 1024
        return "pdf" if b"%PDF-" in data[:1024] else None
    return kind.extension


def _decode(data: bytes) -> str | None:
    """The bytes as text: UTF-8 (with or without BOM), UTF-16 with a BOM, else GB18030
    (Chinese exports); None when it is binary (NUL bytes, or decodes as nothing)."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    if b"\x00" in data:
        return None
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return None


def _parse_text(text: str, content_type: str, filename: str) -> ParsedDocument:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if content_type == "html":
        return ParsedDocument("html", _html_to_markdown(text))
    if content_type == "csv_qa":
        return ParsedDocument("csv_qa", qa_pairs=_csv_pairs(text, filename))
    if content_type == "jsonl_qa":
        return ParsedDocument("jsonl_qa", qa_pairs=_jsonl_pairs(text, filename))
    return ParsedDocument(content_type, text.strip("\n"))


def _html_to_markdown(html: str) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(list(_DROPPED_TAGS)):
        tag.decompose()
    for level in range(1, 7):
        for tag in soup.find_all(f"h{level}"):
            title = " ".join(tag.get_text(" ").split())
            tag.replace_with(f"\n\n{'#' * level} {title}\n\n" if title else "\n")
    for tag in soup.find_all("li"):
        tag.insert(0, "- ")
    for tag in soup.find_all(list(_BLOCK_TAGS)):
        tag.insert_before("\n")
        tag.insert_after("\n")
    lines = [" ".join(line.split()) for line in soup.get_text().split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


_pypdf_quiet_lock = threading.Lock()
_pypdf_quiet_depth = 0
_pypdf_saved_level = logging.NOTSET


@contextmanager
def _pypdf_quiet() -> Iterator[None]:
    """pypdf's loggers silenced for the block. Counted under a lock: PDFs are parsed in
    worker threads at once, and the last one out restores the operator's level."""
    global _pypdf_quiet_depth, _pypdf_saved_level
    logger = logging.getLogger("pypdf")
    with _pypdf_quiet_lock:
        if _pypdf_quiet_depth == 0:
            _pypdf_saved_level = logger.level
            logger.setLevel(logging.CRITICAL + 1)
        _pypdf_quiet_depth += 1
    try:
        yield
    finally:
        with _pypdf_quiet_lock:
            _pypdf_quiet_depth -= 1
            if _pypdf_quiet_depth == 0:
                logger.setLevel(_pypdf_saved_level)


def _parse_pdf(data: bytes, filename: str) -> ParsedDocument:
    with _pypdf_quiet():
        return _read_pdf(data, filename)


def _read_pdf(data: bytes, filename: str) -> ParsedDocument:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise _reject(
                filename, "the PDF is encrypted with a password; upload an unprotected copy", "encrypted"
            )
        pages = [page.extract_text() or "" for page in reader.pages]
    except DocumentRejected:
        raise
    except FileNotDecryptedError:
        raise _reject(
            filename, "the PDF is encrypted with a password; upload an unprotected copy", "encrypted"
        ) from None
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
        raise _reject(
            filename, f"the PDF cannot be read ({type(exc).__name__}: {str(exc)[:200]})", "corrupt"
        ) from None
    except Exception as exc:
        raise _reject(filename, f"the PDF cannot be read ({type(exc).__name__})", "corrupt") from None
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    return ParsedDocument("pdf", text)


def _parse_docx(data: bytes, filename: str) -> ParsedDocument:
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
        blocks: list[str] = []
        for item in document.iter_inner_content():
            if isinstance(item, Table):
                rows = [" | ".join(" ".join(cell.text.split()) for cell in row.cells) for row in item.rows]
                blocks.append("\n".join(r for r in rows if r.strip(" |")))
                continue
            text = item.text.strip()
            if not text:
                continue
            level = _heading_level(item.style.name if item.style is not None else "")
            blocks.append(f"{'#' * level} {text}" if level else text)
    except Exception as exc:
        raise _reject(filename, f"the DOCX file cannot be read ({type(exc).__name__})", "corrupt") from None
    return ParsedDocument("docx", "\n\n".join(b for b in blocks if b))


def _heading_level(style: str) -> int:
    """1-6 for Word's ``Title`` / ``Heading N`` styles, else 0."""
    if style == "Title":
        return 1
    match = re.fullmatch(r"Heading (\d)", style or "")
    return min(int(match.group(1)), 6) if match else 0


def _pick(keys: dict[str, int], names: tuple[str, ...]) -> int | None:
    return next((keys[n] for n in names if n in keys), None)


#: the delimiters a CSV file may use, as people name them: ``,`` and spreadsheets' other
#: exports (``;`` where the comma is the decimal mark, tab, ``|``)
_CSV_DELIMITERS = {",": "commas", ";": "semicolons", "\t": "tabs", "|": "bars (|)"}


def _csv_delimiter(text: str) -> str:
    """The delimiter of a CSV file's header line (one of :data:`_CSV_DELIMITERS`, ``,``
    when the line has none of them): sniffed from that line only, since the answers
    below it are free text full of commas and semicolons."""
    line = text.lstrip("\ufeff").split("\n", 1)[0]
    try:
        return csv.Sniffer().sniff(line, delimiters="".join(_CSV_DELIMITERS)).delimiter
    except csv.Error:  # a single column: nothing to sniff
        return ","


def _csv_pairs(text: str, filename: str) -> list[tuple[str, str]]:
    delimiter = _csv_delimiter(text)
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    header = next(reader, None)
    if not header:
        return []
    keys = {h.strip().lower(): i for i, h in enumerate(header)}
    q_col, a_col = _pick(keys, _QUESTION_KEYS), _pick(keys, _ANSWER_KEYS)
    if q_col is None or a_col is None:
        raise _reject(
            filename,
            f"a CSV file needs the columns q and a, or question and answer (separated by commas, "
            f"semicolons, tabs or bars); its header, split at {_CSV_DELIMITERS[delimiter]}, has "
            f"{', '.join(repr(h) for h in header[:10])}",
            "unsupported",
        )
    pairs = []
    # rows numbered as a spreadsheet shows them: the header is row 1
    for number, row in enumerate(reader, start=2):
        q = row[int(q_col)].strip() if len(row) > int(q_col) else ""
        a = row[int(a_col)].strip() if len(row) > int(a_col) else ""
        if q:
            pairs.append((q, a))
        elif a:  # an answer nobody could find: refused, not dropped without a word
            raise _reject(
                filename, f"row {number}: empty question (its answer would never be found)", "corrupt"
            )
    return pairs


def _jsonl_pairs(text: str, filename: str) -> list[tuple[str, str]]:
    pairs = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise _reject(filename, f"line {number} is not JSON", "corrupt") from None
        if not isinstance(item, dict):
            raise _reject(filename, f"line {number} is not a JSON object", "corrupt")
        keys = {str(k).lower(): k for k in item}
        q_key, a_key = _pick(keys, _QUESTION_KEYS), _pick(keys, _ANSWER_KEYS)
        if q_key is None or a_key is None:
            raise _reject(
                filename, f"line {number} needs the keys q and a (or question and answer)", "unsupported"
            )
        q, a = str(item[q_key] or "").strip(), str(item[a_key] or "").strip()
        if q:
            pairs.append((q, a))
        elif a:
            raise _reject(
                filename, f"line {number}: empty question (its answer would never be found)", "corrupt"
            )
    return pairs
