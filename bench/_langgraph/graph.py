"""The LangGraph side of ``bench/api.py``: three trivial nodes, ``start -> template ->
answer``, the same shape as Flowloom's plumbing workflow (``langgraph dev`` serves it)."""

from __future__ import annotations

from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    """The run's input ``name`` and what the nodes write."""

    name: str
    greeting: str
    answer: str


async def start(state: State) -> dict[str, str]:
    """Pass the input through (Flowloom's start node checks and exposes the inputs)."""
    return {"name": state.get("name", "")}


async def template(state: State) -> dict[str, str]:
    """Render the greeting."""
    return {"greeting": f"Hello, {state.get('name', '')}!"}


async def answer(state: State) -> dict[str, str]:
    """The run's answer."""
    return {"answer": state.get("greeting", "")}


builder = StateGraph(State)
builder.add_node("start", start)
builder.add_node("template", template)
builder.add_node("answer", answer)
builder.add_edge(START, "start")
builder.add_edge("start", "template")
builder.add_edge("template", "answer")
builder.add_edge("answer", END)
graph = builder.compile()
