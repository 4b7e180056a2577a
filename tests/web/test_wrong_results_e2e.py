"""Three wrong results a builder met in the canvas, in a real browser (headless Chromium
against a real ``flowloom serve``, ``web/e2e/wrong-results.test.mjs``): a re-run from a
failed node after a router never says the skipped branch; model calls inside an
iteration count in the run's tokens and cost; a workflow ending in End nodes shows its
outputs in the run panel and never runs an iteration's LLM texts together in the answer.

The HTTP node of the router calls this machine (``FLOWLOOM_HTTP_ALLOW=127.0.0.1``); the
iteration's model is a priced one (gpt-4o, sent to the scripted server like every model).
"""

from __future__ import annotations

import pytest

from tests.web.canvas_env import canvas_server, run_browser_files, web_prerequisites

SCENARIOS = 3


@pytest.mark.slow
@pytest.mark.timeout(600)  # a browser suite on a loaded machine takes minutes
def test_wrong_results_stay_fixed_in_a_real_browser(tmp_path, capsys):
    missing = web_prerequisites()
    if missing:
        pytest.fail("the browser tests cannot run:\n  " + "\n  ".join(missing), pytrace=False)
    shots = tmp_path / "screenshots"
    env = {"FLOWLOOM_HTTP_ALLOW": "127.0.0.1", "OPENAI_API_KEY": "sk-scripted-e2e"}
    with canvas_server(tmp_path / "home", startup_s=180, extra_env=env) as server:
        result = run_browser_files(server, ["wrong-results.test.mjs"], shots, timeout_s=540)
    with capsys.disabled():
        print(f"\n{result.summary()}\nscreenshots in {shots}")
    assert result.returncode == 0 and result.failed == 0, result.output[-6000:]
    assert result.passed == SCENARIOS, result.output[-6000:]
    assert {"rerun-router-answer.png", "iteration-tokens.png", "end-outputs.png"} <= {p.name for p in shots.iterdir()}
