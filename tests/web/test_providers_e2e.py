"""The "Model providers" page in a real browser (``web/e2e/providers.test.mjs``): a
builder adds a provider pointing at the scripted model server with a key, lists and adds
its model, prices it, makes it the default chat model and chats with a flow whose model
is ``default``; then replaces and removes the key; then overrides an operator model's
limits and capabilities for the workspace and resets them. Here: the endpoint got the key it
was given, and the key is in no line of the server's log (the browser side checks the
page, the API answers and the export)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.openai_server import Reply, text_reply
from tests.web.canvas_env import canvas_server, run_browser_files, web_prerequisites

PROVIDER_KEY = "sk-team-e2e-4c8d1f0a9b7e6d5c"
NEW_KEY = "sk-team-e2e-rotated-1a2b3c4d5e6f"
UPSTREAM = "team-upstream-id"
SCENARIOS = 3


def team_responder(body: dict[str, Any]) -> Reply:
    """Answers with the upstream model id it was asked for and the user's text, so the
    chat shows which endpoint and model answered."""
    question = next((str(m.get("content") or "") for m in reversed(body.get("messages") or [])
                     if m.get("role") == "user"), "")
    return text_reply(f"Team model {body.get('model')} answers: {question}", chunk_size=6, usage=(9, 7))


@pytest.mark.slow
@pytest.mark.timeout(600)  # three browser scenarios and two servers: minutes on a loaded machine
def test_model_providers_page_in_a_real_browser(tmp_path, capsys):
    missing = web_prerequisites()
    if missing:
        pytest.fail("the browser tests cannot run:\n  " + "\n  ".join(missing), pytrace=False)
    shots = tmp_path / "screenshots"
    # the tenant's endpoint is the scripted server on 127.0.0.1: the operator allows it
    with canvas_server(tmp_path / "home", responder=team_responder,
                       extra_env={"FLOWLOOM_HTTP_ALLOW": "127.0.0.1"}) as server:
        server.model.json_routes["/v1/models"] = {"object": "list", "data": [
            {"id": UPSTREAM, "object": "model", "owned_by": "team"}]}
        result = run_browser_files(server, ["providers.test.mjs"], shots, timeout_s=300, env={
            "E2E_PROVIDER_URL": server.model.base_url, "E2E_PROVIDER_KEY": PROVIDER_KEY,
            "E2E_PROVIDER_NEW_KEY": NEW_KEY, "E2E_PROVIDER_MODEL": UPSTREAM})
        with capsys.disabled():
            print(f"\nproviders browser suite (exit {result.returncode}); screenshots in {shots}")
            print(result.summary())
        assert result.returncode == 0 and result.failed == 0, result.output[-6000:]
        assert result.passed == SCENARIOS, result.output[-6000:]
        assert (shots / "providers-page.png").is_file()
        to_endpoint = [r for r in server.model.requests if r.path in ("/v1/models", "/v1/chat/completions")]
        assert any(r.path == "/v1/models" for r in to_endpoint)
        chats = [r for r in to_endpoint if r.path == "/v1/chat/completions"]
        assert chats and all(r.headers.get("authorization") == f"Bearer {PROVIDER_KEY}" for r in chats)
        assert all(r.body["model"] == UPSTREAM for r in chats)
        log = server.log.read_text(errors="replace")
    for key in (PROVIDER_KEY, NEW_KEY):
        assert key not in log, "a provider key is in the server's log"
