"""The README's test command and ``.ci/run`` run the same steps, and the step that fills
the wheelhouse gives the package tests (tests/support/packages.py) what they install:
the same projects, in the directory they look in, before pytest starts."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.support import packages

ROOT = Path(__file__).resolve().parents[1]
#: options only one of the two spells (quieter CI output, no pytest cache in CI)
_STYLE = {"-q", "--no-audit", "--no-fund"}


def _steps(line: str) -> list[list[str]]:
    steps = []
    for step in line.split(" && "):
        words = [w for w in shlex.split(step, posix=False) if w not in _STYLE]
        while "-p" in words:  # pytest -p no:cacheprovider
            index = words.index("-p")
            del words[index : index + 2]
        steps.append(words)
    return steps


def _readme_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"Set up and run the tests[^\n]*\n\n```bash\n(.+?)\n```", text, re.S)
    assert block is not None, "the README's 'Set up and run the tests' command block is missing"
    return block.group(1).strip()


def _ci_command() -> str:
    lines = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.startswith("bash .ci/setup-system")
    ]
    assert len(lines) == 1, lines
    return lines[0].strip()


def test_the_readme_and_ci_run_the_same_steps():
    assert _steps(_readme_command()) == _steps(_ci_command())


def test_the_wheelhouse_is_filled_with_what_the_package_tests_install_before_pytest(monkeypatch, tmp_path):
    steps = _steps(_ci_command())
    download = next(i for i, s in enumerate(steps) if s[:4] == ["python3", "-m", "pip", "download"])
    pytest_step = next(i for i, s in enumerate(steps) if s[:3] == ["python3", "-m", "pytest"])
    assert download < pytest_step
    words = steps[download]
    assert words[words.index("-d") + 1] == '"${FLOWLOOM_TEST_WHEELHOUSE:-$HOME/.cache/flowloom/wheelhouse}"'
    assert sorted(words[words.index("-d") + 2 :]) == sorted(packages.WHEELS)
    monkeypatch.delenv("FLOWLOOM_TEST_WHEELHOUSE", raising=False)
    assert packages.wheelhouse_dir() == Path.home() / ".cache" / "flowloom" / "wheelhouse"
    monkeypatch.setenv("FLOWLOOM_TEST_WHEELHOUSE", str(tmp_path))
    assert packages.wheelhouse_dir() == tmp_path
