"""The README's test command and ``.ci/run`` run the same steps, so a reader who runs
the README's command runs what CI runs. ``.ci/run`` may only add flags that quieten
output (``-q`` of pip, npm's ``--no-audit``/``--no-fund``, pytest's ``-p no:cacheprovider``).
Reads only."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: flags ``.ci/run`` adds that change what is printed, never what runs
QUIET = {"-q", "--no-audit", "--no-fund", "-p", "no:cacheprovider"}


def _steps(command: str) -> list[list[str]]:
    """The ``&&``-joined steps of ``command``, each as words without :data:`QUIET` flags
    (pytest's own ``-q`` is kept apart: the README names it too)."""
    steps = []
    for step in command.split("&&"):
        words = shlex.split(step)
        steps.append([w for w in words if w not in QUIET or (w == "-q" and "pytest" in words)])
    return steps


def readme_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"Set up and run the tests[^\n]*\n\n```bash\n(.+?)\n```", text)
    assert found, "README.md has no test command under 'Set up and run the tests'"
    return found.group(1)


def ci_command() -> str:
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    marker = next(i for i, line in enumerate(lines) if "keep the two in sync" in line)
    command = next(line for line in lines[marker + 1 :] if "&&" in line)
    return command.strip()


def test_the_readme_test_command_is_what_ci_runs():
    assert _steps(readme_command()) == _steps(ci_command())


def test_ci_starts_the_phoenix_install_first_in_the_background():
    """The Phoenix install overlaps the set-up: started before anything else, never waited for there."""
    first = _steps(ci_command())[0]
    assert first == ["bash", ".ci/phoenix-env", "--background"], first
