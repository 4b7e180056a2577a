"""The scenarios behind the README's screenshots pass in a real browser and take every
screenshot the README table of :mod:`tests.web.screenshots` names (into the test's tmp
folder; ``python -m tests.web.screenshots`` is the command that copies them into
``web/screenshots/``)."""

from __future__ import annotations

import pytest

from tests.web.canvas_env import canvas_server, run_browser_files, web_prerequisites
from tests.web.screenshots import README_SHOTS, SCENARIO_FILES


@pytest.mark.slow
@pytest.mark.timeout(600)  # a browser suite on a loaded machine takes minutes
def test_readme_screenshot_scenarios_pass_and_take_every_screenshot(tmp_path):
    missing = web_prerequisites()
    if missing:
        pytest.fail("the browser tests cannot run:\n  " + "\n  ".join(missing), pytrace=False)
    shots = tmp_path / "screenshots"
    with canvas_server(tmp_path / "home", startup_s=180) as server:
        result = run_browser_files(server, SCENARIO_FILES, shots)
    assert result.returncode == 0 and result.failed == 0, result.output[-6000:]
    assert result.passed >= len(README_SHOTS), result.output[-6000:]
    assert {f"{name}.png" for _file, name in README_SHOTS.values()} <= {p.name for p in shots.iterdir()}
