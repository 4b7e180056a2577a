"""The examples' stand-in model (``examples/stub_model.py``, served by ``stub_server.py``
under ``/v1``): the real openai SDK talks to it (whole and streamed answers, base64
embeddings of the registry's sizes), and with ``FLOWLOOM_LLM_BASE_URL_OVERRIDE`` pointing
at it ``examples/knowledge_qa.json`` runs with no provider and no key, through query
extension, retrieval and a chat answer citing the handbook."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from typer.testing import CliRunner

from api.cli import app
from engine.settings import get_settings
from nodes.llm.model_registry import get_registry

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def stub() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "examples" / "stub_server.py")], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("ready http://127.0.0.1:"), line
        yield line.removeprefix("ready ") + "/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_openai_sdk_gets_whole_and_streamed_answers_and_embeddings(stub):
    client = openai.OpenAI(base_url=stub, api_key="none", max_retries=0)
    whole = client.chat.completions.create(model="stub-chat", messages=[{"role": "user", "content": "hi there"}])
    assert whole.choices[0].message.content == "You said: hi there" and whole.usage.total_tokens > 0
    asked = [{"role": "system", "content": 'Reply with only a JSON array of strings, e.g. ["a"].'},
             {"role": "user", "content": "Question:\nWhen is payday?"}]
    streamed = client.chat.completions.create(model="stub-chat", messages=asked, stream=True,
                                              stream_options={"include_usage": True})
    chunks = list(streamed)
    assert json.loads("".join(c.choices[0].delta.content or "" for c in chunks if c.choices)) == ["When is payday?"]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    vectors = client.embeddings.create(model="bge-m3", input=["paid holiday", "holiday pay"]).data
    assert [len(v.embedding) for v in vectors] == [1024, 1024]
    near = sum(a * b for a, b in zip(vectors[0].embedding, vectors[1].embedding, strict=True))
    far = client.embeddings.create(model="bge-m3", input=["parking rules"]).data[0].embedding
    assert near > sum(a * b for a, b in zip(vectors[0].embedding, far, strict=True)), "texts sharing words are nearer"


@pytest.fixture
def handbook(stub, monkeypatch):
    for name in ("FLOWLOOM_MODELS", "FLOWLOOM_LLM_API_KEY", "OPENAI_API_KEY", "FLOWLOOM_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FLOWLOOM_LLM_BASE_URL_OVERRIDE", stub)
    get_settings.cache_clear()
    get_registry.cache_clear()  # the registry reads the override when it loads
    try:
        for args in (["datasets", "create", "Handbook", "--id", "handbook", "--embedding-model",
                      "text-embedding-3-small"],
                     ["datasets", "add", "handbook", str(ROOT / "examples" / "knowledge" / "handbook.md"), "--wait"]):
            made = runner.invoke(app, args)
            assert made.exit_code == 0, made.output
        yield
    finally:
        get_registry.cache_clear()


def test_knowledge_qa_runs_on_the_stand_in_model_with_no_key(handbook):
    result = runner.invoke(app, ["run", str(ROOT / "examples" / "knowledge_qa.json"),
                                 "-i", "query=How fast are travel expenses paid back?", "--json"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    outputs = events[-1]["outputs"]
    assert outputs["answer"] == "Travel expenses are paid back within 14 days of an approved claim. [1]"
    assert outputs["citations"][0]["source_name"] == "handbook.md"
    rewrite = next(e for e in events if e["type"] == "node_finished" and e["node_id"] == "rewrite")
    assert rewrite["outputs"]["queries"][0] == "How fast are travel expenses paid back?"
    searched = runner.invoke(app, ["datasets", "search", "handbook", "how many days of paid holiday",
                                   "--mode", "semantic", "--top-k", "1"])
    assert searched.exit_code == 0 and "28 days of paid holiday" in searched.stdout, searched.output
