"""The code sandbox's package environment in tests.

- :func:`environment`: an environment laid out as ``flowloom sandbox install`` leaves it
  (:mod:`engine.code_packages`), holding small modules the test writes itself - for the
  fast tests of the lookup, validation, the importers and the mount, without pip.
- :func:`wheelhouse`: the local directory of wheels the install tests use (tests have no
  network): ``FLOWLOOM_TEST_WHEELHOUSE``, else ``~/.cache/flowloom/wheelhouse``; the
  README's test command and ``.ci/run`` fill it with ``pip download`` first.
- :func:`flowloom`: the ``flowloom`` command as a process, with its own ``FLOWLOOM_HOME``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.code_packages import ACTIVE, MANIFEST, python_version

ROOT = Path(__file__).resolve().parents[2]
#: what the install tests install, and the wheels the wheelhouse must hold for them
WHEELS = {"json-repair": "json_repair-", "numpy": "numpy-"}


def environment(
    home: Path,
    python: dict[str, str] | None = None,
    npm: dict[str, str] | None = None,
    *,
    built_for: str | None = None,
    name: str = "hand-made",
) -> Path:
    """Make ``<home>/sandbox/envs/<name>`` the active environment, holding the Python
    modules ``python`` (module name -> source of its ``__init__.py``) and the npm packages
    ``npm`` (package name -> source of its ``index.js``), installed "for" Python
    ``built_for`` (default: this interpreter's version). Returns the environment's directory."""
    root = home / "sandbox" / "envs" / name
    for module, source in (python or {}).items():
        (root / "python" / module).mkdir(parents=True)
        (root / "python" / module / "__init__.py").write_text(source)
    for package, source in (npm or {}).items():
        (root / "node_modules" / package).mkdir(parents=True)
        (root / "node_modules" / package / "package.json").write_text(
            json.dumps({"name": package, "version": "1.0.0", "main": "index.js"})
        )
        (root / "node_modules" / package / "index.js").write_text(source)
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).write_text(
        json.dumps(
            {
                "python": built_for or python_version(),
                "requirements": sorted(python or {}),
                "npm": sorted(npm or {}),
            }
        )
    )
    link = home / "sandbox" / ACTIVE
    if link.is_symlink():
        link.unlink()
    link.symlink_to(Path("envs") / name)
    return root


def wheelhouse_dir() -> Path:
    """``FLOWLOOM_TEST_WHEELHOUSE``, else ``~/.cache/flowloom/wheelhouse`` (as the test command spells it)."""
    return Path(
        os.environ.get("FLOWLOOM_TEST_WHEELHOUSE") or Path.home() / ".cache" / "flowloom" / "wheelhouse"
    )


def wheelhouse() -> Path:
    """The directory of wheels for the install tests; fails (never skips) naming the
    command that fills it when a wheel is missing."""
    where = wheelhouse_dir()
    names = [p.name for p in where.glob("*.whl")] if where.is_dir() else []
    missing = [project for project, prefix in WHEELS.items() if not any(n.startswith(prefix) for n in names)]
    if missing:
        pytest.fail(
            f"the wheelhouse {where} lacks {', '.join(missing)}: fill it with "
            f"python3 -m pip download -q -d {where} {' '.join(WHEELS)} (on a machine with network)"
        )
    return where


def flowloom(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``flowloom ARGS`` with ``FLOWLOOM_HOME=home`` (and no other ``FLOWLOOM_*`` setting)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    env["FLOWLOOM_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )


def install_from_wheelhouse(home: Path, *requirements: str) -> subprocess.CompletedProcess[str]:
    """``flowloom sandbox install REQUIREMENTS --find-links <wheelhouse> --no-index``."""
    return flowloom(
        home, "sandbox", "install", *requirements, "--find-links", str(wheelhouse()), "--no-index"
    )
