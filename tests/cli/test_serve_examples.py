"""``flowloom serve`` as a real process: the canvas at ``/`` with its login URL (same URL
after a restart, key file 0600, never printed for a non-loopback address unless asked),
and the bundled examples saved once as workflows that run without a model key."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
INDEX = "<!doctype html><title>canvas under test</title>"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Server:
    """A running ``flowloom serve``: its stderr lines, collected as they come."""

    def __init__(self, process: subprocess.Popen[str], port: int) -> None:
        self.process, self.port, self.lines = process, port, []
        self.base = f"http://127.0.0.1:{port}"
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)


@contextmanager
def serve(env: dict[str, str], *args: str) -> Iterator[_Server]:
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "api.cli", "serve", "--port", str(port), *args], cwd=ROOT,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    server = _Server(process, port)
    try:
        deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
        while True:
            assert process.poll() is None, server.stderr
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"flowloom serve did not answer: {server.stderr}"
            time.sleep(0.1)
        yield server
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert "Traceback" not in server.stderr


def _env(tmp_path: Path) -> dict[str, str]:
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.html").write_text(INDEX)
    return {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "home"), "FLOWLOOM_WEB_DIST": str(dist)}


def _login(server: _Server) -> tuple[str, str]:
    match = re.search(r"canvas: (http://127\.0\.0\.1:\d+/)#key=(fl_\S+)", server.stderr)
    assert match, server.stderr
    return match.group(1), match.group(2)


def test_serve_prints_a_stable_login_url_and_saves_the_examples_once(tmp_path):
    env = _env(tmp_path)
    with serve(env) as first:
        url, key = _login(first)
        auth = {"Authorization": f"Bearer {key}"}
        assert url == first.base + "/"
        assert httpx.get(url).text == INDEX
        assert "examples: saved" in first.stderr and "runnable without a model key: " in first.stderr
        runnable = first.stderr.split("runnable without a model key: ", 1)[1].splitlines()[0].split(", ")
        assert "hello" in runnable and "poll_job" not in runnable and "weather_lookup" not in runnable
        assert "  - poll_job, weather_lookup: no model key, but an HTTP server to call" in first.stderr
        listed = httpx.get(f"{first.base}/v1/workflows", headers=auth).json()["workflows"]
        ids = {w["id"] for w in listed}
        assert {"hello", "grade_router", "order_confirm", "word_stats", "support_triage"} <= ids
        assert all(w["published_version"] == 1 for w in listed)
        ran = httpx.post(f"{first.base}/v1/workflows/hello/runs", json={"inputs": {"name": "Ada"}}, headers=auth,
                         timeout=30)
        assert ran.status_code == 200 and ran.json()["outputs"] == {"greeting": "Hello, Ada! Welcome to Flowloom."}
        checked = httpx.post(f"{first.base}/v1/workflows/grade_router/validate", headers=auth).json()
        assert checked["valid"] and [(i["name"], i["type"], i["required"]) for i in checked["inputs"]] == [
            ("score", "number", True), ("student", "string", False)]
        assert checked["inputs"][1]["default"] == "Student"
        draft = httpx.get(f"{first.base}/v1/workflows/hello", headers=auth).json()
        edited = {**draft["draft"], "name": "Hello, edited"}
        saved = httpx.put(f"{first.base}/v1/workflows/hello", headers=auth,
                          json={"workflow": edited, "draft_version": draft["draft_version"]})
        assert saved.status_code == 200
    key_file = tmp_path / "home" / "canvas-key"
    assert key_file.read_text().strip() == key and stat.S_IMODE(key_file.stat().st_mode) == 0o600

    with serve(env, "--examples") as second:
        assert _login(second)[1] == key  # the same URL after a restart
        assert "examples: already saved" in second.stderr
        after = httpx.get(f"{second.base}/v1/workflows", headers=auth).json()["workflows"]
        assert sorted(w["id"] for w in after) == sorted(ids)  # no duplicates
        assert httpx.get(f"{second.base}/v1/workflows/hello", headers=auth).json()["draft"]["name"] == "Hello, edited"
    keys = subprocess.run([sys.executable, "-m", "api.cli", "keys", "list", "--json"], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=60)
    records = json.loads(keys.stdout)
    assert [r["name"] for r in records].count("canvas (flowloom serve)") == 1
    assert key not in keys.stdout


def test_serve_on_a_non_loopback_address_prints_no_key_unless_asked(tmp_path):
    env = _env(tmp_path)
    with serve(env, "--host", "0.0.0.0", "--no-examples") as server:
        assert "#key=" not in server.stderr and "--login-url prints a login link" in server.stderr
        assert "examples:" not in server.stderr
        assert httpx.get(server.base + "/").text == INDEX
    assert not (tmp_path / "home" / "canvas-key").exists()


def _example(name: str) -> dict:
    return json.loads((ROOT / "examples" / f"{name}.json").read_text(encoding="utf-8"))


def test_http_examples_are_not_runnable_as_they_are_and_the_banner_says_what_they_need(capsys):
    """poll_job and weather_lookup need no model key, but their HTTP node's host is the
    ``base_url`` input, and the stub they call is on loopback, which the address guard
    refuses unless FLOWLOOM_HTTP_ALLOW names it: not "runnable without a model key"."""
    from api.cli.serve import _print_start, _Start
    from api.examples import ExamplesImported, http_needs
    from engine.settings import Settings

    for name in ("poll_job", "weather_lookup"):
        need = http_needs(_example(name), Settings())
        assert need is not None and "input base_url" in need and "FLOWLOOM_HTTP_ALLOW" in need, need
    assert "(now 127.0.0.1)" in str(http_needs(_example("poll_job"), Settings(http_allow=["127.0.0.1"])))
    assert http_needs(_example("hello"), Settings()) is None
    literal = {"nodes": [{"id": "get", "type": "http_request", "config": {"url": "http://127.0.0.1:8000/x"}},
                         {"id": "pub", "type": "http_request", "config": {"url": "https://api.example.com/x"}}]}
    assert "FLOWLOOM_HTTP_ALLOW=127.0.0.1 " in str(http_needs(literal, Settings()))
    assert http_needs(literal, Settings(http_allow=["127.0.0.0/8"])) is None

    report = ExamplesImported(created=["hello", "poll_job", "weather_lookup"], no_model_key=["hello"],
                              http_needs={"an HTTP server to call: set input base_url": ["poll_job", "weather_lookup"]})
    _print_start(_Start(needs_admin_key=False, login_key=None, examples=report), "http://127.0.0.1:8000",
                 ROOT / "no-dist", None, True)
    lines = capsys.readouterr().err.splitlines()
    [saved] = [line for line in lines if line.startswith("examples: saved")]
    assert saved.endswith("runnable without a model key: hello")
    assert "  - poll_job, weather_lookup: no model key, but an HTTP server to call: set input base_url" in lines
    assert any("examples/stub_server.py" in line and "FLOWLOOM_HTTP_ALLOW=127.0.0.1" in line for line in lines)


async def test_importing_the_examples_sorts_out_those_that_call_an_http_api(tmp_path):
    from types import SimpleNamespace

    from api.examples import import_examples
    from engine.settings import Settings
    from nodes import builtin_catalog

    class Repo:
        async def create(self, tenant_id, doc):
            pass

        async def publish(self, tenant_id, workflow_id, doc, note):
            pass

    service = SimpleNamespace(catalog=builtin_catalog(), settings=Settings(), compile=lambda doc: None)
    report = await import_examples(Repo(), service, "default")
    assert {"hello", "echo_chat", "word_stats"} <= set(report.no_model_key)
    assert not {"poll_job", "weather_lookup", "support_triage"} & set(report.no_model_key)
    [(need, ids)] = report.http_needs.items()
    assert ids == ["poll_job", "weather_lookup"] and "input base_url" in need


def _start(examples: bool | None = None) -> Any:
    """What ``flowloom serve``'s start does with the examples (in this process, on the
    FLOWLOOM_HOME store), and the banner's lines about them."""
    from api.app import key_store_of
    from api.cli.running import with_service
    from api.cli.serve import _offer_examples, _print_start, _Start

    async def body(service: Any) -> _Start:
        keys = key_store_of(service)
        await keys.ensure_tenant("default", "Default tenant")
        start = _Start(needs_admin_key=False, login_key=None)
        await _offer_examples(start, keys, service, examples)
        return start

    start = with_service(body)
    _print_start(start, "http://127.0.0.1:8400", ROOT / "no-dist", None, True)
    return start


