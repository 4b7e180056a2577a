"""The real server behind the browser tests and the canvas bench.

:func:`canvas_server` starts, as real processes and only on 127.0.0.1: the scripted
OpenAI-compatible model server (:mod:`tests.support.openai_server`, in this process,
answering with :func:`e2e_responder`) and ``flowloom serve`` (``[sys.executable, "-m",
"api.cli", "serve", ...]``) on a free port with its own ``FLOWLOOM_HOME``, every
registry model sent to the scripted server through ``FLOWLOOM_LLM_BASE_URL_OVERRIDE``
and the built canvas from ``web/dist``; then it creates an admin API key with
``flowloom keys create``. :func:`web_prerequisites` says which command builds what the
browser needs when it is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx

from tests.support.openai_server import Reply, ScriptedOpenAIServer, delay, finish, reasoning_reply, reply, text, \
    text_reply, tool_delta, usage

__all__ = ["BrowserRun", "CanvasServer", "ROOT", "WEB", "canvas_server", "e2e_responder", "run_browser_files",
           "web_prerequisites"]

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"
CHROMIUM = Path("/usr/bin/chromium")

#: what the scripted model answers (the e2e flows are written against these)
BILLING_WORDS = ("refund", "bill", "invoice", "charge")
SLOW_CHUNKS = 60
SLOW_DELAY_S = 0.5


def web_prerequisites() -> list[str]:
    """What is missing for a browser test, each with the command that makes it (empty: all there)."""
    missing = []
    if not (WEB / "node_modules" / "playwright-core" / "package.json").is_file():
        missing.append("web/node_modules is not installed: run `npm --prefix web ci`")
    if not (WEB / "dist" / "index.html").is_file():
        missing.append("web/dist is not built: run `npm --prefix web run build`")
    if not CHROMIUM.is_file():
        missing.append("/usr/bin/chromium is missing: run `apt-get install -y chromium`")
    return missing


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def e2e_responder(body: dict[str, Any]) -> Reply:
    """The scripted model of the browser tests, deterministic on the request:

    - a request offering ``ask_agent`` (a planning agent): :func:`_agent_reply`;
    - a request offering other tools (the classifier's tool protocol): a call of the
      first tool with ``{"category": "billing"}`` when the question names a refund, a
      bill, an invoice or a charge, else ``{"category": "other"}``;
    - a prompt saying ``slow``: :data:`SLOW_CHUNKS` words, one every
      :data:`SLOW_DELAY_S` seconds (a run long enough to be stopped);
    - a question saying ``think``: reasoning (``reasoning_content``) first, then the answer;
    - anything else: ``Scripted answer to: <the user's text>`` in small chunks.
    """
    question = _last_user_text(body)
    names = [t.get("function", {}).get("name", "") for t in body.get("tools") or []]
    if "ask_agent" in names:
        return _agent_reply(body)
    if names:
        category = "billing" if any(w in question.lower() for w in BILLING_WORDS) else "other"
        return reply(tool_delta(0, id="call_1", name=names[0], arguments=json.dumps({"category": category})),
                     usage(20, 5), finish("tool_calls"))
    system = " ".join(str(m.get("content", "")) for m in body.get("messages") or [] if m.get("role") == "system")
    if "categor" in system.lower() and "category" in system:  # the classifier's prompt protocol
        category = "billing" if any(w in question.lower() for w in BILLING_WORDS) else "other"
        return text_reply(json.dumps({"category": category}), usage=(20, 5))
    if "slow" in question.lower() or "slow" in system.lower():
        steps: list[Any] = []
        for i in range(SLOW_CHUNKS):
            steps += [text(f"word{i} "), delay(SLOW_DELAY_S)]
        return reply(*steps, usage(10, SLOW_CHUNKS), finish())
    if "think" in question.lower():
        return reasoning_reply("First I weigh the question.", f"Scripted answer to: {question}", usage=(12, 20))
    return text_reply(f"Scripted answer to: {question}", chunk_size=5, usage=(12, 6))


def _copy_dist(target: Path) -> Path:
    """A copy of ``web/dist`` at ``target`` (tried again while a build is rewriting it).

    Raises:
        RuntimeError: no complete copy (with ``index.html``) after a few tries.
    """
    for _ in range(10):
        shutil.rmtree(target, ignore_errors=True)
        with contextlib.suppress(OSError, shutil.Error):
            shutil.copytree(WEB / "dist", target)
            if (target / "index.html").is_file() and any((target / "assets").glob("*.js")):
                return target
        time.sleep(1.0)
    raise RuntimeError("web/dist could not be copied (is a build running?): run `npm --prefix web run build`")


def _agent_reply(body: dict[str, Any]) -> Reply:
    """The agent's rounds: first it asks the person (``ask_agent``: which city, Paris, Rome
    or Oslo), then, with the answer among the tool results, it answers naming it."""
    results = [str(m.get("content", "")) for m in body.get("messages") or [] if m.get("role") == "tool"]
    if not results:
        args = {"question": "Which city should I look at?", "options": ["Paris", "Rome", "Oslo"],
                "reason": "missing_input"}
        return reply(tool_delta(0, id="call_ask", name="ask_agent", arguments=json.dumps(args)),
                     usage(30, 10), finish("tool_calls"))
    city = "Rome" if "Rome" in results[-1] else "Paris" if "Paris" in results[-1] else "?"
    return text_reply(f"The weather in {city} is sunny.", chunk_size=6, usage=(40, 8))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class CanvasServer:
    """A running ``flowloom serve``: its URL, an admin key, the scripted model, its log."""

    url: str
    key: str
    model: ScriptedOpenAIServer
    env: dict[str, str]
    log: Path


@contextlib.contextmanager
def canvas_server(home: Path, *, log: Path | None = None, startup_s: float = 60.0,
                  responder: Callable[[dict[str, Any]], Reply] = e2e_responder,
                  extra_env: dict[str, str] | None = None) -> Iterator[CanvasServer]:
    """Start the scripted model and ``flowloom serve`` over ``home``; stop both after.

    ``responder`` answers the scripted model's requests (default :func:`e2e_responder`);
    ``extra_env`` is added to the server's environment.

    The server serves a copy of ``web/dist`` made under ``home``, so a rebuild of the
    checkout's ``web/dist`` during the run (vite empties it first) cannot pull the page
    away from the browser.

    Raises:
        RuntimeError: the server did not answer ``/health`` within ``startup_s`` (its
        log is in the message), or the key could not be created.
    """
    home.mkdir(parents=True, exist_ok=True)
    log = log or home / "serve.log"
    dist = _copy_dist(home / "web-dist")
    model = ScriptedOpenAIServer(responder=responder).start()
    port = _free_port()
    env = {**os.environ, "FLOWLOOM_HOME": str(home), "FLOWLOOM_LLM_BASE_URL_OVERRIDE": model.base_url,
           "FLOWLOOM_LLM_API_KEY": "sk-scripted-e2e", "FLOWLOOM_WEB_DIST": str(dist),
           "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    for name in ("FLOWLOOM_DATABASE_URL", "FLOWLOOM_REDIS_URL", "FLOWLOOM_LLM_MODEL_OVERRIDE"):
        env.pop(name, None)
    url = f"http://127.0.0.1:{port}"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "api.cli", "serve", "--port", str(port), "--no-login-url",
                                 "--heartbeat", "1"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + startup_s
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"flowloom serve did not start:\n{log.read_text(errors='replace')}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/health", timeout=1).status_code == 200:
                        break
                time.sleep(0.2)
            made = subprocess.run([sys.executable, "-m", "api.cli", "keys", "create", "--admin", "--name", "e2e"],
                                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
            key = made.stdout.strip().splitlines()[-1] if made.returncode == 0 and made.stdout.strip() else ""
            if not key.startswith("fl_"):
                raise RuntimeError(f"flowloom keys create failed ({made.returncode}): {made.stderr}")
            yield CanvasServer(url=url, key=key, model=model, env=env, log=log)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            model.stop()


@dataclass
class BrowserRun:
    """One ``node --test`` run of some ``web/e2e/`` files: exit code, TAP output, counts."""

    returncode: int
    output: str
    passed: int
    failed: int

    def summary(self) -> str:
        """The ``ok``/``not ok`` lines and the pass/fail counts of the output."""
        return "\n".join(line for line in self.output.splitlines()
                         if re.match(r"^(not )?ok \d|^# (pass|fail)", line))


def run_browser_files(server: CanvasServer, files: list[str], shots: Path, *, timeout_s: float = 300.0,
                      env: dict[str, str] | None = None) -> BrowserRun:
    """Run the named ``web/e2e/*.test.mjs`` files against ``server`` in headless Chromium.

    Screenshots go to ``shots`` (``E2E_SHOTS``); the whole output is also written to
    ``shots/../e2e-output.txt`` so a failure can be read after the test.

    Raises:
        subprocess.TimeoutExpired: the files did not finish within ``timeout_s``.
    """
    run_env = {**os.environ, "BASE_URL": server.url, "FLOWLOOM_KEY": server.key, "E2E_SHOTS": str(shots),
               "E2E_FILES": ",".join(files), **(env or {})}
    done = subprocess.run(["node", "e2e/run.mjs", "--test-reporter=tap"], cwd=WEB, env=run_env,
                          capture_output=True, text=True, timeout=timeout_s)
    output = done.stdout + done.stderr
    shots.parent.mkdir(parents=True, exist_ok=True)
    (shots.parent / "e2e-output.txt").write_text(output, encoding="utf-8")
    passed = re.search(r"^# pass (\d+)", output, re.M)
    failed = re.search(r"^# fail (\d+)", output, re.M)
    return BrowserRun(returncode=done.returncode, output=output, passed=int(passed.group(1)) if passed else 0,
                      failed=int(failed.group(1)) if failed else -1)
