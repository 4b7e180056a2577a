"""The canvas in a real browser: headless Chromium (``/usr/bin/chromium``, driven by
playwright-core under node's test runner, ``web/e2e/``) against a real ``flowloom
serve`` whose models are the scripted OpenAI-compatible server.

The browser suite builds a classify flow by drag and connect, fixes its validation
error and runs it, re-runs from a node, publishes it, stops a slow run, answers a
question in the chat preview, shows why a run or a chat turn was refused or failed
(the inputs' problems, the run's error), lets an agent ask a question and shows its
rounds, undoes and redoes, exports and re-imports, and imports a
Dify file; then this test calls the flow the browser published through
``/v1/chat/completions`` with the openai SDK. Screenshots of the canvas, the run panel
and the trace are saved under the test's tmp folder (the path is printed).

Needs ``web/node_modules`` (``npm --prefix web ci``) and ``web/dist``
(``npm --prefix web run build``): the test fails, naming the command, when either is
missing.
"""

from __future__ import annotations


import pytest
from openai import OpenAI

from tests.web.canvas_env import ROOT, canvas_server, run_browser_files, web_prerequisites

DIFY_FILE = ROOT.parent / "shared" / "corpus" / "dify" / "basic_chatflow.yml"
SCENARIOS = 11
SUITE_TIMEOUT_S = 300


def _require_web() -> None:
    missing = web_prerequisites()
    if not DIFY_FILE.is_file():
        missing.append(f"the Dify export {DIFY_FILE} is missing (shared/corpus beside the checkout)")
    if missing:
        pytest.fail("the browser tests cannot run:\n  " + "\n  ".join(missing), pytrace=False)




@pytest.mark.timeout(420)  # the browser suite's own limit (300 s) and the server's start, on a loaded machine
def test_canvas_scenarios_pass_in_a_real_browser(tmp_path, capsys):
    _require_web()
    shots = tmp_path / "screenshots"
    with canvas_server(tmp_path / "home") as server:
        result = run_browser_files(server, ["canvas.test.mjs"], shots, timeout_s=SUITE_TIMEOUT_S,
                                   env={"E2E_DIFY_FILE": str(DIFY_FILE), "E2E_TRIAGE_ID": "e2e_triage"})
        with capsys.disabled():
            print(f"\nbrowser suite (exit {result.returncode}); screenshots in {shots}; "
                  f"its output in {tmp_path / 'e2e-output.txt'}")
            print(result.summary())
        assert result.returncode == 0 and result.failed == 0, result.output[-6000:]
        assert result.passed == SCENARIOS, result.output[-6000:]
        assert {"triage-validation-error.png", "triage-canvas-after-run.png", "triage-run-panel.png",
                "triage-trace.png"} <= {p.name for p in shots.iterdir()}

        # the flow the browser built and published, called as an OpenAI model
        client = OpenAI(base_url=server.url + "/v1", api_key=server.key, max_retries=0)
        assert "e2e_triage" in [m.id for m in client.models.list().data]
        reply = client.chat.completions.create(
            model="e2e_triage", messages=[{"role": "user", "content": "Please refund the invoice you charged twice"}])
        assert reply.choices[0].message.content == "Billing team (v2): refund approved."
        streamed = "".join(chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(
            model="e2e_triage", stream=True, messages=[{"role": "user", "content": "Where is my parcel?"}])
            if chunk.choices)
        assert streamed == "Someone will get back to you."
