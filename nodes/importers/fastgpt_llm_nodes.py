"""FastGPT model-calling node kinds -> Flowloom node configs.

The LLM family of converters (chat, knowledge search and concat, question classify,
content extract, query extension) split out of :mod:`nodes.importers.fastgpt_nodes`,
which mixes them into :class:`~nodes.importers.fastgpt_nodes.FastGPTNodes`.
"""

from __future__ import annotations

import re
from typing import Any

from schemas.types import VarType

from .base import Planned, number
from .datasets import CONCAT_CODE, FASTGPT_MODES, DatasetImport
from .fastgpt_refs import FastGPTRefs, input_value, is_ref
from .refs import Unconvertible, var_type

__all__ = ["FastGPTLLMNodes"]


class FastGPTLLMNodes(FastGPTRefs, DatasetImport):
    """Converters for the model-calling node kinds; shared by :class:`FastGPTNodes`."""

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
