"""Config field titles in zh-CN: every property name of every built-in kind's config
schema (root and ``$defs``) has one, and ``GET /v1/node-kinds`` serves each kind the
titles of exactly the names its schema uses."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from api.routes.catalog import node_fields_schema, property_names
from nodes import builtin_catalog
from nodes.labels_zh import FIELD_ZH_CN


def _names(schema: dict[str, Any]) -> set[str]:
    """Property names of the root and of every ``$defs`` entry (written out here rather
    than reusing the route's helper, so a helper that skipped ``$defs`` would fail)."""
    parts = [schema, *schema.get("$defs", {}).values()]
    return {name for part in parts for name in part.get("properties", {})}


def test_every_config_property_of_every_kind_has_a_zh_cn_title():
    catalog = builtin_catalog()
    used: set[str] = set()
    missing: set[tuple[str, str]] = set()
    for kind, spec in catalog.specs.items():
        for schema in (spec.config.model_json_schema(), catalog.config_schema(kind)):
            for name in sorted(_names(schema)):
                used.add(name)
                if not FIELD_ZH_CN.get(name, "").strip():
                    missing.add((kind, name))
    for name in sorted(_names(node_fields_schema())):  # the policy form every node has
        used.add(name)
        if not FIELD_ZH_CN.get(name, "").strip():
            missing.add(("(every node)", name))
    assert not missing, f"config properties without a zh-CN title: {sorted(missing)}"
    assert len(used) >= 100
    # Titles of names no kind uses any more would rot unseen.
    assert not set(FIELD_ZH_CN) - used, sorted(set(FIELD_ZH_CN) - used)
    for name, title in FIELD_ZH_CN.items():
        assert title == title.strip() and "\n" not in title, (name, title)


def test_property_names_reads_the_root_and_every_defs_entry():
    class Inner(BaseModel):
        left: int
        right: int = 0

    class Outer(BaseModel):
        conditions: list[Inner]
        logic: str = "and"

    names = property_names(Outer.model_json_schema())
    assert names == ["conditions", "logic", "left", "right"]


async def test_node_kinds_serve_each_kind_the_zh_cn_titles_of_its_own_fields(api):
    body = (await api.client.get("/v1/node-kinds", headers=api.auth())).json()
    kinds = {k["kind"]: k for k in body["kinds"]}
    assert set(kinds) == set(builtin_catalog().specs)
    for kind, out in kinds.items():
        label = out["labels"]["zh-CN"]
        names = _names(out["config_schema"])
        assert set(label["fields"]) == names, kind
        assert label["fields"] == {name: FIELD_ZH_CN[name] for name in names}, kind
    chat = kinds["chat"]["labels"]["zh-CN"]["fields"]
    assert chat["system_prompt"] == "系统提示词"
    assert chat["model"] == "模型"
    assert chat["temperature"] == "温度"
    # Only the kind's own names: no HTTP fields on a chat, none at all on the start node.
    assert "url" not in chat
    assert kinds["start"]["labels"]["zh-CN"]["fields"] == {}
    # Names found only in $defs (an if/else condition's operands) are there too.
    if_else = kinds["if_else"]["labels"]["zh-CN"]["fields"]
    assert {"cases", "conditions", "operator", "left", "right"} <= set(if_else)


async def test_node_kinds_serve_the_titles_of_the_fields_every_node_has(api):
    body = (await api.client.get("/v1/node-kinds", headers=api.auth())).json()
    names = _names(body["node_fields_schema"])
    assert {"timeout", "max_retries", "error_strategy", "x"} <= names
    assert body["node_field_labels"]["zh-CN"] == {name: FIELD_ZH_CN[name] for name in names}
    assert body["node_field_labels"]["zh-CN"]["max_retries"] == "最大重试次数"
