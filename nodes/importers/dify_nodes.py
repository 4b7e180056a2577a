"""Dify node kinds -> Flowloom node configs (one method a kind, listed in
:data:`~nodes.importers.dify_refs.CONVERTERS`).

The mapping rules are documented in :mod:`nodes.importers.dify`; selectors and
templates are resolved by :class:`~nodes.importers.dify_refs.DifyRefs`.
"""

from __future__ import annotations

import re
from typing import Any

from engine.code_packages import Language
from schemas.nodes import OUTPUT_NAME
from schemas.types import VarType

from .base import Planned, coerce_literal, dict_at, first, number
from .code_scan import check_code
from .datasets import DatasetImport
from .dify_refs import TEMPLATE_REF, DifyRefs, handle_key
from .dify_tools import DifyTools
from .refs import CODE_OUTPUT, IDENT, Unconvertible, var_type

__all__ = ["DifyNodes"]

_FLATTEN_CODE = (
    "def main(results):\n"
    "    # Dify's flatten_output: when every item's result is a list, concatenate them\n"
    "    if all(isinstance(r, list) for r in results):\n"
    '        return {"output": [x for r in results for x in r]}\n'
    '    return {"output": results}\n'
)


class DifyNodes(DifyTools, DifyRefs, DatasetImport):
    """The per-kind converters; :meth:`DifyImporter.convert` picks one from ``CONVERTERS``."""

    def _start(self, p: Planned) -> dict[str, Any]:
        return {"type": "start"}

    def _end(self, p: Planned) -> dict[str, Any]:
        outputs = self._named_values(self.data(p.raw).get("outputs"), "output name", names=OUTPUT_NAME)
        return {"type": "end", "config": {"outputs": outputs}}

    def _named_values(
        self, items: Any, what: str, why: str = "", names: str = IDENT.pattern
    ) -> list[dict[str, Any]]:
        """``[{variable, value_selector}]`` as ``[{name, value}]`` bindings; each name must
        match ``names`` (identifiers by default: template variables are read by name; End
        outputs and code inputs take any key), else ``<what> <name> ...<why>``."""
        out = []
        for item in items or []:
            if isinstance(item, dict) and item.get("variable"):
                name = str(item["variable"])
                if not re.fullmatch(names, name):
                    why_not = "is not an identifier" if names == IDENT.pattern else "holds both quote kinds"
                    raise Unconvertible(f"{what} {name!r} {why_not}{why}")
                out.append({"name": name, "value": self.value(item.get("value_selector"))})
        return out

    def _answer(self, p: Planned) -> dict[str, Any]:
        return {"type": "answer", "config": {"text": self.template(self.data(p.raw).get("answer") or "")}}

    def _model(self, data: dict[str, Any], cfg: dict[str, Any]) -> None:
        model = dict_at(data, "model")
        cfg["model"] = self.model_name(model.get("name"))
        params = dict_at(model, "completion_params")
        temperature = number(params.get("temperature"))
        if temperature is not None:
            cfg["temperature"] = max(0.0, min(2.0, float(temperature)))
        max_tokens = number(params.get("max_tokens"))
        if max_tokens and max_tokens > 0:
            cfg["max_tokens"] = int(max_tokens)

    def _memory(self, data: dict[str, Any], cfg: dict[str, Any], default: int) -> dict[str, Any] | None:
        memory = data.get("memory") if isinstance(data.get("memory"), dict) else None
        if memory is None:
            cfg["history"] = 0
            return None
        window = dict_at(memory, "window")
        size = number(window.get("size")) if window.get("enabled") else None
        cfg["history"] = max(0, min(100, int(size))) if size is not None else default
        return memory

    def _knowledge_retrieval(self, p: Planned) -> dict[str, Any]:
        """Dify's knowledge retrieval (:mod:`.datasets`): its datasets, query, top_k, score
        threshold, rerank model or weighted scores. Single-dataset routing (an LLM picks
        one dataset) and metadata filters are not carried over: every dataset is searched."""
        data = self.data(p.raw)
        sources = [str(d) for d in data.get("dataset_ids") or [] if d]
        cfg: dict[str, Any] = {"datasets": self.dataset_ids(sources, p)}
        selector = data.get("query_variable_selector")
        cfg["question"] = self.text_value(selector) if selector else "{{ sys.query }}"
        if data.get("retrieval_mode") == "single":
            self.warn(
                "not_carried_over",
                "single-dataset routing (a model picks one dataset) is not carried over: "
                "every dataset is searched and the results merged",
                p,
            )
        multi = dict_at(data, "multiple_retrieval_config")
        top_k = number(multi.get("top_k"))
        if top_k is not None and 1 <= top_k <= 200:
            cfg["top_k"] = int(top_k)
        threshold = (
            self.threshold(multi.get("score_threshold"))
            if multi.get("score_threshold_enabled", True)
            else None
        )
        if threshold is not None:
            cfg["score_threshold"] = threshold
        if (
            multi.get("reranking_enable")
            and multi.get("reranking_mode", "reranking_model") == "reranking_model"
        ):
            model = dict_at(multi, "reranking_model")
            rerank = self.rerank_settings(model.get("model"), p)
            if rerank is not None:
                cfg["rerank"] = rerank
        elif multi.get("reranking_mode") == "weighted_score" and isinstance(multi.get("weights"), dict):
            vector = multi["weights"].get("vector_setting") or {}
            weight = number(vector.get("vector_weight")) if isinstance(vector, dict) else None
            cfg["fusion"] = "weighted"
            if weight is not None and 0 <= weight <= 1:
                cfg["semantic_weight"] = float(weight)
        if data.get("metadata_filtering_mode") not in (None, "disabled"):
            self.warn("not_carried_over", "metadata filtering is not carried over; set the node's filters", p)
        return {"type": "knowledge_retrieval", "config": cfg}

    def _llm(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        cfg: dict[str, Any] = {}
        self._model(data, cfg)
        if (data.get("structured_output_enabled") or data.get("structured_output")) and data.get(
            "structured_output_enabled"
        ) is not False:
            self.defer(
                Unconvertible(
                    "structured output of an LLM node is not supported (use a parameter extractor)",
                    "unsupported_feature",
                )
            )
        context = dict_at(data, "context")
        local: dict[str, str] = {}
        if context.get("enabled") and context.get("variable_selector"):
            cfg["quote"] = self.value(context["variable_selector"])
            local["context"] = "quote"
        prompts = data.get("prompt_template")
        messages = prompts if isinstance(prompts, list) else [prompts] if isinstance(prompts, dict) else []
        messages = [m for m in messages if isinstance(m, dict)]
        for msg in messages:
            if msg.get("edition_type") == "jinja2":
                self.defer(Unconvertible("Jinja2 prompt messages are not supported", "unsupported_feature"))
                messages = []
        memory = self._memory(data, cfg, 50)
        system, user = self._prompt_messages(p, messages, local, cfg, memory is not None)
        if memory is not None:
            query = memory.get("query_prompt_template")
            user.append(
                self.template(
                    query if isinstance(query, str) and query.strip() else "{{#sys.query#}}", local=local
                )
            )
        if len(user) > 1:
            self.warn(
                "behaviour_difference", "several user messages are sent as one, separated by blank lines", p
            )
        if system and any(s for s in system):
            cfg["system_prompt"] = "\n\n".join(s for s in system if s)
        cfg["user_prompt"] = "\n\n".join(u for u in user if u) if user else ""
        if not cfg["user_prompt"] and "sys.query" not in cfg.get("system_prompt", ""):
            # faithful (Dify adds the question only with memory on), but rarely what was meant
            self.warn(
                "behaviour_difference",
                "the model is sent no user message and its prompt never reads the question "
                "(sys.query): as in Dify without memory, the user's question does not reach it; "
                "add {{ sys.query }} to the node's user_prompt",
                p,
            )
        if "context" in local:
            if any("quote" in s for s in system + user + [e["text"] for e in cfg.get("examples", [])]):
                cfg["quote_template"] = ""  # the prompt places the context itself
        if isinstance(data.get("vision"), dict) and data["vision"].get("enabled"):
            self.warn("behaviour_difference", "vision is on in Dify; Flowloom chats send text only", p)
        if not self._shown_text(p.src_id):
            # Dify shows an LLM's text only through the answer and End nodes that read it;
            # streaming it would make it answer the person directly (README "The answer stream").
            cfg["stream"] = False
        return {"type": "chat", "config": cfg}

    def _shown_text(self, src_id: str) -> bool:
        """True when an answer node's text or an End output reads ``src_id``'s ``text``
        directly: its tokens then stream there, as Dify streams them."""
        mark = f"{{{{#{src_id}.text#}}}}"
        for other in self.planned:
            data = self.data(other.raw)
            if other.src_type == "answer" and mark in str(data.get("answer") or ""):
                return True
            if other.src_type == "end":
                for item in data.get("outputs") or []:
                    if isinstance(item, dict) and list(item.get("value_selector") or []) == [src_id, "text"]:
                        return True
        return False

    def _prompt_messages(
        self,
        p: Planned,
        messages: list[dict[str, Any]],
        local: dict[str, str],
        cfg: dict[str, Any],
        memory: bool,
    ) -> tuple[list[str], list[str]]:
        """(system texts, user texts) of the prompt; its turns become the chat's ``examples``.

        Dify sends the prompt's messages in order, then (with memory) the history, then
        the memory's query. So with memory every user/assistant message is an example
        turn, sent before the history, and the query is the user prompt; without it the
        turns up to the last assistant message are examples and the user messages after
        it the user prompt. System messages all go to the system prompt."""
        roles = [str(m.get("role") or "user") for m in messages]
        last_turn = (
            len(messages) - 1
            if memory
            else max((i for i, r in enumerate(roles) if r == "assistant"), default=-1)
        )
        system: list[str] = []
        user: list[str] = []
        examples: list[dict[str, str]] = []
        for i, (msg, role) in enumerate(zip(messages, roles, strict=True)):
            text = self.template(msg.get("text") or "", local=local)
            if role == "system":
                if examples or user:
                    self.warn(
                        "behaviour_difference",
                        "a system message after other prompt messages is sent in the system prompt",
                        p,
                    )
                system.append(text)
            elif role in ("user", "assistant") and i <= last_turn:
                examples.append({"role": role, "text": text})
            elif role == "user":
                user.append(text)
            else:
                self.defer(
                    Unconvertible(
                        f"prompt messages with role {role!r} are not supported", "unsupported_feature"
                    )
                )
        if examples:
            cfg["examples"] = examples
        return system, user

    def _question_classifier(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        cfg: dict[str, Any] = {}
        self._model(data, cfg)
        cfg["question"] = self.text_value(data.get("query_variable_selector"))
        categories = [
            {"id": handle_key(c.get("id")), "name": str(c.get("name") or c.get("id"))}
            for c in data.get("classes") or []
            if isinstance(c, dict) and c.get("id") is not None
        ]
        if len(categories) < 2:
            raise Unconvertible("a question classifier needs at least two classes")
        cfg["categories"] = categories
        if data.get("instruction"):
            cfg["instructions"] = self.template(data["instruction"])
        self._memory(data, cfg, 4)
        return {"type": "classify_question", "config": cfg}

    _PARAM_TYPES = {
        "string": "string",
        "number": "number",
        "bool": "boolean",
        "boolean": "boolean",
        "select": "string",
        "object": "object",
    }

    def _parameter_extractor(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        cfg: dict[str, Any] = {}
        self._model(data, cfg)
        cfg["text"] = self.text_value(data.get("query"))
        fields = []
        for param in data.get("parameters") or []:
            if not isinstance(param, dict) or not param.get("name"):
                continue
            name, ptype = str(param["name"]), str(param.get("type") or "string")
            if not IDENT.match(name) or name in ("fields", "success", "usage"):
                raise Unconvertible(f"parameter name {name!r} is not usable as a Flowloom field name")
            ftype = "array" if ptype.startswith("array") else self._PARAM_TYPES.get(ptype)
            if ftype is None:
                raise Unconvertible(f"parameter type {ptype!r} is not supported", "unsupported_feature")
            field: dict[str, Any] = {"name": name, "type": ftype, "required": bool(param.get("required"))}
            if param.get("description"):
                field["description"] = str(param["description"])
            if ptype == "select" and param.get("options"):
                field["enum"] = [str(o) for o in param["options"]]
            fields.append(field)
        if not fields:
            raise Unconvertible("the parameter extractor has no parameters")
        cfg["fields"] = fields
        if data.get("instruction"):
            cfg["instructions"] = self.template(data["instruction"])
        mode = {"function_call": "tool", "prompt": "prompt"}.get(str(data.get("reasoning_mode") or ""))
        if mode:
            cfg["mode"] = mode
        self._memory(data, cfg, 0)
        return {"type": "extract_fields", "config": cfg}

    _OPS = {
        "contains": ("contains", None),
        "not contains": ("not_contains", None),
        "start with": ("starts_with", "string"),
        "end with": ("ends_with", "string"),
        "is": ("equals", None),
        "is not": ("not_equals", None),
        "empty": ("empty", None),
        "not empty": ("not_empty", None),
        "in": ("in", None),
        "not in": ("not_in", None),
        "=": ("equals", "number"),
        "≠": ("not_equals", "number"),
        ">": ("gt", "number"),
        "<": ("lt", "number"),
        "≥": ("gte", "number"),
        "≤": ("lte", "number"),
        "null": ("empty", None),
        "not null": ("not_empty", None),
    }

    def _condition(self, item: dict[str, Any]) -> dict[str, Any]:
        op = str(item.get("comparison_operator") or "")
        if op not in self._OPS:
            raise Unconvertible(
                f"condition operator {op!r} has no Flowloom equivalent", "unsupported_feature"
            )
        if item.get("sub_variable_condition"):
            raise Unconvertible("conditions on file attributes are not supported", "unsupported_feature")
        operator, coerce = self._OPS[op]
        var_kind = str(item.get("varType") or "")
        if coerce is None and operator in ("equals", "not_equals", "starts_with", "ends_with"):
            coerce = {"number": "number", "boolean": "boolean"}.get(var_kind, "string")
        cond: dict[str, Any] = {"left": self.value(item.get("variable_selector")), "operator": operator}
        if operator not in ("empty", "not_empty"):
            right = item.get("value")
            text = right if isinstance(right, str) else ""
            refs = TEMPLATE_REF.findall(text)
            if refs and TEMPLATE_REF.fullmatch(text.strip()):
                parts = refs[0].split(".")
                cond["right"] = self.selector(parts).as_ref()
            elif refs:
                raise Unconvertible(
                    f"condition value {right!r} mixes text and references", "unsupported_feature"
                )
            elif coerce == "number":
                cond["right"] = number(right) if number(right) is not None else right
            elif coerce == "boolean" and isinstance(right, str):
                cond["right"] = right.strip().lower() in ("true", "1", "yes")
            elif operator in ("in", "not_in"):
                cond["right"] = (
                    right if isinstance(right, list) else [v.strip() for v in str(right or "").split(",")]
                )
            else:
                cond["right"] = "" if right is None else right
        if coerce is not None:
            cond["type"] = coerce
        return cond

    def _if_else(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        raw_cases = data.get("cases")
        if not raw_cases:
            raw_cases = [
                {
                    "case_id": "true",
                    "logical_operator": data.get("logical_operator") or "and",
                    "conditions": data.get("conditions") or [],
                }
            ]
        cases = []
        for case in raw_cases:
            if not isinstance(case, dict):
                continue
            items = [c for c in case.get("conditions") or [] if isinstance(c, dict)]
            conditions = self.each(items, self._condition)
            if not items:
                raise Unconvertible(f"case {case.get('case_id')!r} has no condition")
            cases.append(
                {
                    "id": handle_key(first(case, "case_id", "id", default="true")),
                    "logic": "or" if str(case.get("logical_operator")).lower() == "or" else "and",
                    "conditions": conditions,
                }
            )
        return {"type": "if_else", "config": {"cases": cases}}

    def _code(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        languages: dict[str, Language] = {"python3": "python", "python": "python", "javascript": "javascript"}
        language = languages.get(str(data.get("code_language") or ""))
        if language is None:
            raise Unconvertible(f"code language {data.get('code_language')!r} is not supported")
        inputs = self._named_values(data.get("variables"), "input", names=r".+")
        outputs = []
        for name, spec in (data.get("outputs") or {}).items():
            spec = spec if isinstance(spec, dict) else {}
            if not CODE_OUTPUT.match(str(name)):
                raise Unconvertible(f"output {name!r} holds both quote kinds, which no reference can spell")
            outputs.append({"name": str(name), "type": (var_type(spec.get("type")) or VarType.any).value})
        code = data.get("code")
        if not isinstance(code, str) or not code.strip():
            raise Unconvertible("the code node has no code")
        check_code(self, p, language, code)
        return {
            "type": "code",
            "config": {"language": language, "code": code, "inputs": inputs, "outputs": outputs},
        }

    def _template_transform(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        variables = self._named_values(data.get("variables"), "template variable")
        template = data.get("template")
        return {
            "type": "template",
            "config": {"template": template if isinstance(template, str) else "", "variables": variables},
        }

    def _aggregator(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        groups = self._groups(data)
        if groups:
            adv = data["advanced_settings"]
            previous = p.fid
            first_node: dict[str, Any] | None = None
            for index, group in enumerate(adv.get("groups") or []):
                if not isinstance(group, dict) or not group.get("group_name"):
                    continue
                refs = [self.value(sel) for sel in group.get("variables") or []]
                if not refs:
                    raise Unconvertible(f"group {group['group_name']!r} has no variables")
                config = {"type": (var_type(group.get("output_type")) or VarType.any).value, "refs": refs}
                node_id = groups[str(group["group_name"])]
                if index == 0:
                    first_node = {"type": "variable_aggregator", "config": config}
                    continue
                self.insert_after(
                    previous,
                    {
                        "id": node_id,
                        "type": "variable_aggregator",
                        "name": f"{p.name} / {group['group_name']}",
                        "position": {"x": p.position["x"], "y": p.position["y"] + 80 * index},
                        "config": config,
                        **({"parent": p.parent} if p.parent else {}),
                    },
                )
                previous = node_id
            if len(groups) > 1:
                self.warn(
                    "behaviour_difference",
                    "each group of the aggregator is its own variable_aggregator node "
                    f"({', '.join(groups.values())}), run one after the other",
                    p,
                )
            assert first_node is not None
            return first_node
        refs = [self.value(sel) for sel in data.get("variables") or []]
        if not refs:
            raise Unconvertible("the variable aggregator has no variables")
        return {
            "type": "variable_aggregator",
            "config": {"type": (var_type(data.get("output_type")) or VarType.any).value, "refs": refs},
        }

    def _variable_assigner(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        if "items" not in data and "assigned_variable_selector" not in data:
            return self._aggregator(p)  # the legacy name of the aggregator
        return self._assigner(p)

    _ASSIGN_OPS = {
        "over-write": "set",
        "set": "set",
        "append": "append",
        "extend": "extend",
        "clear": "clear",
        "+=": "add",
    }

    def _assign_target(self, sel: Any) -> str:
        if isinstance(sel, list) and len(sel) == 2:
            head, var = str(sel[0]), str(sel[1])
            if head == "conversation" and var in self.conversation:
                return f"conversation.{self.conversation[var]}"
            if head in self.loop_vars and var in self.loop_vars[head]:
                return self.loop_vars[head][var]
        raise Unconvertible(
            f"it assigns {sel!r}; Flowloom updates conversation variables and loop variables only",
            "unsupported_feature",
        )

    def _assigner(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        updates = []
        if "items" in data:
            for item in data.get("items") or []:
                if not isinstance(item, dict):
                    continue
                name = self._assign_target(item.get("variable_selector"))
                op = str(item.get("operation") or "over-write")
                value = item.get("value")
                if item.get("input_type") == "variable" and op != "clear":
                    value = self.value(value)
                amount = number(value) if op == "-=" else None
                if amount is not None:
                    op, value = "+=", -amount
                if op not in self._ASSIGN_OPS:
                    raise Unconvertible(
                        f"assignment operation {op!r} has no Flowloom equivalent", "unsupported_feature"
                    )
                update: dict[str, Any] = {"variable": name, "operation": self._ASSIGN_OPS[op]}
                if op != "clear":
                    update["value"] = value
                updates.append(update)
        else:
            name = self._assign_target(data.get("assigned_variable_selector"))
            mode = str(data.get("write_mode") or "over-write")
            update = {"variable": name, "operation": self._ASSIGN_OPS.get(mode, "set")}
            if mode != "clear":
                update["value"] = self.value(data.get("input_variable_selector"))
            updates.append(update)
        if not updates:
            raise Unconvertible("the variable assigner assigns nothing")
        return {"type": "variable_update", "config": {"updates": updates}}

    def _iteration(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        cfg: dict[str, Any] = {"items": self.value(data.get("iterator_selector"))}
        self.body_scope = p.fid
        try:
            cfg["collect"] = self.value(data.get("output_selector"))
        finally:
            self.body_scope = None
        if data.get("is_parallel"):
            cfg["concurrency"] = max(1, min(32, int(number(data.get("parallel_nums")) or 1)))
        mode = {"terminated": "fail", "continue-on-error": "continue", "remove-abnormal-output": "skip"}.get(
            str(data.get("error_handle_mode") or "terminated"), "fail"
        )
        cfg["item_error"] = mode
        flat = self.flatten_id(p)
        if flat is not None:
            self.insert_after(
                p.fid,
                {
                    "id": flat,
                    "type": "code",
                    "name": f"{p.name or p.fid}: flatten output",
                    "position": {"x": p.position["x"] + 40, "y": p.position["y"] + 160},
                    "config": {
                        "language": "python",
                        "code": _FLATTEN_CODE,
                        "inputs": [{"name": "results", "value": {"ref": f"{p.fid}.results"}}],
                        "outputs": [{"name": "output", "type": "array"}],
                    },
                    **({"parent": p.parent} if p.parent else {}),
                },
            )
            self.warn(
                "behaviour_difference",
                f"flatten_output: node {flat!r} (Python, added by the importer) "
                "concatenates the items' results when every result is a list",
                p,
            )
        return {"type": "iteration", "config": cfg}

    def _loop(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        mirrors = self.loop_vars.get(p.src_id, {})
        variables, init, update = [], [], []
        for var in data.get("loop_variables") or []:
            if not isinstance(var, dict) or not var.get("label"):
                continue
            label = str(var["label"])
            if not IDENT.match(label) or label in ("index", "rounds"):
                raise Unconvertible(f"loop variable {label!r} is not usable as a Flowloom loop variable name")
            vtype = var_type(var.get("var_type")) or VarType.any
            if var.get("value_type") == "variable":
                initial: Any = self.value(var.get("value"))
            else:
                initial = coerce_literal(var.get("value"), vtype)
            init.append({"variable": mirrors[label], "operation": "set", "value": initial})
            variables.append({"name": label, "value": {"ref": f"vars.{mirrors[label]}"}, "type": vtype.value})
            update.append({"variable": label, "value": {"ref": f"vars.{mirrors[label]}"}})
        cfg: dict[str, Any] = {"variables": variables, "update": update}
        self.body_scope = p.fid
        try:
            cfg["break_when"] = [
                self._condition(c) for c in data.get("break_conditions") or [] if isinstance(c, dict)
            ]
        finally:
            self.body_scope = None
        cfg["logic"] = "or" if str(data.get("logical_operator")).lower() == "or" else "and"
        count = number(data.get("loop_count"))
        if count is not None and count >= 1:
            cfg["max_iterations"] = int(count)
        if init:
            self.insert_before(
                p.fid,
                {
                    "id": self.synthetic_id(f"{p.fid}-init"),
                    "type": "variable_update",
                    "name": f"{p.name or p.fid}: initial values",
                    "position": {"x": p.position["x"] - 40, "y": p.position["y"] - 120},
                    "config": {"updates": init},
                    **({"parent": p.parent} if p.parent else {}),
                },
            )
        self.warn(
            "behaviour_difference",
            f"the loop stops after its break conditions; reaching loop_count "
            f"({cfg.get('max_iterations', 'the run limit')}) rounds fails the node with reason "
            "max_iterations (Dify ends the loop there silently)",
            p,
        )
        return {"type": "loop", "config": cfg}

    def _loop_break(self, p: Planned) -> dict[str, Any]:
        return {"type": "loop_break"}

    def _http(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        cfg: dict[str, Any] = {
            "method": str(data.get("method") or "get").upper(),
            "url": self.template(data.get("url") or ""),
            "raise_for_status": False,
        }
        headers = self._http_headers(p, data)
        if headers:
            cfg["headers"] = headers
        query = self._http_pairs(data.get("params"))
        if query:
            cfg["query"] = query
        body = self._http_body(p, data)
        if body is not None:
            cfg["body"] = body
        timeout = dict_at(data, "timeout")
        values = [
            number(v) for k, v in timeout.items() if k.startswith("max_") or k in ("connect", "read", "write")
        ]
        given = [v for v in values if v is not None and v]
        if given:
            cfg["timeout"] = float(min(600, max(given)))
        if data.get("ssl_verify") is False:
            self.warn(
                "behaviour_difference",
                "TLS certificates are verified (Dify's ssl_verify: false is ignored)",
                p,
            )
        return {"type": "http_request", "config": cfg}

    def _http_pairs(self, text: Any) -> dict[str, str]:
        """``key: value`` lines (headers, query parameters, a form) -> key -> template."""
        out: dict[str, str] = {}
        if isinstance(text, str):
            for line in text.splitlines():
                key, sep, value = line.partition(":")
                if sep and key.strip():
                    out[key.strip()] = self.template(value.strip())
        return out

    def _http_headers(self, p: Planned, data: dict[str, Any]) -> dict[str, str]:
        """The request headers, with the API key of ``authorization`` written into them."""
        headers = self._http_pairs(data.get("headers"))
        auth = dict_at(data, "authorization")
        if auth.get("type") == "api-key":
            conf = dict_at(auth, "config")
            key = str(conf.get("api_key") or "")
            kind = str(conf.get("type") or "bearer")
            if kind == "custom":
                headers[str(conf.get("header") or "Authorization")] = self.template(key)
            else:
                headers["Authorization"] = self.template(("Basic " if kind == "basic" else "Bearer ") + key)
            self.warn(
                "behaviour_difference",
                "the API key from the export is written into the request headers; "
                "Dify exports usually leave it out, so set it before running",
                p,
            )
        return headers

    def _http_body(self, p: Planned, data: dict[str, Any]) -> dict[str, Any] | None:
        """The request body (None: no body). Files are not supported."""
        body = dict_at(data, "body")
        btype = str(body.get("type") or "none")
        raw_data = body.get("data")
        items = [i for i in raw_data if isinstance(i, dict)] if isinstance(raw_data, list) else []
        if btype in ("form-data", "x-www-form-urlencoded"):
            form = {}
            for item in items:
                if item.get("type") == "file":
                    raise Unconvertible("the request sends a file", "unsupported_feature")
                if item.get("key"):
                    form[str(item["key"])] = self.template(item.get("value") or "")
            if not items and isinstance(raw_data, str):
                form = self._http_pairs(raw_data)
            if btype == "form-data":
                self.warn("behaviour_difference", "the form-data body is sent URL-encoded", p)
            return {"type": "form", "form": form}
        if btype in ("json", "raw-text"):
            text = items[0].get("value") if items else raw_data if isinstance(raw_data, str) else ""
            return {
                "type": "raw",
                "raw": self.template(text or "", json_body=btype == "json"),
                "content_type": "application/json" if btype == "json" else "text/plain",
            }
        if btype == "binary":
            raise Unconvertible("the request sends a binary file", "unsupported_feature")
        return None
