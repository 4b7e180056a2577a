"""extract_fields: typed fields from text, as JSON.

The fields become one JSON Schema object (:meth:`ExtractFieldsConfig.json_schema`).
Protocol (``mode: auto`` picks the first the model supports):

1. ``structured``: ``response_format = {"type": "json_schema", ...}`` with that schema;
   the reply text is the JSON.
2. ``tool``: one function :data:`TOOL_NAME` whose parameters are the schema, forced
   with ``tool_choice`` when the model accepts it; its arguments are the JSON (a
   text reply instead is read as in 3). A model whose tool calls work only when
   forced (``capabilities.tools = "forced"``) counts as native here: one forced call
   is all this node makes.
3. ``prompt``: the schema is in the system prompt, which asks for the JSON object only.

Reading the JSON: the first JSON object of the reply (:mod:`nodes.llm.json_scan`: code
fences, prose before/after, trailing commas, single quotes are fine). A reply with
no readable object gives ``fields = {}`` and ``success = false`` - never an
exception; ``data.extract`` keeps the
raw reply, the reason and a position hint. Provider errors still fail the node.

Values are converted to the declared type by :func:`coerce_field`:

- ``string``: strings as is; numbers as ``str()``; booleans ``true``/``false``;
  objects/arrays as JSON text.
- ``number``: numbers; numeric text (surrounding spaces allowed: ``" 42 "`` -> 42,
  ``"3.5"`` -> 3.5). Booleans, ``"12 kg"``, ``"1,000"``, ``"1_000"``, NaN/Infinity are invalid.
- ``boolean``: booleans; ``true/false/yes/no/1/0`` text (any case); numbers 0 and 1.
- ``object`` / ``array``: that JSON shape, or JSON text of it.
- ``null`` or an absent key is *missing*, not invalid.
- ``enum``: after conversion the value must equal an enum value; a string that
  equals one ignoring case and surrounding spaces takes the enum's spelling.

Outputs: every field by name (null when missing or invalid), ``fields`` (only the
valid values), ``success`` (every required field present and valid - an invalid
optional field is dropped and recorded, it does not fail ``success``) and ``usage``.
Keys the schema does not declare are ignored (listed in ``data.extract.ignored``).

``max_tokens``: the node's, else sized from the schema (:func:`extract_max_tokens`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from engine.errors import NodeFailed
from schemas.node_records import ExtractRecord
from schemas.nodes_llm import ExtractField, ExtractFieldsConfig
from schemas.types import VarType

from ..if_else import coerce
from .chat import (
    add_usage,
    history_as_text,
    model_spec,
    recent_turns,
    registry_of,
    render_text,
    resolve_history,
    sampling,
)
from .json_scan import JsonNotFound, find_json

__all__ = [
    "EXTRACT_TEMPERATURE",
    "TOOL_NAME",
    "ExtractFieldsNode",
    "coerce_field",
    "extract_max_tokens",
    "validate_fields",
]

TOOL_NAME = "extract_fields"
EXTRACT_TEMPERATURE = 0.0
#: Output tokens allowed per field value, by type (:func:`extract_max_tokens`): a string
#: may be a sentence or two, a number or a flag a few tokens, an object or array more.
VALUE_TOKENS = {"string": 120, "number": 16, "boolean": 8, "object": 300, "array": 300}
#: The object's own braces, quotes and a few words a model may add around it.
OBJECT_OVERHEAD_TOKENS = 40


def extract_max_tokens(fields: list[ExtractField]) -> int:
    """The output cap of an extraction unless the node sets ``max_tokens``: the JSON object
    of every field at its type's :data:`VALUE_TOKENS` (an enum field at its longest value)
    plus each name, plus :data:`OBJECT_OVERHEAD_TOKENS`. Sized from the schema so a model
    that never stops cannot generate for minutes; the model's own maximum still bounds it."""
    total = OBJECT_OVERHEAD_TOKENS
    for field in fields:
        value = VALUE_TOKENS[field.type]
        if field.enum is not None:
            value = max(len(json.dumps(v, ensure_ascii=False)) for v in field.enum) // 2 + 8
        total += value + len(field.name) // 2 + 6
    return total


def coerce_field(field: ExtractField, value: Any) -> Any:
    """``value`` converted to ``field``'s type with the enum enforced (rules in the module docstring).

    Raises:
        ValueError: the value does not convert or is not an enum value (message says why).
    """
    if field.type == "number" and isinstance(value, str) and "_" in value:
        raise ValueError(f"{value!r} is not a number")  # Python's int() would read "1_000"
    converted = coerce(value, VarType(field.type))
    if isinstance(converted, float) and not math.isfinite(converted):
        raise ValueError(f"{value!r} is not a finite number")
    if field.enum is None:
        return converted
    for allowed in field.enum:
        if type(allowed) is type(converted) and allowed == converted:
            return allowed
        if field.type == "number" and isinstance(allowed, (int, float)) and allowed == converted:
            return allowed
    if isinstance(converted, str):
        folded = converted.strip().casefold()
        for allowed in field.enum:
            if isinstance(allowed, str) and allowed.strip().casefold() == folded:
                return allowed
    raise ValueError(f"{converted!r} is not one of {field.enum!r}")


