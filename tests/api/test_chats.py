"""Conversations through the API on SQLite and PostgreSQL: two turns of a chat with the
scripted model then list, get, page, rename and delete; messages with their parts (text,
an interrupt of a paused run that the chat's next message answers); a failed turn with
one failed assistant message keeping the partial text; and a key of another tenant
finding nothing of this tenant's chats (404 on every chat endpoint, absent from lists).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.support.chat_flow import chat_flow
from tests.support.openai_server import Finish, Reply, Text, ToolDelta, Usage, error_after_tokens, text_reply

from .conftest import hello_workflow, http_chain, order_workflow


async def _turn(api, chat_id: str, message: str, workflow: dict[str, Any] | None = None,
                inputs: dict[str, Any] | None = None, key: str | None = None) -> dict[str, Any]:
    body = {"workflow": workflow or chat_flow(history=10), "inputs": inputs or {}, "chat_id": chat_id,
            "message": message}
    response = await api.client.post("/v1/runs", json=body, headers=api.auth(key))
    assert response.status_code == 200, response.text
    return response.json()


async def test_two_turns_then_list_get_page_rename_and_delete(api, models_file, openai_server):
    openai_server.script(text_reply("Hello Ada!"), text_reply("Your name is Ada."))
    first = await _turn(api, "c1", "My name is Ada")
    second = await _turn(api, "c1", "What is my name?")
    assert (first["status"], second["status"]) == ("succeeded", "succeeded")
    turns = [(m["role"], m["content"]) for m in openai_server.bodies[1]["messages"] if m["role"] != "system"]
    assert turns == [("user", "My name is Ada"), ("assistant", "Hello Ada!"), ("user", "What is my name?")]

    listed = (await api.client.get("/v1/chats", headers=api.auth())).json()
    assert listed["next_before"] is None
    (chat,) = listed["chats"]
    assert (chat["id"], chat["title"], chat["title_set"]) == ("c1", "My name is Ada", False)
    assert (chat["preview"], chat["preview_role"]) == ("Your name is Ada.", "assistant")
    assert chat["updated_at"] >= chat["created_at"] > 0

    detail = (await api.client.get("/v1/chats/c1", headers=api.auth())).json()
    assert [(m["role"], m["status"], m["text"]) for m in detail["messages"]] == [
        ("user", "done", "My name is Ada"), ("assistant", "done", "Hello Ada!"),
        ("user", "done", "What is my name?"), ("assistant", "done", "Your name is Ada.")]
    assert detail["messages"][1]["run_id"] == first["run_id"]
    assert detail["messages"][3]["parts"] == [{"type": "text", "text": "Your name is Ada.", "data": {}}]
    last_two = (await api.client.get("/v1/chats/c1/messages", params={"limit": 2}, headers=api.auth())).json()
    assert [m["text"] for m in last_two["messages"]] == ["What is my name?", "Your name is Ada."]

    renamed = await api.client.patch("/v1/chats/c1", json={"title": "  Ada's chat "}, headers=api.auth())
    assert renamed.status_code == 200 and renamed.json()["title"] == "Ada's chat" and renamed.json()["title_set"]
    assert (await api.client.get("/v1/chats", headers=api.auth())).json()["chats"][0]["title"] == "Ada's chat"
    reset = await api.client.patch("/v1/chats/c1", json={"title": None}, headers=api.auth())
    assert (reset.json()["title"], reset.json()["title_set"]) == ("My name is Ada", False)
    invalid = await api.client.patch("/v1/chats/c1", json={"title": "x" * 201}, headers=api.auth())
    assert invalid.status_code == 422

    deleted = await api.client.delete("/v1/chats/c1", headers=api.auth())
    assert deleted.status_code == 204, deleted.text
    for path in ("/v1/chats/c1", "/v1/chats/c1/messages"):
        gone = await api.client.get(path, headers=api.auth())
        assert gone.status_code == 404 and gone.json()["error"]["type"] == "not_found"
    assert (await api.client.get("/v1/chats", headers=api.auth())).json()["chats"] == []
    assert (await api.client.get(f"/v1/runs/{first['run_id']}", headers=api.auth())).status_code == 200


TOOL_FLOW: dict[str, Any] = {
    "id": "tool_chat", "name": "Tool chat", "inputs": [{"name": "query", "type": "string"}],
    "nodes": [{"id": "start", "type": "start"},
              {"id": "agent", "type": "tool_call", "config": {
                  "model": "default", "history": 10, "stream": False, "user_prompt": "{{ inputs.query }}",
                  "tools": [{"node": "to_f", "name": "to_fahrenheit", "description": "Celsius to Fahrenheit",
                             "parameters": [{"name": "celsius", "type": "number", "required": True}],
                             "result": {"ref": "to_f.output"}}]}},
              {"id": "to_f", "type": "template", "parent": "agent",
               "config": {"template": "{{ (agent.args.celsius * 9 / 5 + 32) | round(1) }} F"}},
              {"id": "say", "type": "answer", "config": {"text": "{{ agent.answer }}"}}],
    "edges": [{"id": "e1", "source": "start", "target": "agent"}, {"id": "e2", "source": "agent", "target": "say"}],
}


async def test_an_agent_turn_has_tool_call_and_tool_result_parts(api, models_file, openai_server):
    openai_server.script(
        Reply([ToolDelta(0, "call_f", "to_fahrenheit", '{"celsius": 18}'), Finish("tool_calls"), Usage(50, 9)]),
        Reply([Text("18 C is 64.4 F."), Finish("stop"), Usage(80, 7)]))
    done = await _turn(api, "tools", "18 C in F?", TOOL_FLOW)
    assert done["status"] == "succeeded", done
    (assistant,) = [m for m in (await api.client.get("/v1/chats/tools/messages", headers=api.auth())).json()[
        "messages"] if m["role"] == "assistant"]
    kinds = [p["type"] for p in assistant["parts"]]
    assert kinds == ["tool_call", "tool_result", "text"], (assistant, done)
    call, result, text = assistant["parts"]
    assert (call["data"]["id"], call["data"]["name"]) == ("call_f", "to_fahrenheit")
    assert "18" in str(call["data"]["arguments"])
    assert "64.4 F" in result["text"] and result["data"] == {"id": "call_f", "name": "to_fahrenheit",
                                                           "is_error": False}
    assert text["text"] == "18 C is 64.4 F." == assistant["text"]


async def test_chats_page_newest_first_and_a_long_first_message_is_cut_for_the_title(api):
    long = "Please greet " + "very " * 40 + "warmly"
    for chat_id in ("p1", "p2", "p3"):
        await _turn(api, chat_id, long if chat_id == "p1" else f"hi from {chat_id}", hello_workflow(),
                    {"name": chat_id})
    page = (await api.client.get("/v1/chats", params={"limit": 2}, headers=api.auth())).json()
    assert [c["id"] for c in page["chats"]] == ["p3", "p2"] and page["next_before"] is not None
    rest = (await api.client.get("/v1/chats", params={"limit": 2, "before": page["next_before"]},
                                 headers=api.auth())).json()
    assert [c["id"] for c in rest["chats"]] == ["p1"] and rest["next_before"] is None
    title = rest["chats"][0]["title"]
    assert title.startswith("Please greet very") and title.endswith("\u2026") and len(title) <= 80
    assert rest["chats"][0]["preview"] == "Hello, p1! Welcome to Flowloom."


async def test_a_paused_turn_has_an_interrupt_part_and_the_next_message_answers_it(api):
    paused = await _turn(api, "order", "I want tea", order_workflow(), {"item": "tea"})
    assert paused["status"] == "paused"
    chat = (await api.client.get("/v1/chats/order", headers=api.auth())).json()
    assert chat["preview"] == "Order 1 x tea?"
    user, assistant = chat["messages"]
    assert (user["role"], user["text"], assistant["status"]) == ("user", "I want tea", "paused")
    (interrupt,) = [p for p in assistant["parts"] if p["type"] == "interrupt"]
    assert interrupt["data"]["kind"] == "user_select" and interrupt["data"]["id"] == \
        paused["pending_interrupts"][0]["id"]
    assert interrupt["data"]["payload"]["description"] == "Order 1 x tea?"

    answered = await _turn(api, "order", "confirm", order_workflow(), {"item": "tea"})
    assert answered["run_id"] == paused["run_id"], "the message answers the pending question, no new run"
    assert answered["status"] == "succeeded" and answered["answer"] == "Order placed: 1 x tea."
    runs = (await api.client.get("/v1/runs", params={"chat_id": "order"}, headers=api.auth())).json()["runs"]
    assert [r["run_id"] for r in runs] == [paused["run_id"]]
    messages = (await api.client.get("/v1/chats/order/messages", headers=api.auth())).json()["messages"]
    assert [(m["role"], m["status"], m["text"]) for m in messages] == [
        ("user", "done", "I want tea"), ("assistant", "paused", ""), ("user", "done", "confirm"),
        ("assistant", "done", "Order placed: 1 x tea.")]


async def test_an_answer_given_through_resume_is_the_next_turn_of_the_chat(api):
    paused = await _turn(api, "order-2", "I want tea", order_workflow(), {"item": "tea"})
    interrupt_id = paused["pending_interrupts"][0]["id"]
    resumed = await api.client.post(f"/v1/runs/{paused['run_id']}/resume",
                                    json={"answers": {interrupt_id: "confirm"}}, headers=api.auth())
    assert resumed.status_code == 202, resumed.text
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        run = (await api.client.get(f"/v1/runs/{paused['run_id']}", headers=api.auth())).json()
        if run["status"] not in ("paused", "running", "pending"):
            break
        await asyncio.sleep(0.05)
    assert run["status"] == "succeeded", run
    messages = (await api.client.get("/v1/chats/order-2/messages", headers=api.auth())).json()["messages"]
    assert [(m["role"], m["status"], m["text"]) for m in messages] == [
        ("user", "done", "I want tea"), ("assistant", "paused", ""), ("user", "done", "confirm"),
        ("assistant", "done", "Order placed: 1 x tea.")]


async def test_deleting_a_chat_cancels_its_waiting_run_so_the_chat_id_starts_afresh(api):
    paused = await _turn(api, "gone", "I want tea", order_workflow(), {"item": "tea"})
    assert (await api.client.delete("/v1/chats/gone", headers=api.auth())).status_code == 204
    run = (await api.client.get(f"/v1/runs/{paused['run_id']}", headers=api.auth())).json()
    assert run["status"] == "cancelled"
    fresh = await _turn(api, "gone", "I want coffee", order_workflow(), {"item": "coffee"})
    assert fresh["run_id"] != paused["run_id"] and fresh["status"] == "paused"
    messages = (await api.client.get("/v1/chats/gone/messages", headers=api.auth())).json()["messages"]
    assert [m["text"] for m in messages if m["role"] == "user"] == ["I want coffee"]


async def test_a_chat_whose_run_executes_is_not_deleted(api, target):
    started = await api.client.post("/v1/runs", json={
        "workflow": http_chain(target.url, 1, path="/slow"), "chat_id": "busy", "message": "go",
        "response_mode": "async"}, headers=api.auth())
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    assert await asyncio.to_thread(target.server.slow_started.wait, 10)
    refused = await api.client.delete("/v1/chats/busy", headers=api.auth())
    assert refused.status_code == 409 and run_id in refused.json()["error"]["message"]
    assert (await api.client.post(f"/v1/runs/{run_id}/stop", headers=api.auth())).status_code == 200
    deadline = time.monotonic() + 10
    while (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()["status"] != "cancelled":
        assert time.monotonic() < deadline, "the run did not stop"
        await asyncio.sleep(0.05)
    messages = (await api.client.get("/v1/chats/busy/messages", headers=api.auth())).json()["messages"]
    assert [(m["role"], m["status"]) for m in messages] == [("user", "done"), ("assistant", "cancelled")]
    assert (await api.client.delete("/v1/chats/busy", headers=api.auth())).status_code == 204


async def test_a_failed_turn_has_one_failed_assistant_message_with_the_partial_text(api, models_file,
                                                                                     openai_server):
    openai_server.script(error_after_tokens("Ada likes", message="upstream model crashed"))
    failed = await _turn(api, "f1", "What do I like?")
    assert failed["status"] == "failed"
    messages = (await api.client.get("/v1/chats/f1/messages", headers=api.auth())).json()["messages"]
    assert [(m["role"], m["status"]) for m in messages] == [("user", "done"), ("assistant", "failed")]
    assistant = messages[1]
    assert assistant["text"] == "Ada likes" and assistant["run_id"] == failed["run_id"]
    assert [p for p in assistant["parts"] if p["data"].get("error")], "the failure is a part of the message"
    assert "Traceback" not in str(messages)
    chat = (await api.client.get("/v1/chats/f1", headers=api.auth())).json()
    assert (chat["preview"], chat["preview_role"]) == ("Ada likes", "assistant")


async def test_a_key_of_another_tenant_finds_nothing_of_this_tenants_chats(api):
    paused = await _turn(api, "mine", "I want tea", order_workflow(), {"item": "tea"})
    other = api.auth(api.other_key)
    calls = [("GET", "/v1/chats/mine", None), ("GET", "/v1/chats/mine/messages", None),
             ("PATCH", "/v1/chats/mine", {"title": "stolen"}), ("DELETE", "/v1/chats/mine", None)]
    for method, path, body in calls:
        response = await api.client.request(method, path, headers=other, json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["type"] == "not_found"
    assert (await api.client.get("/v1/chats", headers=other)).json() == {"chats": [], "next_before": None}
    # the same chat id in tenant B is B's own chat: it does not answer A's pending question
    theirs = await _turn(api, "mine", "I want coffee", order_workflow(), {"item": "coffee"}, key=api.other_key)
    assert theirs["run_id"] != paused["run_id"] and theirs["status"] == "paused"
    b_chat = (await api.client.get("/v1/chats/mine", headers=other)).json()
    assert [m["text"] for m in b_chat["messages"] if m["role"] == "user"] == ["I want coffee"]
    assert (await api.client.delete("/v1/chats/mine", headers=other)).status_code == 204
    # nothing of tenant A changed
    mine = (await api.client.get("/v1/chats/mine", headers=api.auth())).json()
    assert (mine["title"], mine["title_set"]) == ("I want tea", False)
    assert [m["text"] for m in mine["messages"] if m["role"] == "user"] == ["I want tea"]
    run = (await api.client.get(f"/v1/runs/{paused['run_id']}", headers=api.auth())).json()
    assert run["status"] == "paused"


async def test_chat_routes_need_a_key_of_the_whole_tenant(api):
    await _turn(api, "k1", "hi", hello_workflow(), {"name": "Ada"})
    scoped = (await api.client.post("/v1/keys", json={"name": "app", "app_id": "hello"},
                                    headers=api.auth())).json()["secret"]
    for method, path in (("GET", "/v1/chats"), ("GET", "/v1/chats/k1"), ("GET", "/v1/chats/k1/messages"),
                         ("PATCH", "/v1/chats/k1"), ("DELETE", "/v1/chats/k1")):
        missing = await api.client.request(method, path, json={"title": "x"})
        assert missing.status_code == 401, (method, path)
        refused = await api.client.request(method, path, headers=api.auth(scoped), json={"title": "x"})
        assert refused.status_code == 403 and refused.json()["error"]["type"] == "forbidden", (method, path)
    assert (await api.client.get("/v1/chats/k1", headers=api.auth())).json()["title"] == "hi"
