"""Run one node and the readable traces in a real browser: headless Chromium (driven by
playwright-core, ``web/e2e/traces.test.mjs``) against a real ``flowloom serve`` whose
model is the scripted OpenAI-compatible server answering with :func:`responder`.

The scenarios run a node alone from its panel (a missing value named, typed values, the
result on the node, its last values prefilled, the run in the history by title), show
an iteration's per-item trace and node titles in the trace and the History rows, and a
tool-calling agent's timeline with a model node's sent messages. Screenshots are saved
under the test's tmp folder (the path is printed).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.support.openai_server import Reply, finish, reply, text, text_reply, tool_delta, usage
from tests.web.canvas_env import canvas_server, run_browser_files, web_prerequisites

SCENARIOS = 3
SUITE_TIMEOUT_S = 300


def responder(body: dict[str, Any]) -> Reply:
    """A request offering ``eval_expression`` (the calculator agent): first a thought and
    a call computing ``6 * 7``, then, with the tool's result, the answer naming it; any
    other request: ``Scripted answer to: <the user's text>``."""
    messages = body.get("messages") or []
    names = [t.get("function", {}).get("name", "") for t in body.get("tools") or []]
    if "eval_expression" in names:
        results = [str(m.get("content", "")) for m in messages if m.get("role") == "tool"]
        if not results:
            return reply(text("I will compute 6 * 7."),
                         tool_delta(0, id="call_calc", name="eval_expression",
                                    arguments=json.dumps({"expression": "6 * 7"})),
                         usage(25, 9), finish("tool_calls"))
        # the tool's result reaches the model fenced as data: its value is the fenced line
        fenced = re.search(r">>>\n(.*?)\n<<<", results[-1], re.S)
        return text_reply(f"The answer is {(fenced.group(1) if fenced else results[-1]).strip()}.", usage=(30, 6))
    question = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    return text_reply(f"Scripted answer to: {question}", usage=(11, 4))


@pytest.mark.slow
@pytest.mark.timeout(420)  # the browser suite's own limit (300 s) and the server's start, on a loaded machine
def test_run_one_node_and_readable_traces_in_a_real_browser(tmp_path, capsys):
    missing = web_prerequisites()
    if missing:
        pytest.fail("the browser tests cannot run:\n  " + "\n  ".join(missing), pytrace=False)
    shots = tmp_path / "screenshots"
    with canvas_server(tmp_path / "home", responder=responder) as server:
        result = run_browser_files(server, ["traces.test.mjs"], shots, timeout_s=SUITE_TIMEOUT_S)
        with capsys.disabled():
            print(f"\nbrowser suite (exit {result.returncode}); screenshots in {shots}; "
                  f"its output in {tmp_path / 'e2e-output.txt'}")
            print(result.summary())
        assert result.returncode == 0 and result.failed == 0, result.output[-6000:]
        assert result.passed == SCENARIOS, result.output[-6000:]
        assert {"run-one-node.png", "trace-iteration-items.png", "trace-agent-timeline.png"} <= \
            {p.name for p in shots.iterdir()}
