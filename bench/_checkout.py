"""Make the bench scripts import the checkout they live in.

``python bench/X.py`` puts ``bench/`` first on ``sys.path``, where ``bench/engine.py``
would shadow the ``engine`` package. Importing this module (first, from a bench
script) drops ``bench/`` from ``sys.path`` and puts the checkout root in front.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def provenance(paths: tuple[str, ...]) -> dict[str, object]:
    """Which code a bench measured: ``{"commit": short hash or None, "dirty": bool or None}``,
    ``dirty`` meaning the working tree differs from the commit under ``paths``."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=ROOT, capture_output=True,
                               text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": head.stdout.strip() or None,
            "dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None}


def machine(dists: tuple[str, ...] = ()) -> dict[str, object]:
    """The machine and interpreter a bench ran on, its load average at the start, and the
    versions of ``dists`` (distribution names; ``"?"`` when not installed)."""
    import platform
    from importlib import metadata

    try:
        load: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - no load average on this platform
        load = None
    packages = {}
    for dist in dists:
        try:
            packages[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:  # pragma: no cover
            packages[dist] = "?"
    out: dict[str, object] = {
        "python": platform.python_version(), "implementation": platform.python_implementation(),
        "platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
        "loadavg_at_start": load,
    }
    if dists:
        out["packages"] = packages
    return out


def print_report(make: Callable[[], dict[str, object]]) -> int:
    """Run ``make()`` with anything it prints sent to stderr, then print its report as the
    one JSON line on stdout (what every bench script promises); returns exit status 0."""
    import contextlib
    import json

    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        result = make()
    out.write(json.dumps(result, separators=(",", ":")) + "\n")
    out.flush()
    return 0


def sibling(name: str) -> object:
    """Import ``bench/<name>.py`` as module ``name``: ``bench/`` is off ``sys.path`` (see
    above), so shared bench modules are loaded by file."""
    import importlib.util

    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
