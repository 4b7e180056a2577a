"""FastGPT node kinds -> Flowloom node configs (one ``_node_<flowNodeType>`` method a kind).

The mapping rules are documented in :mod:`nodes.importers.fastgpt`; references and
templates are resolved by :class:`~nodes.importers.fastgpt_refs.FastGPTRefs`; the
model-calling kinds live in :mod:`nodes.importers.fastgpt_llm_nodes`.
"""

from __future__ import annotations

import ast
import re
from typing import Any
from urllib.parse import urlsplit

from engine.code_packages import Language
from nodes.sandbox.compat import FASTGPT_JS_GLOBALS
from schemas.nodes import OUTPUT_NAME
from schemas.types import VarType

from .base import Planned, coerce_literal, number
from .code_scan import check_code
from .fastgpt_llm_nodes import FastGPTLLMNodes
from .fastgpt_refs import (
    VARIABLE_NODE_ID,
    enum_value,
    input_value,
    is_ref,
    is_ref_list,
    node_outputs,
)
from .mcp import fastgpt_server, fastgpt_source, merge_servers
from .refs import CODE_OUTPUT, IDENT, Target, Unconvertible, identifier, var_type

__all__ = ["FastGPTNodes", "signature_defaults"]


def _json_literal(text: str) -> tuple[bool, Any]:
    """A JavaScript literal default (number, string, true/false/null, [], {}) -> (ok, value)."""
    text = text.strip()
    if text in ("true", "false", "null"):
        return True, {"true": True, "false": False, "null": None}[text]
    if text in ("[]", "{}"):
        return True, [] if text == "[]" else {}
    value = number(text)
    if value is not None:
        return True, value
    if (
        len(text) >= 2
        and text[0] == text[-1]
        and text[0] in "'\"`"
        and "\\" not in text
        and text[0] not in text[1:-1]
    ):
        return True, text[1:-1]
    return False, None


def signature_defaults(language: str, code: str) -> dict[str, Any]:
    """Literal parameter defaults of ``main`` (``function main({a, i = 0})`` / ``def main(a, i=0)``).

    FastGPT passes ``undefined`` for a reference to a node that has not run (a loop's
    first round) or was skipped, so the code's parameter default applies; a Flowloom
    binding ``default`` does the same for null. The code is parsed, never run.
    """
    if language == "python":
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            return {}
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "main":
                args = stmt.args
                out: dict[str, Any] = {}
                positional = args.posonlyargs + args.args
                for arg, default in zip(
                    positional[len(positional) - len(args.defaults) :], args.defaults, strict=True
                ):
                    try:
                        out[arg.arg] = ast.literal_eval(default)
                    except ValueError:
                        pass
                for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
                    if kw_default is not None:
                        try:
                            out[arg.arg] = ast.literal_eval(kw_default)
                        except ValueError:
                            pass
                return out
        return {}
    match = re.search(r"function\s+main\s*\(\s*\{([^}]*)\}", code) or re.search(
        r"main\s*=\s*(?:async\s*)?\(\s*\{([^}]*)\}\s*\)\s*=>", code
    )
    if not match:
        return {}
    out = {}
    for part in match.group(1).split(","):
        name, sep, literal = part.partition("=")
        name = name.strip()
        if sep and IDENT.match(name):
            ok, value = _json_literal(literal)
            if ok:
                out[name] = value
    return out


