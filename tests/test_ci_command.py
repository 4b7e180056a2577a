"""``.ci/run`` runs the README's test command, and that command runs the static checks
before the suite, so a lint, format or type finding fails CI in minutes, not after it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the static checks, each of which must find nothing
STATIC_CHECKS = (
    "python3 -m ruff check .",
    "python3 -m ruff format --check .",
    "python3 -m mypy",
    "npm --prefix web run typecheck",
    "npm --prefix web run lint",
)


def readme_command() -> str:
    """The command of the README's "Set up and run the tests" block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"Set up and run the tests.*?```bash\n(.*?)\n```", text, re.S)
    assert found, "README.md has no 'Set up and run the tests' bash block"
    return found.group(1).strip()


def ci_command() -> str:
    """The command line .ci/run runs (the one that starts with the system setup)."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    commands = [line.strip() for line in lines if line.startswith("bash .ci/setup-system")]
    assert len(commands) == 1, f".ci/run has {len(commands)} setup command lines"
    return commands[0]


def steps(command: str) -> list[str]:
    return [step.strip() for step in command.split("&&")]


def test_ci_runs_the_readme_command():
    assert ci_command() == readme_command()


def test_the_static_checks_run_after_the_installs_and_before_any_build_or_test():
    order = steps(readme_command())
    assert all(check in order for check in STATIC_CHECKS), order
    first_check = min(order.index(check) for check in STATIC_CHECKS)
    last_check = max(order.index(check) for check in STATIC_CHECKS)
    installs = [i for i, step in enumerate(order) if " install " in f" {step} " or step.endswith(" ci --no-audit --no-fund")]
    runs = [i for i, step in enumerate(order) if "pytest" in step or step.startswith("npm --prefix web run build")
            or step == "npm --prefix web test"]
    assert installs and max(installs) < first_check, order
    assert runs and last_check < min(runs), order


def test_the_web_scripts_the_checks_call_exist():
    import json

    scripts = json.loads((ROOT / "web" / "package.json").read_text(encoding="utf-8"))["scripts"]
    assert scripts["typecheck"].startswith("tsc --noEmit")
    assert scripts["lint"].startswith("eslint --max-warnings 0")
