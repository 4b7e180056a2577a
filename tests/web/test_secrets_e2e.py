"""The secrets scenario of the canvas in a real browser (``web/e2e/secrets.test.mjs``):
a builder declares a secret, uses it in an HTTP node's header and runs the flow; the
local HTTP server started here receives the real value, and the value is found nowhere
else: not in the page, the export, the API's answers or the trace (checked by the
browser scenario), not in the server's log and not in the database file (stored
encrypted, checked here)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.support.http_reply import reply_json
from tests.web.canvas_env import canvas_server, run_browser_files, web_prerequisites

SECRET = "sk-browser-secret-6e1f0b7c93"
SCENARIOS = 1


class _Hook(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.server.seen.append(dict(self.headers))  # type: ignore[attr-defined]
        reply_json(self, b'{"ok": true}')


@pytest.mark.slow
@pytest.mark.timeout(420)  # the browser suite's own limit (300 s) and the server's start, on a loaded machine
def test_a_secret_is_sent_by_the_http_node_and_never_shown(tmp_path, capsys):
    missing = web_prerequisites()
    if missing:
        pytest.fail("the browser tests cannot run:\n  " + "\n  ".join(missing), pytrace=False)
    hook = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    hook.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=hook.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    shots = tmp_path / "screenshots"
    home = tmp_path / "home"
    try:
        with canvas_server(home, extra_env={"FLOWLOOM_HTTP_ALLOW": "127.0.0.1"}) as server:
            result = run_browser_files(server, ["secrets.test.mjs"], shots, env={
                "E2E_SECRET": SECRET, "E2E_ECHO_URL": f"http://127.0.0.1:{hook.server_address[1]}"})
            with capsys.disabled():
                print(f"\nsecrets browser scenario (exit {result.returncode}); screenshots in {shots}")
                print(result.summary())
            assert result.returncode == 0 and result.failed == 0, result.output[-6000:]
            assert result.passed == SCENARIOS, result.output[-6000:]
            log = server.log.read_text(errors="replace")
    finally:
        hook.shutdown()
        hook.server_close()
        thread.join(5)
    assert [h.get("Authorization") for h in hook.seen] == [f"Bearer {SECRET}"], "the node sent the real value"
    assert SECRET not in log, "the server's log holds the secret"
    for path in home.glob("flowloom.db*"):
        assert SECRET.encode() not in path.read_bytes(), f"{path.name} holds the secret in clear"
    assert (home / "secret.key").stat().st_mode & 0o777 == 0o600
