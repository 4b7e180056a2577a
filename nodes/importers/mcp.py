"""MCP tools of FastGPT and Dify files -> a tool node's ``mcp_servers``.

- **FastGPT** keeps the server in the file: an MCP tool set node (``flowNodeType``
  ``toolSet``, ``toolConfig.mcpToolSet``: ``url``, ``toolList``, ``headerSecret``) or one
  of its tools (``tool`` with ``toolConfig.mcpTool`` and the ``system_toolData`` input
  ``{name, url, headerSecret}``), attached to a tool call with ``selectedTools``. Each
  becomes an entry of the tool call's ``mcp_servers`` (:func:`fastgpt_server`): tools of
  one URL share one entry, named after the node; the tools FastGPT listed are the tools
  offered. FastGPT's header secrets are exported without their values: each header
  becomes a ``{{secret:NAME}}`` reference the operator sets (``FLOWLOOM_SECRET_NAME``).
- **Dify** files name an MCP tool's server by its identifier only (``provider_type:
  mcp``, ``provider_id``); the URL stays in Dify's database, so such tools cannot be
  carried over: :func:`dify_reason` says so, naming the server and the tool.
"""

from __future__ import annotations

import re
from typing import Any

from .base import dict_at
from .fastgpt_refs import enum_value, input_value

__all__ = ["dify_reason", "fastgpt_mcp_kind", "fastgpt_server", "fastgpt_source", "merge_servers"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]+")
_SECRET_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")
_TOOL_DATA_KEYS = ("system_toolData", "toolData")


def fastgpt_mcp_kind(node: dict[str, Any]) -> bool:
    """True for a FastGPT node that is an MCP tool set or an MCP tool (with or without its URL)."""
    config = dict_at(node, "toolConfig")
    if config.get("mcpToolSet") or config.get("mcpTool"):
        return True
    return fastgpt_source(node) is not None


def fastgpt_source(node: dict[str, Any]) -> dict[str, Any] | None:
    """``{url, tools, headers}`` of a FastGPT MCP node whose file holds the server's URL;
    None when it does not (``tools``: names, empty for "all"; ``headers``: header names)."""
    config = dict_at(node, "toolConfig")
    toolset = config.get("mcpToolSet")
    if isinstance(toolset, dict) and isinstance(toolset.get("url"), str) and toolset["url"].strip():
        tools = [
            str(t["name"]) for t in toolset.get("toolList") or [] if isinstance(t, dict) and t.get("name")
        ]
        return {"url": toolset["url"].strip(), "tools": tools, "headers": _header_names(toolset)}
    for key in _TOOL_DATA_KEYS:
        data = input_value(node, key)
        if (
            isinstance(data, dict)
            and isinstance(data.get("url"), str)
            and data["url"].strip()
            and data.get("name")
        ):
            return {"url": data["url"].strip(), "tools": [str(data["name"])], "headers": _header_names(data)}
    return None


def _header_names(holder: dict[str, Any]) -> list[str]:
    secrets = holder.get("headerSecret") or holder.get("headers") or {}
    return [str(name) for name in secrets] if isinstance(secrets, dict) else []


def fastgpt_server(name: str, source: dict[str, Any], taken: set[str]) -> tuple[dict[str, Any], list[str]]:
    """An ``mcp_servers`` entry for ``source`` (:func:`fastgpt_source`), named after the
    node ``name`` (unique among ``taken``, which it joins): ``(entry, secret variables
    the operator must set)``."""
    base = _UNSAFE.sub("_", name).strip("_")[:48] or "mcp"
    server, n = base, 2
    while server in taken:
        server, n = f"{base}_{n}", n + 1
    taken.add(server)
    headers: dict[str, str] = {}
    secrets: list[str] = []
    for header in source["headers"]:
        secret = _SECRET_UNSAFE.sub("_", f"{server}_{header}").strip("_").upper()
        headers[header] = "{{secret:" + secret + "}}"
        secrets.append(f"FLOWLOOM_SECRET_{secret}")
    entry: dict[str, Any] = {"name": server, "url": source["url"]}
    if headers:
        entry["headers"] = headers
    if source["tools"]:
        entry["tools"] = list(dict.fromkeys(source["tools"]))
    return entry, secrets


def merge_servers(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries of one URL merged (their tools joined; an entry offering every tool wins)."""
    by_url: dict[str, dict[str, Any]] = {}
    for entry in entries:
        kept = by_url.get(entry["url"])
        if kept is None:
            by_url[entry["url"]] = dict(entry)
        elif "tools" in kept:
            if "tools" in entry:
                kept["tools"] = list(dict.fromkeys(kept["tools"] + entry["tools"]))
            else:
                del kept["tools"]
    return list(by_url.values())


def dify_reason(data: dict[str, Any]) -> str | None:
    """Why a Dify MCP tool cannot be imported (None: not an MCP tool)."""
    if str(enum_value(data.get("provider_type")) or "") != "mcp":
        return None
    server = str(data.get("provider_id") or data.get("provider_name") or "?")
    tool = str(data.get("tool_name") or data.get("tool_label") or "?")
    return (
        f"tool {tool} of MCP server {server}: the Dify file names the server but not its URL (Dify keeps it "
        "in its database); give a tool_call or agent node an mcp_servers entry with the server's URL and "
        f"tools [{tool}]"
    )
