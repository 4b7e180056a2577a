"""The run service's front door through the API: a new door is one launch and one follow,
and a resume whose answer does not fit its question is refused before it launches."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from api.auth import Caller, Service
from schemas.launch import StartRun

from .conftest import hello_workflow, order_workflow


def _webhook_router() -> APIRouter:
    """A webhook-style door: its body is the run's inputs; it answers with the run's events
    and result. Nothing but the typed dependency and the two calls."""
    router = APIRouter()

    @router.post("/test-hooks/{workflow_name}")
    async def hook(workflow_name: str, payload: Annotated[dict[str, Any], Body()], *, caller: Caller,
                   service: Service) -> dict[str, Any]:
        ticket = await service.launch(caller.tenant_id, StartRun(hello_workflow(), payload))
        events = [event.type async for event in service.follow(caller.tenant_id, ticket.run_id)]
        state = await service.state(caller.tenant_id, ticket.run_id)
        return {"run_id": ticket.run_id, "events": events, "status": state.status.value, "answer": state.answer}

    return router


async def test_a_new_door_is_one_launch_and_one_follow(api):
    api.app.include_router(_webhook_router())
    answer = await api.client.post("/test-hooks/hello", json={"name": "Ada"}, headers=api.auth())
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "succeeded" and body["answer"] == "Hello, Ada! Welcome to Flowloom."
    assert body["events"][0] == "run_started" and body["events"][-1] == "run_finished"
    assert "node_delta" in body["events"], "a follower in the launching process gets the text deltas"
    stored = (await api.client.get(f"/v1/runs/{body['run_id']}", headers=api.auth())).json()
    assert stored["status"] == "succeeded" and stored["workflow_id"] == hello_workflow()["id"]
    other = await api.client.post("/test-hooks/hello", json={"nme": "typo"}, headers=api.auth())
    assert other.status_code == 422 and other.json()["error"]["type"] == "invalid_inputs", other.text


async def test_a_resume_with_an_answer_that_fits_no_option_is_422_naming_the_options(api):
    paused = (await api.client.post("/v1/runs", json={"workflow": order_workflow(), "inputs": {"item": "tea"}},
                                    headers=api.auth())).json()
    run_id = paused["run_id"]
    events_before = await api.service.stores.events.read("default", run_id)
    refused = await api.client.post(f"/v1/runs/{run_id}/resume", json={"answer": "maybe"}, headers=api.auth())
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["type"] == "invalid_answer" and "'maybe' is not one of" in error["message"]
    assert "confirm" in error["message"] and "change" in error["message"] and "cancel" in error["message"]
    assert error["problems"] and "node 'confirm'" in error["problems"][0]
    summary = await api.service.get("default", run_id)
    assert summary.status.value == "paused" and [i.model_dump(mode="json") for i in summary.pending_interrupts] == paused["pending_interrupts"]
    assert await api.service.stores.events.read("default", run_id) == events_before, "nothing ran, nothing logged"

    accepted = await api.client.post(f"/v1/runs/{run_id}/resume", json={"answer": "change"}, headers=api.auth())
    assert accepted.status_code == 202, accepted.text
    await _wait_paused_at(api, run_id, "details")
    interrupt = (await api.service.get("default", run_id)).pending_interrupts[0].id
    wrong_form = await api.client.post(f"/v1/runs/{run_id}/resume", headers=api.auth(),
                                       json={"answers": {interrupt: {"quantity": "lots"}}})
    assert wrong_form.status_code == 422 and "quantity" in wrong_form.json()["error"]["message"], wrong_form.text


async def _wait_paused_at(api, run_id: str, node_id: str) -> None:
    import asyncio

    for _ in range(200):
        summary = await api.service.get("default", run_id)
        if summary.status.value == "paused" and summary.pending_interrupts[0].node_id == node_id:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not pause at {node_id}")
