"""FastGPT node kinds -> Flowloom node configs (one ``_node_<flowNodeType>`` method a kind).

The mapping rules are documented in :mod:`nodes.importers.fastgpt`; references and
templates are resolved by :class:`~nodes.importers.fastgpt_refs.FastGPTRefs`.
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
from .datasets import CONCAT_CODE, FASTGPT_MODES, DatasetImport
from .fastgpt_refs import (
    VARIABLE_NODE_ID,
    FastGPTRefs,
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


class FastGPTNodes(FastGPTRefs, DatasetImport):
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

    def _history(self, p: Planned, cfg: dict[str, Any]) -> None:
        value = input_value(p.raw, "history")
        if is_ref(value):
            cfg["history_source"] = self.value(value)
            cfg["history"] = 100
        elif number(value) is not None:
            cfg["history"] = max(0, min(100, int(number(value) or 0)))

    def _model(self, p: Planned) -> str:
        value = input_value(p.raw, "model")
        if is_ref(value):
            raise Unconvertible(
                "the model is chosen at run time (a reference); Flowloom checks models when it compiles",
                "unsupported_feature",
            )
        return self.model_name(value)

    def _instructions(self, p: Planned, cfg: dict[str, Any], key: str) -> dict[str, Any]:
        """``cfg`` with ``instructions`` from input ``key`` (when set) and the history settings."""
        text = input_value(p.raw, key)
        if text:
            cfg["instructions"] = self.template(text)
        self._history(p, cfg)
        return cfg

    def _llm_config(self, p: Planned) -> dict[str, Any]:
        """What a chat and a tool call share: model, temperature (FastGPT's 0-10 scale to
        0-2), max tokens, prompts, history and whether the answer is streamed."""
        raw = p.raw
        cfg: dict[str, Any] = {"model": self._model(p)}
        temperature = number(input_value(raw, "temperature"))
        if temperature is not None:
            cfg["temperature"] = round(max(0.0, min(2.0, temperature / 10)), 3)
        max_tokens = number(input_value(raw, "maxToken"))
        if max_tokens and max_tokens > 0:
            cfg["max_tokens"] = int(max_tokens)
        system = input_value(raw, "systemPrompt")
        if system:
            cfg["system_prompt"] = self.template(system)
        cfg["user_prompt"] = self.text_value(input_value(raw, "userChatInput"))
        self._history(p, cfg)
        cfg["stream"] = bool(input_value(raw, "isResponseAnswerText", True))
        return cfg

    def _node_chatNode(self, p: Planned) -> dict[str, Any]:
        raw = p.raw
        cfg = self._llm_config(p)
        reasoning = input_value(raw, "aiChatReasoning")
        if reasoning is not None:
            cfg["stream_reasoning"] = bool(reasoning)
        quote = input_value(raw, "quoteQA")
        text_quote = input_value(raw, "stringQuoteText")
        if is_ref(quote):
            cfg["quote"] = self.value(quote)
        elif text_quote:
            cfg["quote"] = self.value(text_quote) if is_ref(text_quote) else text_quote
        role = input_value(raw, "aiChatQuoteRole")
        if role in ("system", "user"):
            cfg["quote_role"] = role
        self._quote_prompt(p, cfg)
        files = input_value(raw, "fileUrlList")
        if files:
            raise Unconvertible(
                "the chat reads files (fileUrlList); Flowloom chats take text only", "unsupported_feature"
            )
        return {"type": "chat", "config": cfg}

    def _quote_prompt(self, p: Planned, cfg: dict[str, Any]) -> None:
        """FastGPT's ``quotePrompt`` (the prompt around the quote, with ``{{quote}}`` and
        ``{{question}}``) becomes ``quote_template``; its ``quoteTemplate`` (how each item is
        written: ``{{q}}``, ``{{a}}``, ``{{source}}``...) has no equivalent: Flowloom writes
        each item as ``[n] source: <name>`` and its text, which the answer cites."""
        prompt = input_value(p.raw, "quotePrompt")
        if isinstance(prompt, str) and prompt.strip():
            text = re.sub(r"\{\{\s*(quote|question)\s*\}\}", r"{{ \1 }}", prompt)
            if re.search(r"\{\{(?!\s*(quote|question)\s*\}\})", text):
                self.warn(
                    "not_carried_over",
                    "the quote prompt uses FastGPT variables other than {{quote}} and "
                    "{{question}}; the built-in quote template is used instead",
                    p,
                )
            else:
                cfg["quote_template"] = text
        if input_value(p.raw, "quoteTemplate"):
            self.warn(
                "not_carried_over",
                "the quote item template (quoteTemplate) is not carried over: each quote "
                "item is written as '[n] source: <name>' and its text, which the answer cites as [n]",
                p,
            )

    def _node_datasetSearchNode(self, p: Planned) -> dict[str, Any]:
        """A knowledge-base search (:mod:`.datasets`); with ``datasetSearchUsingExtensionQuery``
        a query extension node is put before it and its queries searched too."""
        raw = p.raw
        chosen = input_value(raw, "datasets", []) or []
        if is_ref(chosen):
            raise Unconvertible("the datasets are chosen at run time (a reference)", "unsupported_feature")
        sources, names = [], {}
        for item in chosen if isinstance(chosen, list) else []:
            ds_id = item.get("datasetId") or item.get("id") if isinstance(item, dict) else item
            if ds_id:
                sources.append(str(ds_id))
                if isinstance(item, dict) and item.get("name"):
                    names[str(ds_id)] = str(item["name"])
        cfg: dict[str, Any] = {
            "datasets": self.dataset_ids(sources, p, names),
            "question": self.text_value(input_value(raw, "userChatInput")),
        }
        mode = input_value(raw, "searchMode")
        if mode in FASTGPT_MODES:
            cfg["mode"] = FASTGPT_MODES[mode]
        threshold = self.threshold(input_value(raw, "similarity"))
        if threshold is not None:
            cfg["score_threshold"] = threshold
        limit = number(input_value(raw, "limit"))
        if limit is not None and 0 < limit <= 200_000:
            cfg["max_quote_tokens"] = int(limit)
            cfg["top_k"] = 200  # FastGPT bounds the quotes by tokens only
        if input_value(raw, "usingReRank"):
            rerank = self.rerank_settings(input_value(raw, "rerankModel"), p)
            if rerank is not None:
                cfg["rerank"] = rerank
        if input_value(raw, "datasetSearchUsingExtensionQuery"):
            self._search_extension(p, cfg)
        for key in ("collectionFilterMatch", "authTmbId"):
            if input_value(raw, key):
                self.warn(
                    "not_carried_over",
                    f"{key} is not carried over (metadata filters are set on the node's filters)",
                    p,
                )
        return {"type": "knowledge_retrieval", "config": cfg}

    def _node_datasetConcatNode(self, p: Planned) -> dict[str, Any]:
        """Merged search results (FastGPT's reciprocal rank fusion and token limit) as a
        sandboxed Python code node (:data:`~.datasets.CONCAT_CODE`) over the searches'
        ``chunks``; its ``chunks`` output is what a chat's quote reads."""
        lists = [
            self.value(i.get("value"))
            for i in self.dynamic_inputs(p.raw, skip=("limit",))
            if is_ref(i.get("value"))
        ]
        if not lists:
            raise Unconvertible("the merge of search results reads no search node")
        limit = number(input_value(p.raw, "limit"))
        return {
            "type": "code",
            "config": {
                "language": "python",
                "code": CONCAT_CODE,
                "inputs": [
                    {"name": "lists", "value": lists, "type": "array"},
                    {"name": "limit", "value": int(limit) if limit and limit > 0 else 0, "type": "number"},
                ],
                "outputs": [{"name": "chunks", "type": "array"}],
            },
        }

    def _search_extension(self, p: Planned, cfg: dict[str, Any]) -> None:
        """FastGPT's built-in query extension as a ``query_extension`` node before the search."""
        model = input_value(p.raw, "datasetSearchExtensionModel")
        if not model:
            self.warn(
                "not_carried_over",
                "query extension (datasetSearchUsingExtensionQuery) has no model in the "
                "source: the question is searched as it is; add a query extension node to search rewritten "
                "queries too",
                p,
            )
            return
        qe_id = self.synthetic_id(f"{p.fid}-extension")
        qe_cfg: dict[str, Any] = {
            "model": self.model_name(model, "datasetSearchExtensionModel"),
            "question": cfg["question"],
            "count": 4,
        }
        background = input_value(p.raw, "datasetSearchExtensionBg")
        if background:
            qe_cfg["instructions"] = self.template(background)
        self.insert_before(
            p.fid,
            {
                "id": qe_id,
                "type": "query_extension",
                "name": "query extension",
                "position": {"x": p.position["x"] - 40, "y": p.position["y"] + 120},
                "config": qe_cfg,
            },
        )
        cfg["queries"] = {"ref": f"{qe_id}.queries"}

    def _node_classifyQuestion(self, p: Planned) -> dict[str, Any]:
        categories = []
        for agent in input_value(p.raw, "agents", []) or []:
            if isinstance(agent, dict) and agent.get("key") is not None:
                name = str(agent.get("value") or "").strip() or str(agent["key"])
                categories.append({"id": self.key_id(agent["key"]), "name": name})
        if len(categories) < 2:
            raise Unconvertible("a question classifier needs at least two categories")
        cfg: dict[str, Any] = {
            "model": self._model(p),
            "question": self.text_value(input_value(p.raw, "userChatInput")),
            "categories": categories,
        }
        return {"type": "classify_question", "config": self._instructions(p, cfg, "systemPrompt")}

    def _node_contentExtract(self, p: Planned) -> dict[str, Any]:
        names = self.extract_names(p.raw)
        fields = []
        for item in input_value(p.raw, "extractKeys", []) or []:
            if not isinstance(item, dict) or not item.get("key"):
                continue
            key = str(item["key"])
            vtype = var_type(item.get("valueType")) or VarType.string
            ftype = (
                vtype.value
                if vtype in (VarType.string, VarType.number, VarType.boolean, VarType.object, VarType.array)
                else "string"
            )
            desc = str(item.get("desc") or "")
            if names[key] != key:
                desc = f"{key}: {desc}" if desc else key
                self.renamed("extracted field", key, names[key], p)
            field: dict[str, Any] = {
                "name": names[key],
                "type": ftype,
                "required": bool(item.get("required")),
            }
            if desc:
                field["description"] = desc
            enum = [line.strip() for line in str(item.get("enum") or "").splitlines() if line.strip()]
            if enum and ftype == "string":
                field["enum"] = enum
            if item.get("defaultValue") not in (None, ""):
                self.warn(
                    "behaviour_difference",
                    f"field {key!r}: the default value is not used (a missing field is null)",
                    p,
                )
            fields.append(field)
        if not fields:
            raise Unconvertible("the content extractor has no fields")
        cfg: dict[str, Any] = {
            "model": self._model(p),
            "text": self.text_value(input_value(p.raw, "content")),
            "fields": fields,
        }
        return {"type": "extract_fields", "config": self._instructions(p, cfg, "description")}

    def _node_cfr(self, p: Planned) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "model": self._model(p),
            "question": self.text_value(input_value(p.raw, "userChatInput")),
        }
        return {"type": "query_extension", "config": self._instructions(p, cfg, "systemPrompt")}

    _node_queryExtension = _node_cfr

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

        def pairs(key: str) -> dict[str, str]:
            out: dict[str, str] = {}
            for item in input_value(raw, key, []) or []:
                if isinstance(item, dict) and item.get("key"):
                    out[str(item["key"])] = self.template(item.get("value") or "", local)
            return out

        if pairs("system_httpHeader"):
            cfg["headers"] = pairs("system_httpHeader")
        if pairs("system_httpParams"):
            cfg["query"] = pairs("system_httpParams")
        content_type = str(input_value(raw, "system_httpContentType", "") or "")
        body_text = input_value(raw, "system_httpJsonBody", "")
        if content_type in ("form-data", "x-www-form-urlencoded"):
            cfg["body"] = {"type": "form", "form": pairs("system_httpFormBody")}
            if content_type == "form-data":
                self.warn(
                    "behaviour_difference",
                    "the form-data body is sent URL-encoded (application/x-www-form-urlencoded)",
                    p,
                )
        elif content_type in ("raw-text", "xml"):
            cfg["body"] = {
                "type": "raw",
                "raw": self.template(body_text, local),
                "content_type": "application/xml" if content_type == "xml" else "text/plain",
            }
        elif content_type == "none" or not (isinstance(body_text, str) and body_text.strip()):
            pass
        else:
            cfg["body"] = {
                "type": "raw",
                "raw": self.template(body_text, local, json_body=True),
                "content_type": "application/json",
            }
        timeout = number(input_value(raw, "system_httpTimeout"))
        if timeout and timeout > 0:
            cfg["timeout"] = float(min(timeout, 600))
        paths = self.http_outputs(raw)
        outputs = {}
        for key, name in paths.items():
            try:
                self.http_output_name(raw, key)
            except Unconvertible as exc:
                self.defer(exc)
                continue
            outputs[name] = key
            if name != key:
                self.renamed("HTTP output", key, name, p)
        if outputs:
            cfg["outputs"] = outputs
        if "httpRawResponse" in self.referenced.get(p.src_id, set()):
            self.warn(
                "behaviour_difference",
                "httpRawResponse reads the parsed JSON response (`json`); a response "
                "that is not JSON reads null there (its text is `body`)",
                p,
            )
        return {"type": "http_request", "config": cfg}

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
