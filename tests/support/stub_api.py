"""The examples' stub API (examples/stub_server.py) as a context manager for tests."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["stub_api"]

_SERVER = Path(__file__).resolve().parents[2] / "examples" / "stub_server.py"


@contextlib.contextmanager
def stub_api() -> Iterator[str]:
    """Start a fresh stub API on a free port of 127.0.0.1; yields its base URL."""
    proc = subprocess.Popen([sys.executable, str(_SERVER), "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert line.startswith("ready "), line
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
