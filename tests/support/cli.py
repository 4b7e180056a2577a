"""The ``flowloom`` console script of the interpreter running the tests.

Tests never rely on ``PATH``: a venv used through its ``bin/python`` (not activated) has
its scripts beside that interpreter, which is where pip put ``flowloom``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

_BIN = Path(sys.executable).parent / "flowloom"
#: path of the console script (beside ``sys.executable``; else the one on PATH as a last resort)
FLOWLOOM = str(_BIN) if _BIN.exists() else (shutil.which("flowloom") or "flowloom")
