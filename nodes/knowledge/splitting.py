"""Token splitting for the chunker (:mod:`nodes.knowledge.chunking`), in a child process.

semantic-text-splitter sizes chunks in cl100k tokens and holds the interpreter lock the
whole time it works: it tokenizes each candidate chunk again while it searches for a
chunk's end (~0.3 ms of CPU per 128-token chunk), and nothing else of the process runs
meanwhile - not the event loop, not the embeddings client, not the store's thread. So
an ingesting process splits in one child process of its own (this module run as a
script: the standard library and the splitter only, ~40 MB resident) and waits for the
chunks without the lock, while its other documents are stored and embedded; the child
works on the machine's other core.

Protocol (one request at a time, over the child's stdin and stdout): a 4-byte
little-endian length then a :mod:`marshal` payload. Request ``(markdown, capacity,
overlap, pieces)``; answer ``("ok", [[chunk, ...] per piece])`` or ``("error", message)``.
marshal carries only strings, numbers and containers (no code runs on loading).

The child is a help, never a requirement: the process splits by itself (the same
splitter, the same chunks) while the child starts (it says ``ready`` once its tokenizer
is loaded, ~0.2 s), for small texts (:data:`CHILD_MIN_CHARS`: the round trip costs more
than the split), where it cannot be started (not POSIX, a failing interpreter), when it
answers an error (the process's own split then raises it as such) and when it dies (the
next split starts another; after :data:`MAX_STARTS` starts the process keeps splitting
by itself). The child ends when its stdin closes: at :meth:`SplitterProcess.close`, at
the process's exit, or when the process is killed.
"""

from __future__ import annotations

import functools
import marshal
import os
import struct
import sys
import threading
import time
from typing import Any

__all__ = ["CHILD_MIN_CHARS", "MAX_STARTS", "SplitterProcess", "TOKENIZER_MODEL", "shared", "splitter"]

#: the tokenizer model named to semantic-text-splitter (cl100k)
TOKENIZER_MODEL = "gpt-3.5-turbo"
#: texts shorter than this (characters, all pieces of a request together) are split in the
#: process: splitting them costs less than the round trip (~0.1 ms) and a wake-up of the child
CHILD_MIN_CHARS = 2000
#: child processes started at most per process (each death after the first costs a start)
MAX_STARTS = 3
#: seconds a child may take to say it is ready; past that it is ended (and counts as a start)
READY_TIMEOUT_S = 30.0
_READY = b"ready\n"
_LENGTH = struct.Struct("<I")


@functools.lru_cache(maxsize=32)
def splitter(markdown: bool, capacity: int, overlap: int) -> Any:
    """A splitter of ``capacity`` cl100k tokens with ``overlap`` shared (cached: building
    one loads the tokenizer)."""
    from semantic_text_splitter import MarkdownSplitter, TextSplitter

    cls = MarkdownSplitter if markdown else TextSplitter
    return cls.from_tiktoken_model(TOKENIZER_MODEL, capacity, overlap=min(overlap, capacity - 1))


def split_here(markdown: bool, capacity: int, overlap: int, pieces: list[str]) -> list[list[str]]:
    """Each piece's chunks, split in this process."""
    cut = splitter(markdown, capacity, overlap)
    return [cut.chunks(piece) for piece in pieces]


def child_command() -> list[str]:
    """The command that runs the child: this interpreter on this file, with ``-P`` so the
    file's folder is not put first on the child's import path (a module there named like
    one of the standard library's would otherwise shadow it)."""
    return [sys.executable, "-P", os.path.abspath(__file__)]


