"""``flowloom secrets`` and secrets in ``flowloom run`` / ``flowloom import``, as processes:
a value set from stdin reaches an HTTP node's header in a run of a workflow file, and no
command prints it; an imported Dify file names the secrets to set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml

from tests.support.http_reply import reply_json

SECRET = "sk-cli-secret-2b7d90e4c1"


class _Hook(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append(self.headers.get("Authorization"))  # type: ignore[attr-defined]
        reply_json(self, b'{"ok": true}')


def flowloom(home: Any, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLOWLOOM_HOME": str(home), "FLOWLOOM_HTTP_ALLOW": "127.0.0.1"}
    env.pop("FLOWLOOM_DATABASE_URL", None)
    return subprocess.run([sys.executable, "-m", "api.cli", *args], capture_output=True, text=True, timeout=120,
                          env=env, input=stdin if stdin is not None else "")


@pytest.mark.slow
def test_a_secret_set_from_stdin_reaches_the_http_node_and_is_never_printed(tmp_path):
    hook = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    hook.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=hook.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    home = tmp_path / "home"
    flow = tmp_path / "vault.json"
    flow.write_text(json.dumps({
        "id": "vault", "environment": [{"name": "API_TOKEN", "type": "secret"}],
        "nodes": [{"id": "start", "type": "start"},
                  {"id": "call", "type": "http_request", "config": {
                      "url": f"http://127.0.0.1:{hook.server_address[1]}/hook",
                      "headers": {"Authorization": "Bearer {{ env.API_TOKEN }}"}}},
                  {"id": "end", "type": "end", "config": {"outputs": [{"name": "sent", "value": {"ref": "env.API_TOKEN"}}]}}],
        "edges": [{"id": "a", "source": "start", "target": "call"}, {"id": "b", "source": "call", "target": "end"}]}))
    try:
        unset = flowloom(home, "run", str(flow), "--json")
        assert unset.returncode == 1 and "'API_TOKEN' is not set" in unset.stdout, unset.stdout[-2000:]
        made = flowloom(home, "secrets", "set", "vault", "API_TOKEN", stdin=SECRET + "\n")
        assert made.returncode == 0, made.stderr
        listed = flowloom(home, "secrets", "list", "vault", "--json")
        assert [s["name"] for s in json.loads(listed.stdout)] == ["API_TOKEN"]
        ran = flowloom(home, "run", str(flow), "--json")
        assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr
        assert hook.seen[-1] == f"Bearer {SECRET}"
        shown = flowloom(home, "show", json.loads(ran.stdout.splitlines()[0])["run_id"], "--json")
        assert shown.returncode == 0, shown.stderr
        for proc in (unset, made, listed, ran, shown):
            assert SECRET not in proc.stdout + proc.stderr
        assert "******" in ran.stdout, "the output that is the secret shows the mask"
        removed = flowloom(home, "secrets", "rm", "vault", "API_TOKEN")
        assert removed.returncode == 0 and json.loads(flowloom(home, "secrets", "list", "vault", "--json").stdout) == []
        for log in home.glob("*.log"):
            assert SECRET not in log.read_text(errors="replace")
    finally:
        hook.shutdown()
        hook.server_close()
        thread.join(5)


@pytest.mark.slow
def test_import_names_the_secrets_to_set(tmp_path):
    app = {"app": {"name": "Hooked", "mode": "workflow"}, "kind": "app", "version": "0.1.5",
           "workflow": {"environment_variables": [{"name": "TOKEN", "value_type": "secret", "value": ""}],
                        "conversation_variables": [],
                        "graph": {"nodes": [
                            {"id": "s", "data": {"type": "start", "title": "Start", "variables": []}},
                            {"id": "e", "data": {"type": "end", "title": "End", "outputs": [
                                {"variable": "t", "value_selector": ["env", "TOKEN"]}]}}],
                            "edges": [{"id": "1", "source": "s", "target": "e", "sourceHandle": "source"}]}}}
    source = tmp_path / "hooked.yml"
    source.write_text(yaml.safe_dump(app))
    proc = flowloom(tmp_path / "home", "import", str(source), "-o", str(tmp_path / "hooked.json"))
    assert proc.returncode == 0, proc.stderr
    assert "secret to set: TOKEN (flowloom secrets set hooked TOKEN)" in proc.stderr
    assert json.loads((tmp_path / "hooked.json").read_text())["environment"] == [{"name": "TOKEN", "type": "secret"}]
