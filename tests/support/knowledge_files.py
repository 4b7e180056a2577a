"""Documents of every supported format, made with the real libraries (fpdf2, python-docx),
for tests of uploads and ingestion; and a model registry file whose embedding and
rerank models are the scripted OpenAI server's."""

from __future__ import annotations

import io
import json
from pathlib import Path

__all__ = ["EMBEDDING_MODEL", "RERANK_MODEL", "corpus", "docx_bytes", "knowledge_models", "pdf_bytes"]

#: the registry names of the scripted server's embedding (32 dimensions) and rerank models
EMBEDDING_MODEL = "embed"
RERANK_MODEL = "rerank"


def pdf_bytes(*paragraphs: str) -> bytes:
    """A real PDF with one paragraph per line block."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    for paragraph in paragraphs:
        pdf.multi_cell(0, 6, paragraph)
        pdf.ln(4)
    return bytes(pdf.output())


def docx_bytes(heading: str, *paragraphs: str) -> bytes:
    """A real DOCX: a heading, then the paragraphs."""
    import docx

    document = docx.Document()
    document.add_heading(heading, level=1)
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def corpus() -> dict[str, bytes]:
    """One file of each supported format, each about its own topic (searches can tell
    them apart by their words)."""
    qa_csv = "question,answer\nHow long do pandas sleep?,Pandas sleep about ten hours a day.\n" \
             "What do pandas eat?,Pandas eat bamboo shoots and leaves.\n"
    qa_jsonl = "\n".join(json.dumps(row) for row in (
        {"question": "What colour is a flamingo?", "answer": "Flamingos are pink from the shrimp they eat."},
        {"question": "Where do flamingos live?", "answer": "Flamingos live in salty lagoons and lakes."}))
    return {
        "rockets.txt": b"Rocket engines burn liquid oxygen and kerosene. The rocket nozzle expands the hot exhaust "
                       b"gas to produce thrust for the launch.",
        "tea.md": b"# Green tea\n\nGreen tea leaves are steamed soon after picking.\n\n## Brewing\n\nBrew green tea "
                  b"with water below boiling for two minutes.\n",
        "volcano.html": b"<html><head><title>x</title><style>p{}</style></head><body><h1>Volcanoes</h1><p>Volcano "
                        b"magma rises through the crust and erupts as lava and ash.</p></body></html>",
        "bridges.pdf": pdf_bytes("Suspension bridges hang the bridge deck from steel cables.",
                                 "The main cables of a suspension bridge rest on tall towers."),
        "cheese.docx": docx_bytes("Cheese", "Cheese makers curdle milk with rennet and press the curds.",
                                  "Aged cheese ripens in cool cellars for months."),
        "pandas.csv": qa_csv.encode(),
        "flamingos.jsonl": qa_jsonl.encode(),
    }


def knowledge_models(path: Path, base_url: str, key_env: str, *, embedding: bool = True,
                     rerank: bool = True) -> Path:
    """A registry file at ``path``: chat model ``default``, embedding model
    :data:`EMBEDDING_MODEL` (32 dimensions, 0.01 per 1k input tokens) and rerank model
    :data:`RERANK_MODEL`, all served by the scripted server at ``base_url`` (key in
    ``key_env``); ``embedding`` / ``rerank`` False leave that model out (a chat-only
    registry for tests that have no dataset)."""
    sections = [f'''
[providers.scripted]
base_url = "{base_url}"
api_key_env = "{key_env}"

[models.default]
provider = "scripted"
model = "scripted-upstream"
max_context = 8192
max_output_tokens = 512
''']
    if embedding:
        sections.append(f'''
[models.{EMBEDDING_MODEL}]
provider = "scripted"
type = "embedding"
model = "scripted-embed-dim32"
max_context = 8192
dimension = 32
pricing = {{ input_per_1k = 0.01 }}
''')
    if rerank:
        sections.append(f'''
[models.{RERANK_MODEL}]
provider = "scripted"
type = "rerank"
model = "scripted-rerank"
max_context = 8192
''')
    path.write_text("".join(sections), encoding="utf-8")
    return path
