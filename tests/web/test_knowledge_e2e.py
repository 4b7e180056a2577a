"""The Knowledge section in a real browser (``web/e2e/knowledge.test.mjs``, headless
Chromium) against a real ``flowloom serve``: a dataset with an embedding model created
and filled through the file chooser (a text and a Markdown file ingested, a text file
named ``.pdf`` refused with its reason while the others go on, each good one shown
waiting in ``embedding`` while the scripted server holds the embeddings, then
``ready``), its chunks previewed, hit testing ranking the right chunk first, a second
dataset filled by a drop of two files (the empty one refused) and a text, its statuses
read in the Chinese UI, then edited and deleted after a confirmation; then a workflow
whose knowledge retrieval node gets the dataset from the
picker (by name) answers in the chat preview with the citation shown, and the trace
shows the chunks found.

The scripted model server answers embeddings with hashed bags of words (sized to the
registry's ``text-embedding-3-small``) and chat requests with :func:`knowledge_responder`.
"""

from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.openai_server import Reply, text_reply
from tests.web.canvas_env import canvas_server, e2e_responder, run_browser_files, web_prerequisites

SCENARIOS = 2
SUITE_TIMEOUT_S = 300
#: the registry's vector size of the embedding model the browser picks
EMBEDDING_DIMS = {"text-embedding-3-small": 1536}

#: a numbered quote block of a chat prompt: ``[n] source: <where>`` then its text
_QUOTE = re.compile(r"^\[1\] source: [^\n]*\n(?P<text>.+?)(?=\n\n\[\d+\] source: |\Z)", re.S | re.M)


def knowledge_responder(body: dict[str, Any]) -> Reply:
    """A chat request carrying quotes is answered with the first line of text of quote
    ``[1]`` (not a heading), cited as ``[1]``: the answer shows which chunk the model was
    given first. Anything else is the browser tests' usual scripted model."""
    prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages") or [] if isinstance(m, dict))
    quote = _QUOTE.search(prompt)
    if quote is None:
        return e2e_responder(body)
    lines = [line.strip() for line in quote.group("text").splitlines() if line.strip() and not line.startswith("#")]
    return text_reply(f"From the handbook: {lines[0] if lines else '?'} [1]", chunk_size=8, usage=(40, 12))


@contextmanager
def embeddings_held_until_signalled(server: Any, flag: Path) -> Iterator[None]:
    """Hold the scripted server's embeddings requests until the browser test writes
    ``flag`` (it does once it has seen a document waiting in ``embedding``), so the
    in-between statuses are shown for as long as the test needs, not for a race's length.
    Released at the end whatever happened, so nothing is left waiting."""
    stop = threading.Event()

    def release_on_flag() -> None:
        while not stop.wait(0.1):
            if flag.exists():
                server.model.release_embeddings()
                return

    server.model.hold_embeddings(*EMBEDDING_DIMS)
    watcher = threading.Thread(target=release_on_flag, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join(5)
        server.model.release_embeddings()


@pytest.mark.slow
@pytest.mark.timeout(420)  # the browser suite's own limit (300 s) and the server's start, on a loaded machine
def test_knowledge_scenarios_pass_in_a_real_browser(tmp_path, capsys):
    missing = web_prerequisites()
    if missing:
        pytest.fail("the browser tests cannot run:\n  " + "\n  ".join(missing), pytrace=False)
    shots = tmp_path / "screenshots"
    with canvas_server(tmp_path / "home", responder=knowledge_responder) as server:
        server.model.embedding_dims.update(EMBEDDING_DIMS)
        signals = tmp_path / "signals"
        signals.mkdir()
        with embeddings_held_until_signalled(server, signals / "release-embeddings"):
            result = run_browser_files(server, ["knowledge.test.mjs"], shots, timeout_s=SUITE_TIMEOUT_S,
                                       env={"E2E_SIGNALS": str(signals)})
        with capsys.disabled():
            print(f"\nknowledge browser suite (exit {result.returncode}); screenshots in {shots}")
            print(result.summary())
        assert result.returncode == 0 and result.failed == 0, result.output[-6000:]
        assert result.passed == SCENARIOS, result.output[-6000:]
        assert {"knowledge-progress.png", "knowledge-documents.png", "knowledge-hit-testing.png", "knowledge-chat-citation.png"} <= \
            {p.name for p in shots.iterdir()}
