"""Make the bench scripts import the checkout they live in.

``python bench/X.py`` puts ``bench/`` first on ``sys.path``, where ``bench/engine.py``
would shadow the ``engine`` package. Importing this module (first, from a bench
script) drops ``bench/`` from ``sys.path`` and puts the checkout root in front.
"""

from __future__ import annotations

import os
import sys

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
