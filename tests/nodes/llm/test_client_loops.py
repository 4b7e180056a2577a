"""The model clients (openai SDK over real HTTP to the scripted server) are closed on the
event loop that opened them, never on another one.

A client's connections belong to the loop that opened them. Closed on another loop (the
SDK's own client does that when it is garbage-collected while another loop runs in the
collecting thread) the close fails with "Event loop is closed", reported by that loop as
"Task exception was never retrieved" in the middle of its own work: a server's, or the
next test's.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any

from api.composition import open_service
from engine.settings import Settings
from tests.support.openai_server import TEST_API_KEY, TEST_KEY_ENV, registry_for, text_reply


def _hello(client: Any) -> Any:
    return client.chat.completions.create(model="upstream-tools", messages=[{"role": "user", "content": "hi"}])


def _errors_of_a_loop_collecting_garbage() -> list[str]:
    """What a loop running in another thread reports while the garbage of ended loops is
    collected there (its exception handler: the "never retrieved" errors of its tasks)."""
    seen: list[str] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda _loop, context: seen.append(f"{context.get('message')}: {context.get('exception')!r}"))
        for _ in range(2):  # the first collection makes the tasks, the second drops them
            gc.collect()
            await asyncio.sleep(0.05)

    thread = threading.Thread(target=lambda: asyncio.run(main()))
    thread.start()
    thread.join()
    return seen


def test_a_client_whose_loop_ended_unclosed_is_not_closed_on_another_loop(openai_server, monkeypatch):
    monkeypatch.setenv(TEST_KEY_ENV, TEST_API_KEY)
    openai_server.script(text_reply("hello"))

    async def call_and_leave_open() -> None:
        registry = registry_for(openai_server)
        await _hello(registry.client_for(registry.get("tools-model")))
        # the registry and its client (one open connection) become garbage here, unclosed

    asyncio.run(call_and_leave_open())
    assert _errors_of_a_loop_collecting_garbage() == []


def test_the_run_service_closes_the_model_clients_of_its_loop(openai_server, tmp_path):
    openai_server.script(text_reply("hello"))
    settings = Settings(home=tmp_path, llm_base_url_override=openai_server.base_url)
    opened: list[Any] = []

    async def run_a_call() -> None:
        async with open_service(settings) as service:
            client = service.models.client_for(service.models.get("default"))
            await _hello(client)
            opened.append(client)
            assert not client.is_closed()
        assert client.is_closed(), "closed on exit, on the loop that opened it"
        assert asyncio.get_running_loop() not in service.models._clients

    asyncio.run(run_a_call())
    assert opened and _errors_of_a_loop_collecting_garbage() == []
