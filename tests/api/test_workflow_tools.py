"""Workflow tools see the tenant's saved workflows, through the API on SQLite and PostgreSQL:
a tool call of workflow ``asker`` runs the published version of workflow ``greeter`` (not
its draft), or the version it pins; another tenant's run of the same document does not
find ``greeter`` (its node fails naming the tool; ``greeter`` itself is 404 for that
tenant); a saved workflow that was never published is refused as a tool, saying so."""

from __future__ import annotations

import json
from typing import Any

from tests.support.openai_server import Finish, Reply, Text, ToolDelta, Usage


def greeter(word: str) -> dict[str, Any]:
    """Workflow ``greeter``: answers ``<word>, <person>!`` (no model call)."""
    return {
        "id": "greeter",
        "name": "Greeter",
        "description": "greets a person",
        "inputs": [{"name": "person", "type": "string", "required": True, "description": "who"}],
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "say", "type": "answer", "config": {"text": f"{word}, {{{{ inputs.person }}}}!"}},
        ],
        "edges": [{"id": "e1", "source": "start", "target": "say"}],
    }


def asker(*tools: dict[str, Any], workflow_id: str = "asker") -> dict[str, Any]:
    """A workflow whose tool call node ``agent`` offers ``tools`` (``workflow_tools`` entries)."""
    return {
        "id": workflow_id,
        "name": "Asker",
        "nodes": [
            {"id": "start", "type": "start"},
            {
                "id": "agent",
                "type": "tool_call",
                "config": {
                    "model": "default",
                    "stream": False,
                    "user_prompt": "greet Ada",
                    "workflow_tools": list(tools),
                },
            },
            {"id": "say", "type": "answer", "config": {"text": "{{ agent.answer }}"}},
        ],
        "edges": [
            {"id": "e1", "source": "start", "target": "agent"},
            {"id": "e2", "source": "agent", "target": "say"},
        ],
    }


def call(*names: str) -> Reply:
    """A model reply calling each tool of ``names`` with ``{"person": "Ada"}``."""
    steps: list[Any] = [
        ToolDelta(i, f"call_{i}", name, json.dumps({"person": "Ada"})) for i, name in enumerate(names)
    ]
    return Reply([*steps, Finish("tool_calls"), Usage(20, 5)])


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    """What the model was sent as tool results: call id -> content."""
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


async def save(api, doc: dict[str, Any], *, publish: bool = True, key: str | None = None) -> None:
    created = await api.client.post("/v1/workflows", json=doc, headers=api.auth(key))
    assert created.status_code == 201, created.text
    if publish:
        published = await api.client.post(
            f"/v1/workflows/{doc['id']}/publish", json={}, headers=api.auth(key)
        )
        assert published.status_code == 201, published.text


async def edit_draft(api, doc: dict[str, Any]) -> None:
    current = (await api.client.get(f"/v1/workflows/{doc['id']}", headers=api.auth())).json()
    updated = await api.client.put(
        f"/v1/workflows/{doc['id']}",
        json={"workflow": doc, "draft_version": current["draft_version"]},
        headers=api.auth(),
    )
    assert updated.status_code == 200, updated.text


async def run(api, workflow_id: str, key: str | None = None) -> dict[str, Any]:
    response = await api.client.post(
        f"/v1/workflows/{workflow_id}/runs", json={"inputs": {}}, headers=api.auth(key)
    )
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_published_workflow_is_a_tool_of_another_workflow_of_its_tenant(
    api, models_file, openai_server
):
    await save(api, greeter("Hello"))  # version 1
    await edit_draft(api, greeter("Hi"))
    assert (await api.client.post("/v1/workflows/greeter/publish", json={}, headers=api.auth())).json()[
        "version"
    ] == 2
    await edit_draft(api, greeter("Unpublished draft"))  # never what a tool runs
    await save(
        api,
        asker(
            {"workflow": "greeter", "risk": "read"},
            {"workflow": "greeter", "version": 1, "name": "greeter_v1", "risk": "read"},
        ),
    )
    openai_server.script(
        call("greeter", "greeter_v1"), Reply([Text("Greeted."), Finish("stop"), Usage(40, 3)])
    )

    done = await run(api, "asker")

    assert done["status"] == "succeeded", done
    assert done["answer"] == "Greeted."
    first, second = openai_server.bodies
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert set(offered) == {"greeter", "greeter_v1"}
    assert offered["greeter"]["description"] == "greets a person"
    assert offered["greeter"]["parameters"]["required"] == ["person"]
    results = tool_results(second)  # each fenced as data (the kernel's contract), the answer inside
    assert "Hi, Ada!" in results["call_0"] and "Hello" not in results["call_0"], results
    assert "Hello, Ada!" in results["call_1"], results
    state = await api.service.state("default", done["run_id"])
    runs = state.node_runs["agent"].data["workflow_runs"]
    assert {c: (r["workflow"], r["status"], r.get("version")) for c, r in runs.items()} == {
        "call_0": ("greeter", "succeeded", None),
        "call_1": ("greeter", "succeeded", 1),
    }


