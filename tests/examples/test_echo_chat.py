"""examples/echo_chat.json: a chat flow without a model - through the real CLI (two turns
of one chat) and, as the README shows it, through the official openai SDK against a fresh
``flowloom serve`` (which saved and published the example) with a key made by the CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai

ROOT = Path(__file__).resolve().parents[2]
FLOWLOOM = [sys.executable, "-m", "api.cli"]


def test_echo_chat_answers_each_turn_with_the_earlier_ones(tmp_path):
    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "home")}

    def turn(message: str) -> str:
        done = subprocess.run([*FLOWLOOM, "run", "examples/echo_chat.json", "--chat-id", "c1", "--message", message],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert turn("My name is Ada") == "You said: My name is Ada"
    assert turn("What is my name?") == "You said: What is my name? (earlier in this chat: My name is Ada)"


def test_echo_chat_answers_the_openai_sdk_on_a_fresh_serve(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "FLOWLOOM_REDIS_URL"}
    env["FLOWLOOM_HOME"] = str(tmp_path / "home")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([*FLOWLOOM, "serve", "--port", str(port), "--no-login-url"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
        while True:
            assert server.poll() is None and time.monotonic() < deadline, "flowloom serve did not start"
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        created = subprocess.run([*FLOWLOOM, "keys", "create", "--admin", "--name", "admin"], capture_output=True,
                                 text=True, env=env, cwd=ROOT, timeout=60)
        assert created.returncode == 0, created.stderr
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=created.stdout.strip(), max_retries=0)
        assert "echo_chat" in [m.id for m in client.models.list().data]
        reply = client.chat.completions.create(model="echo_chat", messages=[{"role": "user", "content": "My name is Ada"}],
                                               extra_body={"chat_id": "ada-1"})
        assert reply.choices[0].message.content == "You said: My name is Ada"
        assert reply.model_extra["flowloom"]["chat_id"] == "ada-1"
        streamed = "".join(chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(
            model="echo_chat", stream=True, messages=[{"role": "user", "content": "What is my name?"}],
            extra_body={"chat_id": "ada-1"}) if chunk.choices)
        assert streamed == "You said: What is my name? (earlier in this chat: My name is Ada)"
    finally:
        server.terminate()
        server.wait(timeout=30)