def _workflows(delete: bool = False) -> list[str]:
    from api.cli.running import with_service
    from workers.sql.workflows import SqlWorkflowStore

    async def body(service: Any) -> list[str]:
        repo = SqlWorkflowStore(service.stores.runs)
        ids = [w.id for w in await repo.list("default")]
        for workflow_id in ids if delete else []:
            await repo.delete("default", workflow_id)
        return ids

    return with_service(body)


def test_the_first_serve_saves_the_examples_though_the_command_line_made_the_tenant_and_later_ones_do_not(capsys):
    # the README's order: datasets first (it creates tenant default), then serve
    from typer.testing import CliRunner

    from api.cli import app
    from api.examples import example_ids

    made = CliRunner().invoke(app, ["datasets", "create", "Handbook", "--id", "handbook"])
    assert made.exit_code == 0, made.stderr
    first = _start()
    assert "hello" in first.examples.created and "knowledge_qa" in first.examples.published
    assert "examples: saved" in capsys.readouterr().err
    assert _start().examples is None and "examples:" not in capsys.readouterr().err  # they are there
    assert sorted(_workflows(delete=True)) == example_ids()
    gone = _start()  # deleted by the user: not saved again, but the banner says how
    assert gone.examples is None and _workflows() == []
    assert (f"examples: not saved (tenant default has none of the {len(example_ids())} bundled examples); "
            "`flowloom serve --examples` saves them") in capsys.readouterr().err
    assert _start(False).examples is None and "examples:" not in capsys.readouterr().err
    assert "hello" in _start(True).examples.created and sorted(_workflows()) == example_ids()


def test_a_first_start_told_no_examples_saves_none_later_either(capsys):
    assert _start(False).examples is None
    assert _start().examples is None and _workflows() == []
    assert "`flowloom serve --examples` saves them" in capsys.readouterr().err
