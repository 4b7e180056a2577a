"""user_select and form_input: nodes that pause the run for a person's answer.

Both use :meth:`engine.context.NodeContext.interrupt`; when the run is resumed the
node runs again with ``ctx.resume.answer``. An answer that does not fit asks again,
with the reason in the new interrupt's payload (``error`` / ``errors``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from schemas.nodes_flow import FormInputConfig, UserSelectConfig

from .if_else import coerce
from .variables import is_empty

__all__ = ["FormInputNode", "UserSelectNode", "normalise_choice"]

_QUOTES = "\"'`“”‘’「」"


def normalise_choice(text: str) -> str:
    """Casefold, trim quotes/punctuation at the ends and collapse spaces: ``' "Yes." '`` -> ``yes``."""
    text = text.strip().strip(_QUOTES).strip().rstrip(".。!！?？").strip()
    return re.sub(r"\s+", " ", text).casefold()


class UserSelectNode(NodeExecutor[UserSelectConfig], kind="user_select"):
    """Asks the person to pick an option; takes the chosen option's handle.

    Outputs ``selected`` (option id) and ``label``.
    """

    def _payload(self, ctx: NodeContext, error: str | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "description": ctx.render(self.config.description, field="config.description"),
            "options": [o.model_dump() for o in self.config.options],
        }
        if error:
            payload["error"] = error
        return payload

    def match(self, answer: Any) -> str | None:
        """The option id ``answer`` designates (by id, else by label), or None."""
        if not isinstance(answer, str):
            return None
        wanted = normalise_choice(answer)
        for option in self.config.options:
            if wanted == normalise_choice(option.id):
                return option.id
        for option in self.config.options:
            if wanted == normalise_choice(option.label):
                return option.id
        return None

    def check_answer(self, answer: Any) -> list[str]:
        """Why ``answer`` fits no option (empty: it fits), naming the options - checked
        before a resume is accepted, so a wrong answer is refused rather than asked again."""
        if self.match(answer) is not None:
            return []
        choices = ", ".join(f"{o.id} ({o.label})" for o in self.config.options)
        return [f"{answer!r} is not one of: {choices}"]

    async def run(self, ctx: NodeContext) -> NodeResult:
        if ctx.resume is None:
            ctx.interrupt("user_select", self._payload(ctx))
        answer = ctx.resume.answer
        ctx.node_run.inputs["answer"] = answer
        chosen = self.match(answer)
        if chosen is None:
            choices = ", ".join(f"{o.id} ({o.label})" for o in self.config.options)
            ctx.interrupt("user_select", self._payload(ctx, f"{answer!r} is not one of: {choices}"))
        label = next(o.label for o in self.config.options if o.id == chosen)
        return NodeResult({"selected": chosen, "label": label}, handles=(chosen,))


class FormInputNode(NodeExecutor[FormInputConfig], kind="form_input"):
    """Asks the person to fill a form; outputs each field and ``form``.

    The answer is an object (or JSON text of one) keyed by field name. Each value is
    converted to the field's type by :func:`nodes.if_else.coerce`; missing required
    fields, values that do not convert and values outside ``enum`` ask again.
    """

    def _payload(self, ctx: NodeContext, errors: list[str] | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "description": ctx.render(self.config.description, field="config.description")
            if self.config.description
            else "",
            "fields": [f.model_dump(mode="json") for f in self.config.fields],
        }
        if errors:
            payload["errors"] = errors
        return payload

    def validate(self, answer: Any) -> tuple[dict[str, Any], list[str]]:
        """Returns (values, errors) for an answer."""
        if isinstance(answer, str):
            try:
                answer = json.loads(answer)
            except json.JSONDecodeError:
                if len(self.config.fields) == 1:
                    answer = {self.config.fields[0].name: answer}
        if not isinstance(answer, dict):
            return {}, [f"the answer must be an object with fields {[f.name for f in self.config.fields]}"]
        values: dict[str, Any] = {}
        errors: list[str] = []
        for field in self.config.fields:
            value = answer.get(field.name)
            if is_empty(value):
                value = field.default
            if is_empty(value):
                if field.required:
                    errors.append(f"{field.name}: required")
                values[field.name] = None
                continue
            try:
                value = coerce(value, field.type)
            except ValueError as exc:
                errors.append(f"{field.name}: {exc}")
                continue
            if field.enum is not None and value not in field.enum:
                errors.append(f"{field.name}: {value!r} is not one of {field.enum}")
                continue
            values[field.name] = value
        unknown = sorted(set(answer) - {f.name for f in self.config.fields})
        if unknown:
            errors.append(f"unknown field(s): {unknown}")
        return values, errors

    def check_answer(self, answer: Any) -> list[str]:
        """The problems of ``answer`` (empty: it fits): missing required fields, values that
        do not convert or are outside ``enum``, unknown fields (:meth:`validate`)."""
        return self.validate(answer)[1]

    async def run(self, ctx: NodeContext) -> NodeResult:
        if ctx.resume is None:
            ctx.interrupt("form_input", self._payload(ctx))
        ctx.node_run.inputs["answer"] = ctx.resume.answer
        values, errors = self.validate(ctx.resume.answer)
        if errors:
            ctx.interrupt("form_input", self._payload(ctx, errors))
        return NodeResult({**values, "form": values})
