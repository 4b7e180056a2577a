"""Config field help in zh-CN: every description of every built-in kind's config schema
(its properties and its ``$defs`` entries) and of the fields every node has has a Chinese help, keyed by the
English help the config form shows; ``GET /v1/node-kinds`` serves each kind the help of
exactly its own fields, and the help of the fields every node has."""

from __future__ import annotations

import re
from typing import Any

from api.routes.catalog import node_fields_schema
from nodes import builtin_catalog
from nodes.help_zh import HELP_ZH_CN, help_key


def _helps(schema: dict[str, Any]) -> set[str]:
    """The English help of each property of the root and every ``$defs`` entry (written
    out here rather than reusing the route's helper)."""
    parts = [schema, *schema.get("$defs", {}).values()]
    own = {help_key(d["description"]) for d in schema.get("$defs", {}).values()
           if isinstance(d.get("description"), str)}
    return own | {help_key(p["description"]) for part in parts for p in part.get("properties", {}).values()
                  if isinstance(p.get("description"), str)}


def test_every_field_description_has_a_zh_cn_help():
    catalog = builtin_catalog()
    used = set(_helps(node_fields_schema()))
    for kind in catalog.specs:
        used |= _helps(catalog.config_schema(kind))
    missing = sorted(used - set(HELP_ZH_CN))
    assert not missing, f"field help without a zh-CN text: {missing}"
    assert not set(HELP_ZH_CN) - used, f"help of no field any more: {sorted(set(HELP_ZH_CN) - used)}"
    for english, chinese in HELP_ZH_CN.items():
        assert chinese == chinese.strip() and "\n" not in chinese, english
        assert re.search(r"[\u4e00-\u9fff]", chinese) or english == chinese, (english, chinese)


def test_help_key_is_the_first_paragraph_as_the_form_shows_it():
    assert help_key("Jinja2 ``template``,\n  e.g. x\n\nMore detail.") == "Jinja2 template, e.g. x"


async def test_node_kinds_serve_each_kind_the_help_of_its_own_fields(api):
    body = (await api.client.get("/v1/node-kinds", headers=api.auth())).json()
    kinds = {k["kind"]: k for k in body["kinds"]}
    answer = kinds["answer"]
    assert answer["labels"]["zh-CN"]["help"] == {k: HELP_ZH_CN[k] for k in _helps(answer["config_schema"])}
    http = kinds["http_request"]["labels"]["zh-CN"]["help"]
    assert http[help_key("treat a 4xx/5xx status as a node error")] == "把 4xx/5xx 状态码视为节点错误"
    assert "Jinja2 template shown to the person" not in http
    assert body["node_field_help"]["zh-CN"] == {k: HELP_ZH_CN[k] for k in _helps(body["node_fields_schema"])}