def _read_frame(stream: Any) -> bytes | None:
    """One length-prefixed frame from ``stream``; None at its end (or a cut frame)."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    body = stream.read(size)
    return body if len(body) == size else None


def _write_frame(stream: Any, payload: bytes) -> None:
    stream.write(_LENGTH.pack(len(payload)) + payload)
    stream.flush()


class SplitterProcess:
    """One splitting child process and the lock that gives it one request at a time
    (module docstring). Thread-safe: :meth:`chunks` is called from the threads that
    split documents."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: Any = None
        self._ready = False
        self._starts = 0
        self._started_at = 0.0

    def chunks(self, markdown: bool, capacity: int, overlap: int, pieces: list[str]) -> list[list[str]]:
        """Each piece's chunks: by the child when it is ready and the pieces are not small,
        else in this process; the same chunks either way."""
        if sum(len(p) for p in pieces) >= CHILD_MIN_CHARS:
            with self._lock:
                answer = self._ask(markdown, capacity, overlap, pieces)
            if answer is not None:
                return answer
        return split_here(markdown, capacity, overlap, pieces)

    @property
    def pid(self) -> int | None:
        """The child's process id (None: no child running)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _ask(self, markdown: bool, capacity: int, overlap: int, pieces: list[str]) -> list[list[str]] | None:
        """The child's answer; None when there is no ready child or it failed (then the
        caller splits: a splitter error is raised there, as without a child)."""
        if not self._usable():
            return None
        proc = self._proc
        try:
            _write_frame(proc.stdin, marshal.dumps((markdown, capacity, overlap, pieces)))
            frame = _read_frame(proc.stdout)
            if frame is None:
                raise EOFError("the splitting process ended")
            status, result = marshal.loads(frame)
        except (OSError, EOFError, ValueError, TypeError):
            self._drop()
            return None
        return result if status == "ok" else None

    def _usable(self) -> bool:
        """Whether a child is running and ready; starts one when there is none (and
        starts are left) without waiting for it."""
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            self._drop()
            proc = None
        if proc is None:
            if self._starts >= MAX_STARTS or os.name != "posix":
                return False
            self._start()
            return False
        if not self._ready:
            import select

            if not select.select([proc.stdout], [], [], 0)[0]:
                if time.monotonic() - self._started_at > READY_TIMEOUT_S:
                    self._drop()  # it will not be ready (an interpreter that cannot run this module)
                return False  # still loading its tokenizer: split here meanwhile
            if proc.stdout.readline() != _READY:
                self._drop()
                return False
            self._ready = True
        return True

    def _start(self) -> None:
        import subprocess

        self._starts += 1
        self._started_at = time.monotonic()
        try:
            self._proc = subprocess.Popen(
                child_command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError:
            self._proc = None
        self._ready = False

    def _drop(self) -> None:
        """Forget the child, ending it: a ready one by closing its stdin (it exits), one
        that never said it is ready by a kill (it may not read its stdin at all)."""
        proc, ready, self._proc, self._ready = self._proc, self._ready, None, False
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        if not ready:
            proc.kill()
        try:
            proc.wait(timeout=2)
        except Exception:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        """End the child (its stdin closed: it exits)."""
        with self._lock:
            self._drop()


_shared: SplitterProcess | None = None
_shared_lock = threading.Lock()


def shared() -> SplitterProcess:
    """The process's one :class:`SplitterProcess` (made at the first split; its child is
    ended at the interpreter's exit). A process forked from this one makes its own: the
    pipes of the parent's child are the parent's (two writers would mix their requests)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            import atexit

            _shared = SplitterProcess()
            atexit.register(_shared.close)
        return _shared


def _forget_after_fork() -> None:
    global _shared, _shared_lock
    _shared, _shared_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def main() -> None:
    """The child: load the tokenizer, say ``ready``, then answer requests until stdin ends."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    splitter(False, 128, 16)  # the tokenizer loaded before the process is told it may send
    stdout.write(_READY)
    stdout.flush()
    while (frame := _read_frame(stdin)) is not None:
        try:
            markdown, capacity, overlap, pieces = marshal.loads(frame)
            answer: tuple[str, Any] = ("ok", split_here(bool(markdown), int(capacity), int(overlap), pieces))
        except Exception as exc:  # the process splits again and raises it there
            answer = ("error", f"{type(exc).__name__}: {exc}")
        _write_frame(stdout, marshal.dumps(answer))


if __name__ == "__main__":
    main()