def validate_fields(
    fields: list[ExtractField], raw: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(valid values, {field: why invalid}, missing required field names) for a parsed object."""
    valid: dict[str, Any] = {}
    invalid: dict[str, str] = {}
    for field in fields:
        value = raw.get(field.name)
        if value is None:
            continue
        try:
            valid[field.name] = coerce_field(field, value)
        except ValueError as exc:
            invalid[field.name] = str(exc)
    missing = [f.name for f in fields if f.required and f.name not in valid and f.name not in invalid]
    return valid, invalid, missing


class ExtractFieldsNode(NodeExecutor[ExtractFieldsConfig], kind="extract_fields"):
    """Extracts the configured fields (module docstring)."""

    def _protocol(self, ctx: NodeContext, caps: Any) -> str:
        mode = self.config.mode
        # one forced call suffices: forced-only tool calling counts as native here
        native = caps.forced_tool_calls or caps.free_tool_calls
        if mode == "auto":
            return "structured" if caps.structured_output else "tool" if native else "prompt"
        needs = {"structured": caps.structured_output, "tool": native, "prompt": True}[mode]
        if not needs:
            raise NodeFailed(
                f"config.mode: model {self.config.model!r} does not support {mode!r} extraction; "
                "use mode 'auto' or 'prompt'",
                node_id=ctx.node_id,
            )
        return mode

    def _system_prompt(self, instructions: str, history: str, protocol: str) -> str:
        schema = json.dumps(self.config.json_schema(), ensure_ascii=False, indent=2)
        lines = [
            "Extract the fields described by this JSON Schema from the user's text.",
            "Leave out a field the text does not state; never invent values.",
            "<schema>",
            schema,
            "</schema>",
        ]
        if instructions.strip():
            lines += ["", instructions.strip()]
        if history:
            lines += [
                "",
                "Conversation so far (context for references in the text):",
                "<history>",
                history,
                "</history>",
            ]
        lines.append("")
        if protocol == "tool":
            lines.append(f"Call the function {TOOL_NAME} with the extracted fields.")
        else:
            lines.append("Reply with only one JSON object that follows the schema, and nothing else.")
        return "\n".join(lines)

    async def run(self, ctx: NodeContext) -> NodeResult:
        from .call import call_llm
        from .chat import stream_idle_timeout

        cfg = self.config
        spec = model_spec(ctx, cfg.model)
        protocol = self._protocol(ctx, spec.capabilities)
        forced = protocol == "tool" and spec.capabilities.forced_tool_calls
        response = await call_llm(
            self._request(ctx, spec, protocol, forced),
            registry=registry_of(ctx),
            cancel=ctx.cancel,
            node_id=ctx.node_id,
            idle_timeout=stream_idle_timeout(ctx, spec),
        )
        usage = add_usage(ctx, response.usage)
        calls = [c for c in response.tool_calls if c.name == TOOL_NAME]
        raw = calls[0].arguments if (protocol == "tool" and calls) else response.text
        record: ExtractRecord = {"protocol": protocol, "raw": raw}
        parsed: dict[str, Any] | None = None
        if protocol == "tool" and not calls and forced:
            record.update(
                {
                    "reason": "no_tool_call",
                    "detail": f"tool_choice required {TOOL_NAME}; the model replied in text",
                }
            )
        else:
            try:
                parsed = find_json(raw, expect="object").value
            except JsonNotFound as exc:
                record.update({"reason": exc.reason, "detail": exc.hint(raw)})
        outputs = self._outputs(parsed, record)
        ctx.node_run.data["extract"] = record
        outputs.update(usage=usage.model_dump())
        return NodeResult(outputs)

    def _request(self, ctx: NodeContext, spec: Any, protocol: str, forced: bool) -> Any:
        """The ``LLMRequest`` asking for the fields by ``protocol`` (``tool``: a function
        whose parameters are the fields' JSON schema; ``structured``: that schema as the
        response format; ``prompt``: the schema in the system prompt)."""
        from .call import LLMRequest

        cfg = self.config
        text = render_text(ctx, cfg.text, "text")
        instructions = ctx.render(cfg.instructions, field="config.instructions") if cfg.instructions else ""
        history = history_as_text(recent_turns(resolve_history(ctx, cfg), cfg.history))
        temperature, max_tokens = sampling(cfg, spec, EXTRACT_TEMPERATURE, extract_max_tokens(cfg.fields))
        schema = cfg.json_schema()
        function = {"name": TOOL_NAME, "description": "Return the extracted fields.", "parameters": schema}
        return LLMRequest(
            cfg.model,
            [
                {"role": "system", "content": self._system_prompt(instructions, history, protocol)},
                {"role": "user", "content": text},
            ],
            temperature=temperature,
            max_tokens=max_tokens,
            tools=[{"type": "function", "function": function}] if protocol == "tool" else None,
            tool_choice={"type": "function", "function": {"name": TOOL_NAME}} if forced else None,
            response_format=(
                {"type": "json_schema", "json_schema": {"name": TOOL_NAME, "schema": schema}}
                if protocol == "structured"
                else None
            ),
        )

    def _outputs(self, parsed: dict[str, Any] | None, record: ExtractRecord) -> dict[str, Any]:
        """The node's outputs for the ``parsed`` reply (None: no JSON object found): each
        field's valid value or None, ``fields`` and ``success``; ``record`` gets what was
        invalid, missing or ignored."""
        fields = self.config.fields
        valid: dict[str, Any]
        invalid: dict[str, str]
        if parsed is None:
            valid, invalid, missing = {}, {}, [f.name for f in fields if f.required]
        else:
            valid, invalid, missing = validate_fields(fields, parsed)
            declared = {f.name for f in fields}
            record["ignored"] = sorted(k for k in parsed if k not in declared)
        success = (
            parsed is not None and not missing and not any(f.required and f.name in invalid for f in fields)
        )
        record.update({"invalid": invalid, "missing": missing, "success": success})
        outputs: dict[str, Any] = {f.name: valid.get(f.name) for f in fields}
        outputs.update(fields=valid, success=success)
        return outputs
