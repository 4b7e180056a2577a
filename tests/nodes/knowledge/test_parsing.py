"""The document parser: every format read with its library, and every refusal with its reason."""

from __future__ import annotations

import io
import json

import pytest

from engine.knowledge.ports import DocumentRejected
from nodes.knowledge.parsing import DocumentParser
from tests.support.knowledge_files import pdf_bytes as plain_pdf


def pdf_bytes(*paragraphs: str, password: str | None = None) -> bytes:
    """A real PDF of the paragraphs, encrypted with ``password`` when one is given."""
    data = plain_pdf(*paragraphs)
    if password is None:
        return data
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=password, owner_password=password + "-owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx_bytes() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Cheese", level=1)
    document.add_paragraph("Cheese makers curdle milk with rennet.")
    document.add_heading("Ageing", level=2)
    document.add_paragraph("Aged cheese ripens in cool cellars.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "kind", "months"
    table.cell(1, 0).text, table.cell(1, 1).text = "cheddar", "12"
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


parser = DocumentParser()


def rejected(data: bytes, name: str) -> DocumentRejected:
    with pytest.raises(DocumentRejected) as info:
        parser.parse(data, name)
    assert info.value.status == 422 and name in str(info.value)
    return info.value


def test_plain_text_and_markdown_are_read_as_they_are():
    assert parser.parse("Héllo wörld\r\nsecond line\n".encode(), "a.txt").text == "Héllo wörld\nsecond line"
    md = parser.parse(b"# Title\n\nSome *text*.\n", "notes.md")
    assert (md.content_type, md.text) == ("markdown", "# Title\n\nSome *text*.")
    assert parser.parse("中文文本".encode("gb18030"), "zh.txt").text == "中文文本"
    assert parser.parse(b"raw", "README").content_type == "text"


def test_html_drops_scripts_and_styles_and_keeps_headings_as_markdown():
    html = (b"<html><head><title>t</title><style>p{color:red}</style></head><body><h1>Volcanoes</h1>"
            b"<p>Magma <b>rises</b>.</p><script>alert('x')</script><h2>Lava</h2><ul><li>hot</li></ul></body></html>")
    parsed = parser.parse(html, "v.html")
    assert parsed.content_type == "html"
    assert parsed.text == "# Volcanoes\n\nMagma rises.\n\n## Lava\n\n- hot"


def test_pdf_made_with_fpdf2_is_read_page_text():
    parsed = parser.parse(pdf_bytes("Suspension bridges hang the deck from steel cables.", "Towers hold cables."),
                          "bridges.pdf")
    assert parsed.content_type == "pdf"
    assert "Suspension bridges hang the deck from steel cables." in parsed.text and "Towers" in parsed.text


def test_encrypted_pdf_is_rejected_as_encrypted_and_corrupt_as_corrupt():
    assert rejected(pdf_bytes("secret text", password="hunter2"), "locked.pdf").reason == "encrypted"
    good = pdf_bytes("some text here")
    assert rejected(good[:200] + b"\x00garbage" * 20, "broken.pdf").reason in ("corrupt", "empty")
    assert rejected(b"%PDF-1.7\n" + b"\x13\x37" * 500, "noise.pdf").reason == "corrupt"


def test_docx_headings_become_markdown_headings_and_tables_rows():
    parsed = parser.parse(docx_bytes(), "cheese.docx")
    assert parsed.content_type == "docx"
    assert parsed.text.split("\n\n")[:4] == ["# Cheese", "Cheese makers curdle milk with rennet.", "## Ageing",
                                            "Aged cheese ripens in cool cellars."]
    assert "cheddar | 12" in parsed.text


def test_csv_and_jsonl_question_answer_pairs():
    csv_data = 'q,a\nHow long do pandas sleep?,"Ten hours, a day."\n,\nWhat do pandas eat?,Bamboo.\n\n'
    parsed = parser.parse(csv_data.encode(), "qa.csv")
    assert parsed.content_type == "csv_qa"
    assert parsed.qa_pairs == [("How long do pandas sleep?", "Ten hours, a day."), ("What do pandas eat?", "Bamboo.")]
    lines = "\n".join(json.dumps(r) for r in ({"question": "Q1?", "answer": "A1"}, {"q": "Q2?", "a": "A2"}))
    assert parser.parse(lines.encode(), "qa.jsonl").qa_pairs == [("Q1?", "A1"), ("Q2?", "A2")]
    unknown = rejected(b"name,value\nx,1\n", "table.csv")
    assert unknown.reason == "unsupported" and "q and a, or question and answer" in str(unknown)
    assert rejected(b'{"q": "x", "a": "y"}\nnot json\n', "bad.jsonl").reason == "corrupt"


def test_csv_pairs_separated_by_semicolons_tabs_or_bars_are_read_as_by_commas():
    # A spreadsheet exported where the comma is the decimal mark separates by ";"; the
    # answers' own commas and semicolons do not change the delimiter read from the header.
    semicolons = "\ufeffquestion;answer\r\nWhere is IT?;Basement, room 2.\r\nWho?;Ada\r\n"
    assert parser.parse(semicolons.encode(), "semi.csv").qa_pairs == [
        ("Where is IT?", "Basement, room 2."), ("Who?", "Ada")]
    quoted = 'q;a\nWhere is IT?;"Basement; room 2."\n'
    assert parser.parse(quoted.encode(), "q.csv").qa_pairs == [("Where is IT?", "Basement; room 2.")]
    for delimiter in ("\t", "|"):
        data = f"Question{delimiter}Answer\nWhat do pandas eat?{delimiter}Bamboo, mostly.\n"
        assert parser.parse(data.encode(), "qa.csv").qa_pairs == [("What do pandas eat?", "Bamboo, mostly.")]
    wrong = str(rejected(b"name;value\nx;1\n", "table.csv"))
    assert "its header, split at semicolons, has 'name', 'value'" in wrong, wrong
    assert "split at commas, has 'question answer'" in str(rejected(b"question answer\nx\n", "one.csv"))


def test_a_pair_without_its_question_is_refused_naming_its_row_not_dropped():
    # an answer whose question is empty could never be found: the file is refused, so the
    # user sees which row to fix instead of a dataset silently missing it
    csv_data = b'question,answer\nWhat do pandas eat?,Bamboo.\n,"Ten hours, a day."\n'
    error = rejected(csv_data, "qa.csv")
    assert error.reason == "corrupt" and "row 3: empty question" in str(error)
    lines = json.dumps({"q": "Q1?", "a": "A1"}) + "\n" + json.dumps({"q": " ", "a": "A2"})
    error = rejected(lines.encode(), "qa.jsonl")
    assert error.reason == "corrupt" and "line 2: empty question" in str(error)


def test_a_corrupt_pdf_is_refused_without_pypdf_logging_to_stderr(capfd: pytest.CaptureFixture[str],
                                                                  caplog: pytest.LogCaptureFixture):
    import logging

    caplog.set_level(logging.DEBUG)
    before = logging.getLogger("pypdf").level
    good = pdf_bytes("Some text for the truncated copy.")
    assert rejected(good[: len(good) // 2], "cut.pdf").reason in ("corrupt", "empty")
    assert rejected(b"%PDF-1.4\nbroken stuff here", "broken.pdf").reason == "corrupt"
    captured = capfd.readouterr()
    assert "EOF marker" not in captured.err and captured.err == ""
    assert [r.getMessage() for r in caplog.records if r.name.startswith("pypdf")] == []
    assert logging.getLogger("pypdf").level == before  # the operator's level is back


def test_an_extension_that_does_not_match_the_content_is_a_type_mismatch():
    assert rejected(b"just some text", "x.pdf").reason == "type_mismatch"
    assert rejected(pdf_bytes("a pdf"), "x.docx").reason == "type_mismatch"
    assert rejected(pdf_bytes("a pdf"), "x.txt").reason == "type_mismatch"
    assert rejected(docx_bytes(), "x.md").reason == "type_mismatch"
    # A saved web page named .txt or .md would be indexed with its tags and scripts.
    page = b"<!-- saved -->\n<!DOCTYPE html><html><body><script>var s = 1;</script><p>Hi</p></body></html>"
    for name in ("page.txt", "page.md"):
        refused = rejected(page, name)
        assert refused.reason == "type_mismatch" and "name it .html" in str(refused)
    assert rejected(b"  <html lang='en'><p>x</p></html>", "p.txt").reason == "type_mismatch"
    assert DocumentParser().parse(page, "page.html").text.strip() == "Hi"
    # Markdown with some inline HTML is Markdown.
    assert "<b>bold</b>" in DocumentParser().parse(b"# Title\n\nSome <b>bold</b> text", "notes.md").text


def test_empty_and_unsupported_files():
    assert rejected(b"", "empty.txt").reason == "empty"
    assert rejected(b"  \n\n ", "blank.md").reason == "empty"
    assert rejected(b"<html><script>x()</script></html>", "only-script.html").reason == "empty"
    assert rejected(pdf_bytes(), "blank.pdf").reason == "empty"
    assert rejected(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "image.txt").reason in ("unsupported", "type_mismatch")
    assert rejected(b"data", "sheet.xlsx").reason == "unsupported"
    assert rejected(b"\x00\x01\x02binary", "blob.txt").reason == "unsupported"


def test_a_binary_type_is_named_with_its_article():
    elf = b"\x7fELF\x02\x01\x01" + b"\x00" * 100  # an executable, as filetype knows it
    assert str(rejected(elf, "prog")).endswith("an elf file cannot be read as text")
    assert "the content is an elf file" in str(rejected(elf, "prog.pdf"))
