"""Small Dify DSL documents (as parsed from YAML) for the kinds the corpus does not show."""

from __future__ import annotations

from typing import Any


def node(nid: str, kind: str, x: float = 0, y: float = 0, parent: str | None = None, **data: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": nid, "type": "custom", "position": {"x": x, "y": y},
                           "data": {"type": kind, "title": nid, "desc": "", **data}}
    if parent is not None:
        out["parentId"] = parent
    return out


def edge(source: str, target: str, handle: str = "source") -> dict[str, Any]:
    return {"id": f"{source}-{handle}-{target}-target", "source": source, "sourceHandle": handle, "target": target,
            "targetHandle": "target", "type": "custom"}


def app(nodes: list[dict[str, Any]], edges: list[dict[str, Any]], *, mode: str = "workflow", name: str = "sample",
        env: list[dict[str, Any]] | None = None, conversation: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"app": {"name": name, "mode": mode, "description": "synthetic"}, "kind": "app", "version": "0.3.1",
            "dependencies": [],
            "workflow": {"environment_variables": env or [], "conversation_variables": conversation or [],
                         "graph": {"nodes": nodes, "edges": edges}}}


def model(name: str = "gpt-4o-mini", **params: Any) -> dict[str, Any]:
    return {"provider": "langgenius/openai/openai", "name": name, "mode": "chat", "completion_params": params}


def support_chat() -> dict[str, Any]:
    """Chatflow: classifier -> (extractor -> http with fail branch -> answer) | (llm with context -> answer)."""
    return app([
        node("start", "start", variables=[{"variable": "lang", "label": "Language", "type": "select",
                                           "options": ["en", "fr"], "required": False, "default": "en"}]),
        node("cls", "question-classifier", model=model(temperature=0.1), query_variable_selector=["sys", "query"],
             instruction="Language: {{#start.lang#}}",
             classes=[{"id": "1", "name": "Order status"}, {"id": "2", "name": "Other question"}],
             memory={"window": {"enabled": True, "size": 3}}),
        node("ext", "parameter-extractor", model=model(), query=["sys", "query"], reasoning_mode="prompt",
             instruction="Find the order.", parameters=[
                 {"name": "order_id", "type": "string", "description": "the order id", "required": True},
                 {"name": "urgent", "type": "bool", "description": "", "required": False},
                 {"name": "channel", "type": "select", "options": ["web", "phone"], "required": False}]),
        node("api", "http-request", method="get", url="{{#env.API_BASE#}}/orders/{{#ext.order_id#}}",
             headers="Accept:application/json\nX-Lang:{{#start.lang#}}", params="verbose:1",
             authorization={"type": "api-key", "config": {"type": "bearer", "api_key": "{{#env.API_KEY#}}"}},
             body={"type": "none", "data": []}, timeout={"max_connect_timeout": 0, "max_read_timeout": 0,
                                                          "read": 7},
             error_strategy="fail-branch", retry_config={"retry_enabled": True, "max_retries": 2,
                                                         "retry_interval": 100}),
        node("ok", "answer", answer="Order {{#ext.order_id#}}: {{#api.body#}} ({{#api.status_code#}})"),
        node("bad", "answer", answer="Sorry: {{#api.error_message#}}"),
        node("save", "assigner", version="2", items=[
            {"variable_selector": ["conversation", "last_order"], "input_type": "variable", "operation": "over-write",
             "value": ["ext", "order_id"]},
            {"variable_selector": ["conversation", "asked"], "input_type": "constant", "operation": "+=",
             "value": 1}]),
        node("llm", "llm", model=model("gpt-4o", temperature=0.5, max_tokens=300),
             context={"enabled": True, "variable_selector": ["start", "lang"]},
             prompt_template=[{"role": "system", "text": "Answer in {{#context#}}. Orders asked: "
                                                          "{{#conversation.asked#}}"}],
             memory={"window": {"enabled": False, "size": 10}, "query_prompt_template": ""},
             error_strategy="default-value", default_value=[{"key": "text", "type": "string",
                                                             "value": "I cannot answer now."}]),
        node("say", "answer", answer="{{#llm.text#}}"),
    ], [edge("start", "cls"), edge("cls", "ext", "1"), edge("cls", "llm", "2"), edge("ext", "save"),
        edge("save", "api"), edge("api", "ok", "source"), edge("api", "bad", "fail-branch"), edge("llm", "say")],
        mode="advanced-chat",
        env=[{"name": "API_BASE", "value": "http://127.0.0.1:9", "value_type": "string"},
             {"name": "API_KEY", "value": "", "value_type": "secret"}],
        conversation=[{"name": "last_order", "value_type": "string", "value": ""},
                      {"name": "asked", "value_type": "number", "value": 0}])


def loops_and_unsupported() -> dict[str, Any]:
    """A loop with an if-else and a loop-end inside; a legacy variable-assigner (aggregator);
    an iteration over LLM answers (nothing to flatten); a marketplace tool and a knowledge
    retrieval (unsupported)."""
    return app([
        node("start", "start", variables=[{"variable": "limit", "type": "number", "label": "limit",
                                           "required": True}]),
        node("loop", "loop", loop_count=20, logical_operator="and", break_conditions=[],
             loop_variables=[{"label": "total", "var_type": "number", "value_type": "constant", "value": "0"},
                             {"label": "cap", "var_type": "number", "value_type": "variable",
                              "value": ["start", "limit"]}], start_node_id="loopstart"),
        node("loopstart", "loop-start", parent="loop"),
        node("add", "assigner", parent="loop", version="2", loop_id="loop", items=[
            {"variable_selector": ["loop", "total"], "input_type": "constant", "operation": "+=", "value": 3}]),
        node("check", "if-else", parent="loop", cases=[{"case_id": "full", "logical_operator": "and", "conditions": [
            {"variable_selector": ["loop", "total"], "comparison_operator": "≥", "value": "{{#loop.cap#}}",
             "varType": "number"}]}]),
        node("stop", "loop-end", parent="loop"),
        node("agg", "variable-assigner", output_type="number", variables=[["loop", "total"], ["start", "limit"]]),
        node("list", "code", code_language="javascript", code="function main({n}) { return {xs: ['a', 'b']} }",
             variables=[{"variable": "n", "value_selector": ["agg", "output"]}],
             outputs={"xs": {"type": "array[string]", "children": None}}),
        node("each", "iteration", iterator_selector=["list", "xs"], output_selector=["say", "text"],
             is_parallel=True, parallel_nums=2, error_handle_mode="continue-on-error", start_node_id="eachstart"),
        node("eachstart", "iteration-start", parent="each"),
        node("say", "llm", parent="each", model=model(), prompt_template=[
            {"role": "user", "text": "Item {{#each.index#}}: {{#each.item#}}"}]),
        node("search", "knowledge-retrieval", query_variable_selector=["sys", "query"], dataset_ids=["x"]),
        node("tool", "tool", provider_id="google", tool_name="google_search",
             tool_parameters={"query": {"type": "mixed", "value": "{{#search.result#}}"}}),
        node("end", "end", outputs=[{"variable": "total", "value_selector": ["loop", "total"]},
                                    {"variable": "picked", "value_selector": ["agg", "output"]},
                                    {"variable": "said", "value_selector": ["each", "output"]},
                                    {"variable": "found", "value_selector": ["tool", "text"]}]),
    ], [edge("start", "loop"), edge("loopstart", "add"), edge("add", "check"), edge("check", "stop", "full"),
        edge("loop", "agg"), edge("agg", "list"), edge("list", "each"), edge("eachstart", "say"),
        edge("each", "search"), edge("search", "tool"), edge("tool", "end")])
