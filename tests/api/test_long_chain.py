"""A workflow of the maximum size (10,000 nodes by default) runs through the API: a chain
of template nodes, each printing its predecessor's output, posted as a document and
answered blocking with the finished run and every node run. Not timed (the speed is
``bench/api_chain.py``'s): this holds that such a run succeeds with the right output."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from engine.settings import Settings

from .conftest import open_api


def template_chain(n: int) -> dict[str, Any]:
    """``start -> t1 -> ... -> t{n-2} -> say``: n nodes."""
    nodes: list[dict[str, Any]] = [{"id": "start", "type": "start"}]
    previous = "inputs.name"
    for i in range(1, n - 1):
        nodes.append({"id": f"t{i}", "type": "template", "config": {"template": "{{ " + previous + " }}"}})
        previous = f"t{i}.output"
    nodes.append({"id": "say", "type": "answer", "config": {"text": "<{{ " + previous + " }}>"}})
    edges = [{"id": f"e{i}", "source": a["id"], "target": b["id"]} for i, (a, b) in enumerate(pairwise(nodes))]
    return {"id": "chain", "name": "chain", "inputs": [{"name": "name", "type": "string", "required": True}],
            "nodes": nodes, "edges": edges}


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_chain_of_the_maximum_node_count_runs_through_the_api(tmp_path):
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'flowloom.db'}")
    n = settings.max_nodes
    async with open_api(settings) as api:
        response = await api.client.post("/v1/runs", json={"workflow": template_chain(n), "inputs": {"name": "Ada"}},
                                         headers=api.auth(), timeout=600)
        assert response.status_code == 200, response.text[:500]
        run = response.json()
        assert run["status"] == "succeeded" and run["answer"] == "<Ada>", run.get("error")
        assert len(run["node_runs"]) == n
        assert [r["node_id"] for r in run["node_runs"][:3]] == ["start", "t1", "t2"]
        assert run["node_runs"][-1]["node_id"] == "say"
        assert {r["status"] for r in run["node_runs"]} == {"succeeded"}
        assert all(r["outputs"] == {"output": "Ada"} for r in run["node_runs"][1:-1])
        stored = (await api.client.get(f"/v1/runs/{run['run_id']}", headers=api.auth())).json()
        assert stored["answer"] == "<Ada>" and len(stored["node_runs"]) == n
        events = (await api.client.get(f"/v1/runs/{run['run_id']}/events", headers=api.auth())).text
        assert events.count("event: node_finished") == n and "event: run_finished" in events