async def test_another_tenants_workflow_is_not_found_as_a_tool(api, models_file, openai_server):
    await save(api, greeter("Hello"))
    await save(api, asker({"workflow": "greeter", "risk": "read"}), key=api.other_key)

    failed = await run(api, "asker", key=api.other_key)

    assert failed["status"] == "failed", failed
    error = failed["error"]
    assert (error["node_id"], error["reason"]) == ("agent", "workflow_tool_unavailable"), error
    assert "tool 'greeter'" in error["message"] and "no workflow 'greeter'" in error["message"], error
    assert openai_server.bodies == [], "the model is not called with a tool that cannot run"
    missing = await api.client.get("/v1/workflows/greeter", headers=api.auth(api.other_key))
    assert missing.status_code == 404
    # the same document in the tenant that published greeter finds it
    await save(api, asker({"workflow": "greeter", "risk": "read"}))
    openai_server.script(call("greeter"), Reply([Text("ok"), Finish("stop"), Usage(40, 3)]))
    assert (await run(api, "asker"))["status"] == "succeeded"
    assert "Hello, Ada!" in tool_results(openai_server.bodies[-1])["call_0"]


async def test_a_saved_workflow_never_published_or_a_missing_version_is_refused(
    api, models_file, openai_server
):
    await save(api, greeter("Hello"), publish=False)
    await save(api, asker({"workflow": "greeter", "risk": "read"}))

    unpublished = await run(api, "asker")

    assert unpublished["status"] == "failed", unpublished
    assert unpublished["error"]["reason"] == "workflow_tool_unavailable"
    assert "has no published version: publish it to use it as a tool" in unpublished["error"]["message"]
    await api.client.post("/v1/workflows/greeter/publish", json={}, headers=api.auth())
    await save(api, asker({"workflow": "greeter", "version": 7, "risk": "read"}, workflow_id="pinned"))
    pinned = await run(api, "pinned")
    assert pinned["status"] == "failed" and "has no version 7" in pinned["error"]["message"], pinned
    assert openai_server.bodies == []


async def test_the_command_line_reads_workflow_files_and_the_server_never_does(
    tmp_path, models_file, openai_server
):
    from api.composition import open_service
    from engine.settings import Settings

    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "greeter.json").write_text(json.dumps(greeter("From a file")))
    settings = Settings(home=tmp_path / "home", models=models_file, workflow_path=[folder])
    openai_server.script(call("greeter"), Reply([Text("ok"), Finish("stop"), Usage(40, 3)]))

    async with open_service(settings, workflow_files=True) as service:  # flowloom run's
        ran = [e async for e in service.start(asker({"workflow": "greeter", "risk": "read"}), {})]
    assert ran[-1].type == "run_finished", ran[-1]
    assert "From a file, Ada!" in tool_results(openai_server.bodies[-1])["call_0"]

    async with open_service(settings) as service:  # the server's and the workers'
        refused = [e async for e in service.start(asker({"workflow": "greeter", "risk": "read"}), {})]
    assert refused[-1].type == "run_failed" and refused[-1].error.reason == "workflow_tool_unavailable"
    assert len(openai_server.bodies) == 2, "the server's run never called the model"
