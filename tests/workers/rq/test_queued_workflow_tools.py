"""A queued agent run on a real ``flowloom worker`` finds its workflow tool among the
tenant's saved and published workflows (the worker's composition is the server's, not the
command line's workflow files)."""

from __future__ import annotations

from redis import Redis
from rq import Worker

from tests.api.test_workflow_tools import asker, call, greeter, tool_results
from tests.support.openai_server import Finish, Reply, Text, Usage


async def test_a_worker_runs_the_published_workflow_a_tool_names(deployment, api, openai_server):
    deployment.env.update(
        FLOWLOOM_LLM_BASE_URL=openai_server.base_url,
        FLOWLOOM_LLM_API_KEY="test",
        FLOWLOOM_LLM_MODEL="scripted-upstream",
    )
    openai_server.script(call("greeter"), Reply([Text("Greeted."), Finish("stop"), Usage(40, 3)]))
    deployment.start_worker("w1")
    for doc in (greeter("Hello"), asker({"workflow": "greeter", "risk": "read"})):
        assert (await api.client.post("/v1/workflows", json=doc, headers=api.auth)).status_code == 201
        published = await api.client.post(f"/v1/workflows/{doc['id']}/publish", json={}, headers=api.auth)
        assert published.status_code == 201, published.text
    deployment.wait_for_workers("w1")

    accepted = await api.client.post(
        "/v1/workflows/asker/runs",
        json={"inputs": {}, "response_mode": "async"},
        headers={**api.auth, "X-Flowloom-Execution": "queued"},
    )

    assert accepted.status_code == 202, accepted.text
    run_id = accepted.json()["run_id"]
    status = await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=60)
    state = await api.service.state("default", run_id)
    assert status == "succeeded", (state.error, deployment.log("w1")[-3000:])
    assert state.answer == "Greeted."
    assert "Hello, Ada!" in tool_results(openai_server.bodies[-1])["call_0"]
    connection = Redis.from_url(deployment.redis_url)
    try:
        (worker,) = Worker.all(connection=connection)
        assert (worker.name, worker.successful_job_count) == ("w1", 1), "the worker executed the run"
    finally:
        connection.close()
