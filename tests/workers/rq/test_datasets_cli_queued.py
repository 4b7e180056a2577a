"""``flowloom datasets add`` with ``FLOWLOOM_REDIS_URL``: the documents are queued for
``flowloom worker`` processes (the command returns at once and says so); ``--wait``
follows them until the workers have ingested them."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest

from tests.support.knowledge_files import EMBEDDING_MODEL, corpus, knowledge_models

from .conftest import FLOWLOOM, ROOT, Deployment

KEY_ENV = "FLOWLOOM_QUEUED_CLI_EMBED_KEY"


def cli(deployment: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FLOWLOOM, *args], env=deployment.env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def documents(deployment: Deployment, dataset: str) -> dict[str, Any]:
    shown = cli(deployment, "datasets", "show", dataset, "--json")
    assert shown.returncode == 0, shown.stderr
    return {d["source_name"]: d for d in json.loads(shown.stdout)["documents"]}


@pytest.mark.slow
def test_add_queues_for_the_workers_and_wait_follows_them(deployment, openai_server, tmp_path):
    models = knowledge_models(tmp_path / "models.toml", openai_server.base_url, KEY_ENV)
    deployment.env.update(FLOWLOOM_MODELS=str(models), **{KEY_ENV: "sk-scripted"})
    created = cli(deployment, "datasets", "create", "Notes", "--embedding-model", EMBEDDING_MODEL)
    assert created.returncode == 0, created.stderr
    dataset = created.stdout.strip()
    (tmp_path / "rockets.txt").write_bytes(corpus()["rockets.txt"])
    (tmp_path / "tea.md").write_bytes(corpus()["tea.md"])

    queued = cli(deployment, "datasets", "add", dataset, str(tmp_path / "rockets.txt"))  # no worker yet
    assert queued.returncode == 0, queued.stderr
    assert "rockets.txt" in queued.stderr and "flowloom worker" in queued.stderr
    assert documents(deployment, dataset)["rockets.txt"]["status"] == "queued"

    deployment.start_worker("w1")
    deployment.wait_for_workers("w1")
    waited = cli(deployment, "datasets", "add", dataset, str(tmp_path / "tea.md"), "--wait")
    assert waited.returncode == 0, waited.stderr
    assert documents(deployment, dataset)["tea.md"]["status"] == "ready"
    deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
    while (first := documents(deployment, dataset)["rockets.txt"])["status"] != "ready":
        assert time.monotonic() < deadline, first
        time.sleep(0.2)
    found = cli(deployment, "datasets", "search", dataset, "rocket kerosene", "--mode", "semantic", "--json")
    assert json.loads(found.stdout)["hits"][0]["source_name"] == "rockets.txt"
