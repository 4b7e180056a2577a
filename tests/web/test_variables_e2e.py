"""What a node may read, and conversation variables, in a real browser (headless Chromium
against a real ``flowloom serve``; ``web/e2e/variables.test.mjs``): the variable picker
inside an iteration body offers the item and index (collect not set yet) and neither the
iteration's results nor a sibling body; a counter kept per chat goes 1, 2, 3 over three
turns of the chat preview, and an edit of the value in the preview changes the next turn.
"""

from __future__ import annotations

import pytest

from tests.web.canvas_env import canvas_server, run_browser_files, web_prerequisites

SCENARIOS = 2


@pytest.mark.slow
@pytest.mark.timeout(420)  # the browser suite's own limit (300 s) and the server's start, on a loaded machine
def test_variable_scenarios_pass_in_a_real_browser(tmp_path, capsys):
    missing = web_prerequisites()
    if missing:
        pytest.fail("the browser tests cannot run:\n  " + "\n  ".join(missing), pytrace=False)
    shots = tmp_path / "screenshots"
    with canvas_server(tmp_path / "home") as server:
        result = run_browser_files(server, ["variables.test.mjs"], shots, timeout_s=300)
        with capsys.disabled():
            print(f"\nbrowser suite (exit {result.returncode}); screenshots in {shots}")
            print(result.summary())
        assert result.returncode == 0 and result.failed == 0, result.output[-6000:]
        assert result.passed == SCENARIOS, result.output[-6000:]
        assert {"picker-iteration-body.png", "conversation-three-turns.png"} <= {p.name for p in shots.iterdir()}
