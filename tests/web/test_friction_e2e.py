"""The builder's everyday friction in a real browser (headless Chromium against a real
``flowloom serve``, ``web/e2e/friction.test.mjs``): import through the file dialog with
model and dataset mapping, rename and delete in the workflow list, placement of a node
added from another, a tool call node's tools on its card, "Insert variable" at the caret,
a confirmed Restore, and the chat preview's question kept in view.

Needs the Dify export ``shared/corpus/dify/knowledge_chat_retrieval.yml`` beside the
checkout (its LLM and knowledge retrieval name a model and a dataset unknown here).
"""

from __future__ import annotations

import pytest

from tests.web.canvas_env import ROOT, canvas_server, run_browser_files, web_prerequisites

KNOWLEDGE_FILE = ROOT.parent / "shared" / "corpus" / "dify" / "knowledge_chat_retrieval.yml"
SCENARIOS = 5


@pytest.mark.slow
@pytest.mark.timeout(600)  # a browser suite on a loaded machine takes minutes
def test_builder_friction_scenarios_pass_in_a_real_browser(tmp_path, capsys):
    missing = web_prerequisites()
    if not KNOWLEDGE_FILE.is_file():
        missing.append(f"the Dify export {KNOWLEDGE_FILE} is missing (shared/corpus beside the checkout)")
    if missing:
        pytest.fail("the browser tests cannot run:\n  " + "\n  ".join(missing), pytrace=False)
    shots = tmp_path / "screenshots"
    with canvas_server(tmp_path / "home", startup_s=180) as server:
        result = run_browser_files(server, ["friction.test.mjs"], shots, timeout_s=540,
                                   env={"E2E_KNOWLEDGE_FILE": str(KNOWLEDGE_FILE)})
    with capsys.disabled():
        print(f"\n{result.summary()}\nscreenshots in {shots}")
    assert result.returncode == 0 and result.failed == 0, result.output[-6000:]
    assert result.passed == SCENARIOS, result.output[-6000:]
