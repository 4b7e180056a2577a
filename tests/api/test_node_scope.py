"""``POST /v1/workflows/scope``: what a node may reference in a field, for a draft that
need not compile yet, decided by the compiler's own rule; 422 for an unknown node or an
invalid top level, 401 without a key."""

from __future__ import annotations

from typing import Any

DRAFT: dict[str, Any] = {
    "id": "scoped", "inputs": [{"name": "list", "type": "array"}],
    "conversation_variables": [{"name": "count", "type": "number", "default": 0}],
    "nodes": [{"id": "start", "type": "start"},
              {"id": "it", "type": "iteration", "config": {"items": {"ref": "inputs.list"}}},
              {"id": "fmt", "type": "template", "parent": "it", "config": {"template": "{{ it.item }}"}},
              {"id": "after", "type": "template", "config": {"template": "x"}}],
    "edges": [{"id": "e1", "source": "start", "target": "it"}, {"id": "e2", "source": "it", "target": "after"}],
}


async def _scope(api, node_id: str, field: str | None = None, doc: dict[str, Any] | None = None):
    return await api.client.post("/v1/workflows/scope", headers=api.auth(),
                                 json={"workflow": doc or DRAFT, "node_id": node_id, "field": field})


async def test_a_body_node_sees_item_and_index_before_collect_is_set(api):
    answer = await _scope(api, "fmt")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    paths = {e["path"]: e for e in body["entries"]}
    assert {"it.item", "it.index", "inputs.list", "conversation.count", "sys.query"} <= set(paths)
    assert not {"it.results", "after.output", "fmt.output"} & set(paths)
    assert paths["it.index"] == {"path": "it.index", "group": "node", "node_id": "it", "output": "index",
                                 "type": "number"}
    assert paths["conversation.count"]["group"] == "conversation"
    collect = {e["path"] for e in (await _scope(api, "it", "collect")).json()["entries"]}
    items = {e["path"] for e in (await _scope(api, "it", "items")).json()["entries"]}
    assert "fmt.output" in collect and "fmt.output" not in items


async def test_unknown_node_bad_document_and_no_key_are_refused(api):
    missing = await _scope(api, "ghost")
    assert missing.status_code == 422 and "no node 'ghost'" in missing.text
    bad = await _scope(api, "x", doc={"id": "w", "inputs": "nope", "nodes": []})
    assert bad.status_code == 422
    anonymous = await api.client.post("/v1/workflows/scope", json={"workflow": DRAFT, "node_id": "fmt"})
    assert anonymous.status_code == 401