class FastGPTNodes(FastGPTLLMNodes):
    """The per-kind converters; :meth:`FastGPTImporter.convert` picks one by ``flowNodeType``."""

    def tool_params(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        """Inputs with a tool description: what the model fills when it calls the node as a tool."""
        params = []
        for inp in node.get("inputs") or []:
            if isinstance(inp, dict) and inp.get("key") and inp.get("toolDescription"):
                key = str(enum_value(inp["key"]))
                if not IDENT.match(key):
                    raise Unconvertible(f"tool parameter {key!r} is not an identifier")
                vtype = var_type(inp.get("valueType"))
                ptype = (
                    vtype.value
                    if vtype
                    in (VarType.string, VarType.number, VarType.boolean, VarType.object, VarType.array)
                    else "string"
                )
                params.append(
                    {
                        "name": key,
                        "type": ptype,
                        "description": str(inp["toolDescription"]),
                        "required": bool(inp.get("required")),
                    }
                )
        return params

    def _node_workflowStart(self, p: Planned) -> dict[str, Any]:
        if self.updated_globals:
            names = [self.globals[k][0] for k in sorted(self.updated_globals) if k in self.globals]
            if names:
                node_id = self.synthetic_id(f"{p.fid}-globals")
                self.insert_after(
                    p.fid,
                    {
                        "id": node_id,
                        "type": "variable_update",
                        "name": "global variables",
                        "position": {"x": p.position["x"] + 40, "y": p.position["y"] + 120},
                        "config": {
                            "updates": [
                                {"variable": n, "operation": "set", "value": {"ref": f"inputs.{n}"}}
                                for n in names
                            ]
                        },
                    },
                )
        return {"type": "start"}

    def _node_pluginInput(self, p: Planned) -> dict[str, Any]:
        for inp in p.raw.get("inputs") or []:
            key = str(inp.get("key") or "")
            if not key:
                continue
            name = key if IDENT.match(key) else identifier(key, [v["name"] for v in self.inputs], "input")
            self.renamed("plugin input", key, name, p)
            vtype = var_type(inp.get("valueType")) or VarType.string
            vtype = VarType.string if vtype is VarType.any else vtype
            self.globals.setdefault(key, (name, vtype))
            self.declare_input(
                name,
                vtype,
                required=bool(inp.get("required")),
                default=inp.get("defaultValue"),
                description=str(inp.get("description") or inp.get("label") or ""),
            )
        return {"type": "start"}

    def _node_pluginOutput(self, p: Planned) -> dict[str, Any]:
        outputs = []
        for inp in p.raw.get("inputs") or []:
            key = str(inp.get("key") or "")
            if key and re.fullmatch(OUTPUT_NAME, key):
                outputs.append({"name": key, "value": self.value(inp.get("value"))})
            elif key:
                raise Unconvertible(
                    f"plugin output {key!r} holds both quote kinds, which no reference can spell"
                )
        return {"type": "end", "config": {"outputs": outputs}}

    def _node_textEditor(self, p: Planned) -> dict[str, Any]:
        variables, local = self._bindings(p, self.dynamic_inputs(p.raw, skip=("system_textareaInput",)))
        return {
            "type": "template",
            "config": {
                "template": self.template(input_value(p.raw, "system_textareaInput", ""), local),
                "variables": variables,
            },
        }

    def _bindings(
        self,
        p: Planned,
        inputs: list[dict[str, Any]],
        *,
        exact: bool = False,
        defaults: dict[str, Any] | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, Target | str]]:
        """Dynamic inputs as bindings; ``local`` maps each input key to the bound name."""
        variables: list[dict[str, Any]] = []
        local: dict[str, Target | str] = {}
        taken: set[str] = set()
        for inp in inputs:
            key = str(enum_value(inp["key"]))
            if (IDENT.match(key) or exact) and key not in taken:
                name = key  # code receives its inputs by key: any key arrives unchanged
            else:
                name = identifier(key, taken, "var")
                self.renamed("input", key, name, p)
            taken.add(name)
            raw_value = inp.get("value")
            binding: dict[str, Any] = {"name": name, "value": self.value(raw_value)}
            if defaults and name in defaults and defaults[name] is not None:
                binding["default"] = defaults[name]
            variables.append(binding)
            vtype = self.ref(raw_value).type if is_ref(raw_value) else None
            local[key] = Target("local", name, type=vtype)
        return variables, local

    def _node_answerNode(self, p: Planned) -> dict[str, Any]:
        text = input_value(p.raw, "text", "")
        if isinstance(text, str) and "\\n" in text:
            # FastGPT shows the two characters backslash-n of an answer text as a line break
            text = text.replace("\\n", "\n")
        return {"type": "answer", "config": {"text": self.template(text)}}

    def _node_httpRequest468(self, p: Planned) -> dict[str, Any]:
        raw = p.raw
        local = self._http_locals(raw)
        if input_value(raw, "system_header_secret"):
            raise Unconvertible(
                "secret headers are stored encrypted by FastGPT and are not in the export",
                "unsupported_feature",
            )
        method = str(input_value(raw, "system_httpMethod", "GET") or "GET").upper()
        cfg: dict[str, Any] = {
            "method": method,
            "url": self.template(input_value(raw, "system_httpReqUrl", ""), local),
            "raise_for_status": True,
        }
        if headers := self._http_pairs(raw, "system_httpHeader", local):
            cfg["headers"] = headers
        if query := self._http_pairs(raw, "system_httpParams", local):
            cfg["query"] = query
        if body := self._http_body(p, local):
            cfg["body"] = body
        timeout = number(input_value(raw, "system_httpTimeout"))
        if timeout and timeout > 0:
            cfg["timeout"] = float(min(timeout, 600))
        if outputs := self._http_output_map(p):
            cfg["outputs"] = outputs
        if "httpRawResponse" in self.referenced.get(p.src_id, set()):
            self.warn(
                "behaviour_difference",
                "httpRawResponse reads the parsed JSON response (`json`); a response "
                "that is not JSON reads null there (its text is `body`)",
                p,
            )
        return {"type": "http_request", "config": cfg}

    def _http_locals(self, raw: dict[str, Any]) -> dict[str, Target | str]:
        """The request node's own inputs (``{{key}}`` in its URL, headers and body): a
        reference or a literal. Raises Unconvertible for a tool parameter, which only a
        tool call fills."""
        local: dict[str, Target | str] = {}
        for inp in self.dynamic_inputs(raw):
            key, value = str(enum_value(inp["key"])), inp.get("value")
            if is_ref(value):
                local[key] = self.ref(value)
            elif value is not None:
                local[key] = value if isinstance(value, str) else str(value)
            elif inp.get("toolDescription"):
                raise Unconvertible(
                    f"input {key!r} is a tool parameter, but the request is not attached to a tool call",
                    "unsupported_feature",
                )
            else:
                local[key] = ""
        return local

    def _http_pairs(self, raw: dict[str, Any], key: str, local: dict[str, Target | str]) -> dict[str, str]:
        """A key/value list input (headers, query, form) as templates."""
        out: dict[str, str] = {}
        for item in input_value(raw, key, []) or []:
            if isinstance(item, dict) and item.get("key"):
                out[str(item["key"])] = self.template(item.get("value") or "", local)
        return out

    def _http_body(self, p: Planned, local: dict[str, Target | str]) -> dict[str, Any] | None:
        """The body config by FastGPT's content type (None: no body)."""
        raw = p.raw
        content_type = str(input_value(raw, "system_httpContentType", "") or "")
        body_text = input_value(raw, "system_httpJsonBody", "")
        if content_type in ("form-data", "x-www-form-urlencoded"):
            form = self._http_pairs(raw, "system_httpFormBody", local)
            if content_type == "form-data":
                self.warn(
                    "behaviour_difference",
                    "the form-data body is sent URL-encoded (application/x-www-form-urlencoded)",
                    p,
                )
            return {"type": "form", "form": form}
        if content_type in ("raw-text", "xml"):
            return {
                "type": "raw",
                "raw": self.template(body_text, local),
                "content_type": "application/xml" if content_type == "xml" else "text/plain",
            }
        if content_type == "none" or not (isinstance(body_text, str) and body_text.strip()):
            return None
        return {
            "type": "raw",
            "raw": self.template(body_text, local, json_body=True),
            "content_type": "application/json",
        }

    def _http_output_map(self, p: Planned) -> dict[str, str]:
        """Output name -> response path for the request's own outputs (names that are not
        identifiers renamed and said; an unconvertible one deferred)."""
        outputs: dict[str, str] = {}
        for key, name in self.http_outputs(p.raw).items():
            try:
                self.http_output_name(p.raw, key)
            except Unconvertible as exc:
                self.defer(exc)
                continue
            outputs[name] = key
            if name != key:
                self.renamed("HTTP output", key, name, p)
        return outputs

    def _node_code(self, p: Planned) -> dict[str, Any]:
        """A code node with FastGPT's semantics (``semantics: fastgpt``): inputs converted
        to their ``valueType``, outputs unchecked, FastGPT's JavaScript globals."""
        raw = p.raw
        languages: dict[str, Language] = {
            "js": "javascript",
            "javascript": "javascript",
            "py": "python",
            "python": "python",
            "python3": "python",
        }
        language = languages.get(str(input_value(raw, "codeType", "js") or "js").lower())
        if language is None:
            raise Unconvertible(
                f"code type {input_value(raw, 'codeType')!r} is not supported (JavaScript and Python are)"
            )
        code = input_value(raw, "code", "")
        if not isinstance(code, str) or not code.strip():
            raise Unconvertible("the code node has no code")
        check_code(self, p, language, code, FASTGPT_JS_GLOBALS)
        defaults = signature_defaults(language, code)
        raw_inputs = self.dynamic_inputs(raw, skip=("codeType", "code"))
        inputs, _local = self._bindings(p, raw_inputs, exact=True, defaults=defaults)
        types = {}
        for inp in raw_inputs:
            vtype = var_type(inp.get("valueType"))
            if vtype not in (None, VarType.any, VarType.file):
                types[str(enum_value(inp["key"]))] = vtype.value
        outputs = []
        for out in node_outputs(raw):
            if out.get("type") != "dynamic" or out["key"] == "system_addOutputParam":
                continue
            if not CODE_OUTPUT.match(out["key"]):
                raise Unconvertible(
                    f"code output {out['key']!r} holds both quote kinds, which no reference can spell"
                )
            outputs.append(
                {"name": out["key"], "type": (var_type(out.get("valueType")) or VarType.any).value}
            )
        cfg: dict[str, Any] = {
            "language": language,
            "code": code,
            "inputs": inputs,
            "outputs": outputs,
            "semantics": "fastgpt",
        }
        if types:
            cfg["input_types"] = types
        return {"type": "code", "config": cfg}

    _CONDITIONS = {
        "isEmpty": ("empty", None),
        "isNotEmpty": ("not_empty", None),
        "equalTo": ("equals", "string"),
        "notEqual": ("not_equals", "string"),
        "greaterThan": ("gt", "number"),
        "greaterThanOrEqualTo": ("gte", "number"),
        "lessThan": ("lt", "number"),
        "lessThanOrEqualTo": ("lte", "number"),
        "include": ("contains", None),
        "notInclude": ("not_contains", None),
        "startWith": ("starts_with", "string"),
        "endWith": ("ends_with", "string"),
        "reg": ("regex", "string"),
    }

    def _condition(self, item: dict[str, Any]) -> dict[str, Any]:
        variable = item.get("variable")
        if not is_ref(variable):
            raise Unconvertible("a condition without a variable")
        op = str(item.get("condition") or "")
        if op not in self._CONDITIONS:
            raise Unconvertible(
                f"condition operator {op!r} has no Flowloom equivalent", "unsupported_feature"
            )
        operator, coerce = self._CONDITIONS[op]
        cond: dict[str, Any] = {"left": self.value(variable), "operator": operator}
        if operator not in ("empty", "not_empty"):
            right = item.get("value")
            if item.get("valueType") == "reference" or is_ref(right):
                cond["right"] = self.value(right)
            elif coerce == "number":
                cond["right"] = number(right) if number(right) is not None else str(right or "")
            else:
                cond["right"] = "" if right is None else str(right)
        if coerce is not None:
            cond["type"] = coerce
        return cond

    def _node_ifElseNode(self, p: Planned) -> dict[str, Any]:
        items = input_value(p.raw, "ifElseList", []) or []
        if items and all(isinstance(i, dict) and "list" in i for i in items):
            groups = items
        else:
            groups = [{"condition": input_value(p.raw, "condition", "AND"), "list": items}]
        cases = []
        for index, group in enumerate(groups):
            items = [c for c in group.get("list") or [] if isinstance(c, dict)]
            conditions = self.each(items, self._condition)
            if not items:
                raise Unconvertible(f"branch {index + 1} has no condition")
            cases.append(
                {
                    "id": "IF" if index == 0 else f"ELSE_IF_{index}",
                    "logic": "or" if str(group.get("condition") or "AND").upper() == "OR" else "and",
                    "conditions": conditions,
                }
            )
        if not cases:
            raise Unconvertible("the if-else node has no condition")
        return {"type": "if_else", "config": {"cases": cases}}

    def _node_variableUpdate(self, p: Planned) -> dict[str, Any]:
        updates = []
        for item in input_value(p.raw, "updateList", []) or []:
            if not isinstance(item, dict):
                continue
            target = item.get("variable")
            if not is_ref(target):
                continue
            if target[0] != VARIABLE_NODE_ID:
                raise Unconvertible(
                    f"it updates output {target[1]!r} of node {target[0]!r}; Flowloom updates run "
                    "variables (global variables) only",
                    "unsupported_feature",
                )
            if target[1] not in self.globals:
                raise Unconvertible(
                    f"it updates {target[1]!r}, which is not a declared global variable",
                    "unsupported_feature",
                )
            name, vtype = self.globals[target[1]]
            value = item.get("value")
            if item.get("renderType") == "reference" or (is_ref(value) and value[0]):
                new = self.value(value)
            else:
                new = coerce_literal(
                    value[1] if isinstance(value, list) and len(value) == 2 else value, vtype
                )
            updates.append({"variable": name, "operation": "set", "value": new})
        if not updates:
            raise Unconvertible("the variable update has no updates")
        return {"type": "variable_update", "config": {"updates": updates}}

    def _node_userSelect(self, p: Planned) -> dict[str, Any]:
        options = []
        for option in input_value(p.raw, "userSelectOptions", []) or []:
            if isinstance(option, dict) and option.get("key") is not None:
                options.append(
                    {"id": self.key_id(option["key"]), "label": str(option.get("value") or option["key"])}
                )
        if not options:
            raise Unconvertible("the user select has no options")
        return {
            "type": "user_select",
            "config": {
                "description": self.template(input_value(p.raw, "description", "")),
                "options": options,
            },
        }

    _FORM_TYPES = {
        "input": "string",
        "textarea": "string",
        "password": "string",
        "numberInput": "number",
        "switch": "boolean",
        "select": "string",
        "multipleSelect": "array",
        "timePointSelect": "string",
        "timeRangeSelect": "array",
        "selectLLMModel": "string",
        "JSONEditor": "object",
    }

    def _node_formInput(self, p: Planned) -> dict[str, Any]:
        names = self.form_names(p.raw)
        fields = []
        for item in input_value(p.raw, "userInputForms", []) or []:
            if not isinstance(item, dict) or not item.get("key"):
                continue
            kind = str(item.get("type") or "input")
            if kind not in self._FORM_TYPES:
                raise Unconvertible(
                    f"form field type {kind!r} is not supported (files are not)", "unsupported_feature"
                )
            self.renamed("form field", str(item["key"]), names[str(item["key"])], p)
            field: dict[str, Any] = {
                "name": names[str(item["key"])],
                "label": str(item.get("label") or item["key"]),
                "type": self._FORM_TYPES[kind],
                "required": bool(item.get("required")),
            }
            default = item.get("defaultValue")
            if default not in (None, "", []):
                field["default"] = default
            options = [o.get("value") for o in item.get("list") or [] if isinstance(o, dict)]
            if kind == "select" and options:
                field["enum"] = options
            if item.get("description"):
                field["description"] = str(item["description"])
            fields.append(field)
        if not fields:
            raise Unconvertible("the form has no fields")
        return {
            "type": "form_input",
            "config": {"description": self.template(input_value(p.raw, "description", "")), "fields": fields},
        }

    def _node_tools(self, p: Planned) -> dict[str, Any]:
        cfg = self._llm_config(p)
        tools = []
        for root in self.tool_roots.get(p.src_id, []):
            tool = self.by_src.get(root)
            if tool is None:
                continue
            description = str(
                tool.raw.get("toolDescription") or tool.raw.get("intro") or tool.name or tool.fid
            )
            tools.append(
                {
                    "node": tool.fid,
                    "name": tool.fid[:64],
                    "description": description,
                    "parameters": self.tool_params(tool.raw),
                }
            )
        cfg["tools"] = tools
        servers = self._mcp_servers(p)
        if servers:
            cfg["mcp_servers"] = servers
        if self.stop_tools.get(p.src_id):
            cfg["stop_tool"] = {}
            self.warn(
                "behaviour_difference",
                "FastGPT ends the tool loop when a tool run reaches its stopTool node "
                f"({', '.join(self.stop_tools[p.src_id])}); Flowloom gives the model a 'stop' tool to call "
                "instead, and the stopTool node is left out",
                p,
            )
        return {"type": "tool_call", "config": cfg}

    def _mcp_servers(self, p: Planned) -> list[dict[str, Any]]:
        """The ``mcp_servers`` of tool call ``p`` from its attached MCP nodes (:mod:`.mcp`),
        with the secrets and differences reported."""
        entries: list[dict[str, Any]] = []
        taken: set[str] = set()
        for root in self.mcp_roots.get(p.src_id, []):
            raw = self.src[root]
            source = fastgpt_source(raw)
            if source is None:
                continue
            entry, secrets = fastgpt_server(str(raw.get("name") or root), source, taken)
            entries.append(entry)
            if secrets:
                self.warn(
                    "behaviour_difference",
                    f"MCP server {entry['name']!r}: FastGPT exports its header secrets "
                    f"without values; set {', '.join(secrets)} (environment or .env) for "
                    f"{', '.join(entry['headers'])}",
                    p,
                )
            if urlsplit(source["url"]).path.rstrip("/").endswith("/sse"):
                self.warn(
                    "behaviour_difference",
                    f"MCP server {entry['name']!r} ({source['url']}) looks like an SSE "
                    "endpoint; Flowloom speaks Streamable HTTP (the server's /mcp endpoint)",
                    p,
                )
        if entries:
            self.warn(
                "behaviour_difference",
                "MCP tools run without confirmation in FastGPT; in Flowloom a tool "
                "not annotated read-only asks a person first (allow_write_tools opts out)",
                p,
            )
        return merge_servers(entries)

    def _node_loop(self, p: Planned) -> dict[str, Any]:
        items = input_value(p.raw, "loopInputArray")
        if not is_ref(items) and not is_ref_list(items):
            raise Unconvertible("the batch loop's input array is not a reference")
        end = self.loop_end.get(p.src_id)
        collect = input_value(end, "loopEndInput") if end else None
        cfg: dict[str, Any] = {"items": self.value(items)}
        self.body_scope = p.fid
        try:
            cfg["collect"] = self.value(collect) if is_ref(collect) else None
        finally:
            self.body_scope = None
        if end is None:
            self.warn("behaviour_difference", "the loop has no loop end node: every item's result is null", p)
        return {"type": "iteration", "config": cfg}
