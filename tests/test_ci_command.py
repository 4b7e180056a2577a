"""The README's test command and ``.ci/run`` run the same steps, so a reader who runs
the README's command runs what CI runs. ``.ci/run`` may only add flags that quieten
output (``-q`` of pip, npm's ``--no-audit``/``--no-fund``, pytest's ``-p no:cacheprovider``).
The step that fills the wheelhouse gives the package tests (tests/support/packages.py)
what they install: the same projects, in the directory they look in, before pytest starts.
The static checks run after the installs and before any build or test, so a lint, format
or type finding fails CI in minutes, not after the suite. Reads only."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.support import packages

ROOT = Path(__file__).resolve().parents[1]

#: the static checks, each of which must find nothing
STATIC_CHECKS = (
    "python3 -m ruff check .",
    "python3 -m ruff format --check .",
    "python3 -m mypy",
    "npm --prefix web run typecheck",
    "npm --prefix web run lint",
)

#: flags ``.ci/run`` adds that change what is printed, never what runs
QUIET = {"-q", "--no-audit", "--no-fund", "-p", "no:cacheprovider"}


def _steps(command: str) -> list[list[str]]:
    """The ``&&``-joined steps of ``command``, each as words without :data:`QUIET` flags
    (pytest's and pip download's own ``-q`` are kept apart: the README names them too)."""
    steps = []
    for step in command.split("&&"):
        words = shlex.split(step)
        keep_q = "pytest" in words or "download" in words
        steps.append([w for w in words if w not in QUIET or (w == "-q" and keep_q)])
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


def test_ci_runs_every_test_once_the_fast_tier_then_the_slow_tier():
    """Both tiers, and nothing else: their marker expressions are complements."""
    runs = [s for s in _steps(ci_command()) if s[:3] == ["python3", "-m", "pytest"]]
    marks = [s[s.index("-m", 3) + 1] for s in runs]
    assert marks == ["not slow", "slow"], runs


def test_the_wheelhouse_is_filled_with_what_the_package_tests_install_before_pytest(monkeypatch, tmp_path):
    steps = _steps(ci_command())
    download = next(i for i, s in enumerate(steps) if s[:4] == ["python3", "-m", "pip", "download"])
    pytest_step = next(i for i, s in enumerate(steps) if s[:3] == ["python3", "-m", "pytest"])
    assert download < pytest_step
    words = steps[download]
    assert words[words.index("-d") + 1] == "${FLOWLOOM_TEST_WHEELHOUSE:-$HOME/.cache/flowloom/wheelhouse}"
    assert sorted(words[words.index("-d") + 2 :]) == sorted(packages.WHEELS)
    monkeypatch.delenv("FLOWLOOM_TEST_WHEELHOUSE", raising=False)
    assert packages.wheelhouse_dir() == Path.home() / ".cache" / "flowloom" / "wheelhouse"
    monkeypatch.setenv("FLOWLOOM_TEST_WHEELHOUSE", str(tmp_path))
    assert packages.wheelhouse_dir() == tmp_path


def test_the_static_checks_run_after_the_installs_and_before_any_build_or_test():
    order = [step.strip() for step in ci_command().split("&&")]
    assert all(check in order for check in STATIC_CHECKS), order
    first_check = min(order.index(check) for check in STATIC_CHECKS)
    last_check = max(order.index(check) for check in STATIC_CHECKS)
    installs = [i for i, step in enumerate(order) if " install " in f" {step} " or " ci " in f" {step} "]
    runs = [i for i, step in enumerate(order)
            if "pytest" in step or step.startswith("npm --prefix web run build") or step == "npm --prefix web test"]
    assert installs and max(installs) < first_check, order
    assert runs and last_check < min(runs), order


def test_the_web_scripts_the_checks_call_exist():
    import json

    scripts = json.loads((ROOT / "web" / "package.json").read_text(encoding="utf-8"))["scripts"]
    assert scripts["typecheck"].startswith("tsc --noEmit")
    assert scripts["lint"].startswith("eslint --max-warnings 0")


def test_ci_runs_each_tier_with_the_marker_expression_the_suite_spreads_over_processes():
    """``tests/conftest.py`` picks the processes (and the slow tier's grouping) from the
    exact ``-m`` expression: a CI step spelling it otherwise would run in one process."""
    from tests import conftest

    runs = [s for s in _steps(ci_command()) if s[:3] == ["python3", "-m", "pytest"]]
    marks = [s[s.index("-m", 3) + 1] for s in runs]
    assert marks == [conftest.FAST_TIER, conftest.SLOW_TIER]
    assert set(marks) == set(conftest.TIER_PROCESSES)
    assert conftest.TIER_PROCESSES[conftest.SLOW_TIER] == (2, "loadgroup")
    assert not [s for s in runs if "-n" in s or "--dist" in s], "the process counts are the suite's, not the command's"
