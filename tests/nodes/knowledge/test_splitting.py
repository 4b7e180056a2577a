"""Token splitting in a child process: the same chunks as in the process, the work done by
the child, and the process splitting by itself whenever the child cannot."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from engine.knowledge.ports import ParsedDocument
from nodes.knowledge import splitting
from nodes.knowledge.chunking import TextChunker
from nodes.knowledge.splitting import SplitterProcess, split_here
from schemas.knowledge import ChunkingSettings

PARAGRAPH = (
    "Paragraph {i} explains how the scheduler hands node {i} to a worker, which claims it, runs "
    "it and records its output; a crash before the record leaves the claim to expire.\n\n"
)
LONG = "".join(PARAGRAPH.format(i=i) for i in range(400))  # ~70 kB, ~100 chunks of 128 tokens


def ready(process: SplitterProcess, timeout_s: float = 20.0) -> SplitterProcess:
    """``process`` once its child said it is ready (asked until then, as a split would)."""
    deadline = time.monotonic() + timeout_s
    while not process._usable():
        assert time.monotonic() < deadline, "the splitting child did not become ready"
        time.sleep(0.02)
    return process


@pytest.fixture
def process():
    made = SplitterProcess()
    yield made
    made.close()


def test_the_child_splits_the_same_chunks_as_the_process(process):
    ready(process)
    pieces = [LONG, "# Title\n\n" + LONG[:5000], "short piece " * 300]
    for markdown, capacity, overlap in ((False, 128, 16), (True, 64, 0), (False, 256, 300)):
        assert process.chunks(markdown, capacity, overlap, pieces) == split_here(
            markdown, capacity, overlap, pieces
        )
    assert process.pid is not None


def test_the_work_is_done_in_the_child(process):
    ready(process)
    start = time.thread_time()
    here = split_here(False, 128, 16, [LONG])
    alone = time.thread_time() - start
    start = time.thread_time()
    assert process.chunks(False, 128, 16, [LONG]) == here
    waited = time.thread_time() - start
    assert waited < alone / 3, (waited, alone)  # the caller waits for the answer; it does not split


def test_small_texts_and_a_starting_child_are_split_in_the_process(process):
    assert process.chunks(False, 128, 16, ["a short text"]) == [["a short text"]]
    assert process.pid is None  # small: no child was needed
    # the first long text starts the child and is split here meanwhile (no waiting for it)
    assert process.chunks(False, 128, 16, [LONG]) == split_here(False, 128, 16, [LONG])
    assert process.pid is not None


def test_a_child_that_died_leaves_splitting_to_the_process_and_is_replaced(process):
    ready(process)
    first = process.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    time.sleep(0.1)
    expected = split_here(False, 128, 16, [LONG])
    assert process.chunks(False, 128, 16, [LONG]) == expected  # split here; a new child starting
    ready(process)
    assert process.pid not in (None, first)
    assert process.chunks(False, 128, 16, [LONG]) == expected


def test_after_its_starts_are_used_up_the_process_splits_by_itself(process, monkeypatch):
    monkeypatch.setattr(splitting, "MAX_STARTS", 1)
    ready(process)
    os.kill(process.pid, signal.SIGKILL)
    time.sleep(0.1)
    assert process.chunks(False, 128, 16, [LONG]) == split_here(False, 128, 16, [LONG])
    assert not process._usable() and process.pid is None  # no second child


def test_an_error_of_the_child_is_raised_by_the_process_own_split(process):
    ready(process)
    with pytest.raises(OverflowError):  # a capacity of 0 tokens: the splitter refuses it
        process.chunks(False, 0, 0, [LONG])
    assert process.pid is not None  # the child answered the error and goes on
    assert process.chunks(False, 128, 16, [LONG]) == split_here(False, 128, 16, [LONG])


def test_the_chunker_splits_through_the_process_child():
    chunker, settings = TextChunker(), ChunkingSettings(chunk_tokens=128, overlap_tokens=16)
    document = ParsedDocument("text", LONG)
    chunker.split(ParsedDocument("text", PARAGRAPH), settings)  # imports, the token estimate
    ready(splitting.shared())
    start = time.thread_time()
    drafts = chunker.split(document, settings)
    waited = time.thread_time() - start
    start = time.thread_time()
    here = split_here(False, 128, 16, [LONG])
    alone = time.thread_time() - start
    assert [d.text for d in drafts] == [t for t in here[0] if t.strip()]
    assert waited < alone / 2, (waited, alone)


def test_a_child_that_never_gets_ready_is_ended_and_counted(process, monkeypatch):
    monkeypatch.setattr(splitting, "READY_TIMEOUT_S", 0.3)
    monkeypatch.setattr(splitting, "MAX_STARTS", 1)
    monkeypatch.setattr(
        splitting, "child_command", lambda: [sys.executable, "-c", "import time; time.sleep(60)"]
    )
    assert process.chunks(False, 128, 16, [LONG]) == split_here(False, 128, 16, [LONG])
    stuck = process._proc
    assert stuck is not None and process.pid is not None
    time.sleep(0.4)
    assert process.chunks(False, 128, 16, [LONG]) == split_here(False, 128, 16, [LONG])
    assert stuck.poll() is not None and process.pid is None  # killed; no second start
    assert not process._usable()


def test_close_ends_the_child(process):
    ready(process)
    child = process._proc
    process.close()
    assert child.poll() is not None and process.pid is None


def test_a_forked_process_does_not_use_its_parent_child():
    parent = splitting.shared()
    ready(parent)
    pid = os.fork()
    if pid == 0:  # the forked process: its own splitter, no child yet; the parent's untouched
        own = splitting.shared()
        os._exit(0 if own is not parent and own.pid is None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert splitting.shared() is parent and parent.pid is not None
    assert parent.chunks(False, 128, 16, [LONG]) == split_here(False, 128, 16, [LONG])
