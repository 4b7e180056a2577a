"""Regenerate the README's screenshots from the browser tests, so they never go stale.

``python -m tests.web.screenshots`` starts a real ``flowloom serve`` (the scripted
model, a temporary home), runs the browser scenarios of :data:`SCENARIO_FILES` in
headless Chromium and copies the screenshots :data:`README_SHOTS` names into
``web/screenshots/`` (the only place it writes in the checkout). Commit the new PNGs.

:data:`README_SHOTS` maps each image the README shows (a file of ``web/screenshots/``)
to the screenshot a scenario takes (``shot(page, '<name>')`` in its ``web/e2e`` file);
``tests/web/test_readme_screenshots.py`` checks that every image the README references
is in this table and is taken by a scenario, so a renamed scenario or screenshot fails a
test instead of leaving a stale image.

:data:`TEST_SHOTS` lists the images a test of another part takes against a server this
command does not start (Arize Phoenix's UI showing a Flowloom trace): that test writes them
into ``web/screenshots/`` when ``FLOWLOOM_TEST_README_SHOTS=1``
(``FLOWLOOM_TEST_README_SHOTS=1 python3 -m pytest <the test file>``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from tests.web.canvas_env import ROOT, WEB, canvas_server, run_browser_files, web_prerequisites

__all__ = ["README_SHOTS", "SCENARIO_FILES", "TARGET", "TEST_SHOTS", "main", "regenerate"]

#: README image (in web/screenshots/) -> (the e2e file whose scenario takes it, the shot's name)
README_SHOTS: dict[str, tuple[str, str]] = {
    "canvas-run.png": ("readme.test.mjs", "readme-canvas-run"),
}

#: README image -> (the web/e2e script that takes it, the shot's name, the test that runs
#: the script and copies the image when FLOWLOOM_TEST_README_SHOTS=1)
TEST_SHOTS: dict[str, tuple[str, str, str]] = {
    "phoenix-trace.png": ("phoenix-trace.mjs", "phoenix-trace", "tests/workers/rq/test_phoenix_traces.py"),
}

#: the browser files run to take them
SCENARIO_FILES = sorted({file for file, _shot in README_SHOTS.values()})

TARGET = WEB / "screenshots"


def regenerate(work: Path, target: Path = TARGET) -> list[Path]:
    """Run the scenarios with ``work`` as the server's home and copy the README's
    screenshots into ``target``; returns the files written.

    Raises:
        RuntimeError: a prerequisite is missing, a scenario failed, or a screenshot the
        table names was not taken (the browser output is in the message).
    """
    missing = web_prerequisites()
    if missing:
        raise RuntimeError("the browser tests cannot run:\n  " + "\n  ".join(missing))
    shots = work / "shots"
    with canvas_server(work / "home", startup_s=180) as server:
        result = run_browser_files(server, SCENARIO_FILES, shots)
    if result.returncode != 0 or result.failed != 0:
        raise RuntimeError(f"a screenshot scenario failed:\n{result.output[-4000:]}")
    written = []
    target.mkdir(parents=True, exist_ok=True)
    for image, (_file, name) in sorted(README_SHOTS.items()):
        taken = shots / f"{name}.png"
        if not taken.is_file():
            raise RuntimeError(f"the scenarios took no screenshot {name!r} (for {image}):\n{result.summary()}")
        shutil.copyfile(taken, target / image)
        written.append(target / image)
    return written


def main(argv: list[str] | None = None) -> int:
    """The command line: regenerate into ``web/screenshots/`` (or ``--target``)."""
    parser = argparse.ArgumentParser(prog="python -m tests.web.screenshots", description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=Path, default=TARGET, help="folder for the images (default web/screenshots)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flowloom-screenshots-") as work:
        try:
            written = regenerate(Path(work), args.target)
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
    for path in written:
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
