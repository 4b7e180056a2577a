"""Config field titles in zh-CN: every property name of every built-in kind's config
schema (root and ``$defs``) has one, and ``GET /v1/node-kinds`` serves each kind the
titles of exactly the names its schema uses."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from api.routes.catalog import node_fields_schema, property_names
from nodes import builtin_catalog
from nodes.labels_zh import FIELD_ZH_CN, VALUE_ZH_CN


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


def _enums(node: Any) -> set[str]:
    """String values of every ``enum`` list anywhere in a schema (written out here rather
    than reusing the route's helper, so a helper that skipped nested enums would fail)."""
    if isinstance(node, dict):
        own = {v for v in node.get("enum", []) if isinstance(v, str)} if isinstance(node.get("enum"), list) else set()
        return own.union(*(_enums(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_enums(v) for v in node))
    return set()


def test_every_enum_value_of_every_kind_has_a_zh_cn_label():
    catalog = builtin_catalog()
    used: set[str] = set()
    missing: set[tuple[str, str]] = set()
    for kind in catalog.specs:
        for value in sorted(_enums(catalog.config_schema(kind))):
            used.add(value)
            if not VALUE_ZH_CN.get(value, "").strip():
                missing.add((kind, value))
    for value in sorted(_enums(node_fields_schema())):
        used.add(value)
        if not VALUE_ZH_CN.get(value, "").strip():
            missing.add(("(every node)", value))
    assert not missing, f"enum values without a zh-CN label: {sorted(missing)}"
    assert {"equals", "regex", "and", "error_branch"} <= used
    assert not set(VALUE_ZH_CN) - used, sorted(set(VALUE_ZH_CN) - used)


async def test_node_kinds_serve_each_kind_the_zh_cn_labels_of_its_enum_values(api):
    body = (await api.client.get("/v1/node-kinds", headers=api.auth())).json()
    kinds = {k["kind"]: k for k in body["kinds"]}
    for kind, out in kinds.items():
        values = _enums(out["config_schema"])
        assert out["labels"]["zh-CN"]["values"] == {v: VALUE_ZH_CN[v] for v in values}, kind
    if_else = kinds["if_else"]["labels"]["zh-CN"]["values"]
    assert if_else["not_equals"] == "不等于" and if_else["or"] == "或"
    assert kinds["start"]["labels"]["zh-CN"]["values"] == {}
    policy = body["node_value_labels"]["zh-CN"]
    assert policy == {v: VALUE_ZH_CN[v] for v in _enums(body["node_fields_schema"])}
    assert policy["error_branch"] == "走异常分支"
