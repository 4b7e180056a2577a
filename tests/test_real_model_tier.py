"""The real-model tier (tests/real_model) is off unless asked for: ``pytest`` and
``pytest -m "not slow"`` deselect it, ``-m real_model`` or ``FLOWLOOM_TEST_REAL_MODEL=1``
select it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import REAL_MODEL_ENV, real_model_wanted

ROOT = Path(__file__).resolve().parents[1]


def _config(markexpr: str) -> pytest.Config:
    return SimpleNamespace(option=SimpleNamespace(markexpr=markexpr))  # type: ignore[return-value]


@pytest.mark.parametrize(("markexpr", "env", "wanted"), [
    ("", None, False), ("not slow", None, False), ("slow", None, False),
    ("real_model", None, True), ("slow and real_model", None, True), ("", "1", True), ("not slow", "0", False),
])
def test_the_real_model_tier_runs_only_when_asked_for(monkeypatch, markexpr, env, wanted):
    if env is None:
        monkeypatch.delenv(REAL_MODEL_ENV, raising=False)
    else:
        monkeypatch.setenv(REAL_MODEL_ENV, env)
    assert real_model_wanted(_config(markexpr)) is wanted


def test_a_plain_collection_deselects_the_real_model_tests():
    env_free = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home())}
    listed = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", "-n", "0",
                             "tests/real_model"], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env_free)
    assert "deselected" in listed.stdout and "test_local_gemma.py::" not in listed.stdout, listed.stdout
    chosen = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", "-n", "0",
                             "-m", "real_model", "tests/real_model"], cwd=ROOT, capture_output=True, text=True,
                            timeout=300, env=env_free)
    assert "test_local_gemma.py::test_the_probe_reports_what_llama_cpp_python_does" in chosen.stdout, chosen.stdout
