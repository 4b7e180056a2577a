"""chat: one model call with system prompt, history and knowledge quote, streamed.

Request assembly, in order:

1. **System prompt** = the model's ``default_system_prompt``, the node's rendered
   ``system_prompt`` and (when the quote goes there) the rendered quote prompt, joined
   by :data:`SYSTEM_SEPARATOR`; empty parts are skipped. No system message at all when
   every part is empty.
2. **Quote placement**: the quote goes into the *user* message when ``quote_role`` is
   ``user`` or the quote template uses ``{{ question }}``; otherwise into the system
   prompt. An empty quote (or a quote template that renders empty) adds nothing
   anywhere; ``system_prompt`` and ``user_prompt`` may place the quote themselves with
   ``{{ quote }}``. In the user message the rendered template replaces the question when
   it contains it, else it is put before the question.
3. **Examples, history, user message**: the ``examples`` (fixed user/assistant turns,
   rendered like the system prompt), then the last ``history`` turns of
   ``history_source`` (a turn is a user message and the messages after it up to the
   next user message; older turns are dropped), then the user message - the examples
   stay in place and the history comes after them, as Dify places memory after a
   prompt's messages. :func:`nodes.llm.prompts.fit_messages` then drops the oldest history
   turns that do not fit ``max_context - max_tokens`` of the model (the examples are
   pinned: part of the prompt, never dropped).
4. **Sampling** is explicit on every request, never left to the provider's defaults:
   ``temperature`` is the node's, else the model's ``default_temperature``; ``max_tokens``
   is the node's capped by the model's ``max_output_tokens``, else that maximum.

The answer and reasoning stream as ``node_delta`` events on the ``answer`` and
``reasoning`` channels (``stream`` / ``stream_reasoning`` switch them off). Outputs:
``answer``, ``reasoning``, ``history`` (the source history plus this turn:
``{"role": "user", "content": <question>}`` and the assistant answer), ``usage`` and
``citations`` (QuotePiece dicts: the numbered quote items the answer cites as ``[n]``,
in citation order; when it cites none, every quote item given, and ``data.chat.cited``
is empty - see :mod:`nodes.knowledge.quotes`);
``node_run.usage`` holds tokens in/out, token source, cost, model, latency. A call that
fails after part of the reply arrived (stalled, dropped, an error in the stream, the
node's timeout) still spent those tokens and produced that text: the partial
``answer``/``reasoning`` and the usage (estimated when the provider never counted it)
stay in the failed node run, and ``data.chat.partial`` says how it ended. The stream
idle timeout is :func:`stream_idle_timeout` (node, model, provider; bounded by the
node's ``timeout``).

**As a tool** (the answer doubles as a tool response): an agent loop that owns a chat
node's executor gets an ``async (question: str) -> str`` with :meth:`ChatNode.as_tool`;
each call builds the same request with ``question`` as the user message (quote, system
prompt and history as configured), does not stream, and adds its usage to the calling
node's ``node_run.usage``.

This module also holds the helpers the other LLM nodes share (model lookup,
explicit sampling parameters, history turns, usage records).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from engine.errors import NodeFailed
from engine.plain_errors import did_you_mean
from engine.references import template_names
from schemas.node_records import ChatRecord, PartialReply, warning_entry
from schemas.nodes_llm import ChatConfig, LLMNodeConfig, TextValue
from schemas.run import Usage
from schemas.types import Ref

from .sent_messages import deployment_secrets, sent_record

__all__ = [
    "DEFAULT_QUOTE_TEMPLATES",
    "SYSTEM_SEPARATOR",
    "ChatNode",
    "ChatTurn",
    "Received",
    "add_usage",
    "format_quote",
    "history_as_text",
    "model_spec",
    "registry_of",
    "recent_turns",
    "render_text",
    "resolve_history",
    "sampling",
    "stream_idle_timeout",
    "warn",
]

#: Joins the parts of the system prompt.
SYSTEM_SEPARATOR = "\n\n===---===---===\n\n"
#: Separates quote items in the formatted quote text.
QUOTE_ITEM_SEPARATOR = "\n\n"

#: What both built-in quote templates say: the quote between <Reference> tags and how to
#: answer from it (cite the numbered items used as ``[n]``).
_QUOTE_INSTRUCTIONS = (
    "Use the knowledge in <Reference></Reference> as your reference for this conversation.\n"
    "<Reference>\n{{ quote }}\n</Reference>\n\n"
    "Answer requirements:\n"
    "- If the reference does not cover the question, say so instead of guessing.\n"
    "- Do not mention that the knowledge comes from the reference.\n"
    "- Keep the answer consistent with the reference.\n"
    "- Cite the reference items you use by their number in square brackets, e.g. [1].\n"
    "- Answer in the language of the question."
)

#: Built-in quote templates, per ``quote_role`` (FastGPT's defaults: the user one restates
#: the question after the instructions).
DEFAULT_QUOTE_TEMPLATES = {
    "system": _QUOTE_INSTRUCTIONS,
    "user": _QUOTE_INSTRUCTIONS + '\n\nQuestion: """{{ question }}"""',
}

_ROLES = frozenset({"user", "assistant", "system"})


# ============================================================== shared LLM helpers


def registry_of(ctx: NodeContext) -> Any:
    """The run's model registry (``RunDeps.models``), else the registry the run's settings
    ask for (``Settings.models``, the bundled one by default, with the base-URL override)."""
    if ctx.deps.models is not None:
        return ctx.deps.models
    from .model_registry import registry_for

    return registry_for(ctx.deps.settings)


def model_spec(ctx: NodeContext, name: str) -> Any:
    """The :class:`~nodes.llm.model_registry.ModelSpec` called ``name``.

    Raises:
        NodeFailed: the run's registry does not have it (the compiler checked another
            registry, or the file changed since); the message lists the known names.
    """
    registry = registry_of(ctx)
    if not registry.has(name):
        raise NodeFailed(
            f"config.model: model {name!r} is not in the model registry "
            f"(known: {', '.join(registry.names())})",
            node_id=ctx.node_id,
            reason="unknown_model",
        )
    return registry.get(name)


def sampling(
    config: LLMNodeConfig, spec: Any, default_temperature: float | None, cap: int | None = None
) -> tuple[float, int]:
    """(temperature, max_tokens) sent explicitly on every request.

    temperature: the node's, else ``default_temperature`` (the kind's pinned value;
    None means the model's ``default_temperature``). max_tokens: the node's capped by
    the model's ``max_output_tokens``, else ``cap`` (the kind's built-in cap: nodes whose
    output is short by design, so a model that never stops cannot generate for minutes),
    else that maximum. A model with the ``reasoning`` capability gets no built-in cap:
    its thinking counts against ``max_tokens`` and would be cut before it answers.
    """
    if config.temperature is not None:
        temperature = config.temperature
    elif default_temperature is not None:
        temperature = default_temperature
    else:
        temperature = spec.default_temperature
    if config.max_tokens is not None:
        max_tokens = min(config.max_tokens, spec.max_output_tokens)
    elif cap is not None and not spec.capabilities.reasoning:
        max_tokens = min(cap, spec.max_output_tokens)
    else:
        max_tokens = spec.max_output_tokens
    return float(temperature), int(max_tokens)


def render_text(ctx: NodeContext, value: TextValue, field: str, extra: dict[str, Any] | None = None) -> str:
    """A text field: a reference (must resolve to a string; null reads as ``""``) or a template.

    Raises:
        NodeFailed: the reference resolves to a non-string (the message names the field).
        TemplateFailed / ReferenceFailed: from rendering / resolving.
    """
    if isinstance(value, Ref):
        resolved = ctx.resolve(value, record_as=field)
        if resolved is None:
            return ""
        if not isinstance(resolved, str):
            raise NodeFailed(
                f"config.{field}: {value.ref} must be a string, got {type(resolved).__name__}",
                node_id=ctx.node_id,
            )
        return resolved
    text = ctx.render(value, field=f"config.{field}", extra=extra)
    ctx.node_run.inputs[field] = text
    return text


def resolve_history(ctx: NodeContext, config: LLMNodeConfig) -> list[dict[str, str]]:
    """The whole ``history_source`` as validated ``{"role", "content"}`` messages (null: ``[]``).

    Raises:
        NodeFailed: not an array, or an item without a known role and string content.
    """
    value = ctx.resolve(config.history_source)
    if value is None:
        return []
    if not isinstance(value, list):
        raise NodeFailed(
            f"config.history_source: {config.history_source.ref} must be an array of "
            f"{{role, content}} messages, got {type(value).__name__}",
            node_id=ctx.node_id,
        )
    out: list[dict[str, str]] = []
    for i, item in enumerate(value):
        role = item.get("role") if isinstance(item, dict) else None
        content = item.get("content") if isinstance(item, dict) else None
        if role not in _ROLES or not isinstance(content, str):
            raise NodeFailed(
                f"config.history_source: item [{i}] must be {{role: user|assistant|system, "
                f"content: string}}, got {json.dumps(item, default=str)[:80]}{did_you_mean(role, sorted(_ROLES))}",
                node_id=ctx.node_id,
            )
        out.append({"role": role, "content": content})
    return out


def recent_turns(messages: list[dict[str, str]], turns: int) -> list[dict[str, str]]:
    """The last ``turns`` turns of ``messages`` (oldest dropped); system messages are left out.

    A turn starts at a user message and runs to the next one, so a turn's replies
    stay with their question. Messages before the first user message (a greeting)
    count with the first turn.
    """
    chat = [m for m in messages if m["role"] != "system"]
    if turns <= 0 or not chat:
        return []
    starts = [i for i, m in enumerate(chat) if m["role"] == "user"]
    if len(starts) <= turns:
        return list(chat)
    return chat[starts[-turns] :]


def history_as_text(messages: list[dict[str, str]]) -> str:
    """Turns as ``role: content`` lines, for prompts that show history as context."""
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


def stream_idle_timeout(ctx: NodeContext, spec: Any) -> float:
    """Seconds a streamed reply of this node may stay silent before the call fails as stalled.

    The node's ``stream_idle_timeout``, else the registry's value for ``spec`` (the model's,
    else its provider's, else 60), never more than the node's ``timeout``: a stall
    detected after the attempt's own deadline would never be reported as one.
    """
    config = getattr(ctx.node, "config", None)
    value = getattr(config, "stream_idle_timeout", None)
    if value is None:
        value = registry_of(ctx).stream_idle_timeout(spec)
    node_timeout = getattr(ctx.node, "timeout", None)
    if node_timeout is not None:
        value = min(value, float(node_timeout))
    return float(value)


def warn(ctx: NodeContext, code: str, message: str, **details: Any) -> None:
    """Record a warning on this node run (``data.warnings``: ``{code, message, details}``) and
    emit it as a ``node_warning`` event, so a degraded result (a classifier fallback, ...)
    is visible where the run is watched, not only in the stored record."""
    from schemas.events import NodeWarning

    ctx.node_run.data.setdefault("warnings", []).append(warning_entry(code, message, details))
    ctx._emit(
        NodeWarning,
        node_id=ctx.node_id,
        node_run_id=ctx.node_run.id,
        attempt=ctx.node_run.attempts,
        kind=ctx.node.type,
        code=code,
        message=message,
        details=details,
    )


def add_usage(ctx: NodeContext, usage: Usage) -> Usage:
    """Add one call's usage to ``ctx.node_run.usage`` (calls priced one by one, then summed)."""
    from .call import sum_usage

    current = ctx.node_run.usage
    ctx.node_run.usage = usage if current is None else sum_usage([current, usage])
    return ctx.node_run.usage


def format_quote(value: Any) -> str:
    """Knowledge text from the ``quote`` value.

    - null / ``""`` / ``[]``: ``""`` (no quote).
    - a string: itself (a retrieval node's ``quote`` is already numbered with sources).
    - an array (:func:`nodes.knowledge.quotes.quote_items`: nested arrays flattened, a
      chunk repeated by two searches once): items numbered ``[1] ...`` and separated by a
      blank line; a retrieval chunk as ``[n] source: <name>`` then its text; another item
      is a string, or an object read as ``content`` / ``text`` / ``q`` + ``a`` (in that
      order of preference), else its JSON.
    - anything else: its JSON.
    """
    from ..knowledge.quotes import quote_items, render_items

    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return render_items(quote_items(value))
    return json.dumps(value, ensure_ascii=False)


# ==================================================================== chat node


@dataclass(slots=True)
class Received:
    """What a call streamed so far (answer and reasoning deltas) and, after a failure, the
    usage recorded for it."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    usage: Usage | None = None


@dataclass(slots=True)
class ChatTurn:
    """One answered question: what was sent and what came back."""

    question: str
    answer: str
    reasoning: str
    usage: Usage
    messages: list[dict[str, Any]]
    quote_role: str | None
    finish_reason: str | None
    request: dict[str, Any]


class ChatNode(NodeExecutor[ChatConfig], kind="chat"):
    """Answers the rendered ``user_prompt`` with one streamed model call (module docstring)."""

    def _quote(self, ctx: NodeContext) -> tuple[str, list[Any]]:
        """(quote text, its numbered items for citations). A reference to a retrieval
        node's ``quote`` text is read with that node's ``chunks`` (same numbering)."""
        from ..knowledge.quotes import quote_items

        value = ctx.resolve(self.config.quote, record_as="quote")
        items = quote_items(value)
        ref = self.config.quote
        if isinstance(value, str) and isinstance(ref, Ref) and ref.ref.endswith(".quote"):
            source = ctx.state.node_runs.get(ref.ref.rsplit(".", 1)[0])
            chunks = source.outputs.get("chunks") if source is not None and source.outputs else None
            if isinstance(chunks, list):
                items = quote_items(chunks)
        return format_quote(value), items

    def _quote_text(self, ctx: NodeContext) -> str:
        return self._quote(ctx)[0]

    def _quote_prompt(self, ctx: NodeContext, question: str, quote_text: str) -> tuple[str, str | None, bool]:
        """(rendered quote prompt, role it goes to, whether it holds the question).

        ``("", None, False)`` when there is no quote text.
        """
        from ..knowledge.quotes import quote_role

        cfg = self.config
        if not quote_text.strip():
            return "", None, False
        template = (
            cfg.quote_template if cfg.quote_template is not None else DEFAULT_QUOTE_TEMPLATES[cfg.quote_role]
        )
        names = template_names(template)
        role = quote_role(cfg.quote_role, template, names)
        rendered = ctx.render(
            template, field="config.quote_template", extra={"quote": quote_text, "question": question}
        )
        if (
            not rendered.strip()
        ):  # quote_template "" : the quote is only used where a template names {{ quote }}
            return "", None, False
        return rendered, role, "question" in names

    def build_messages(
        self,
        ctx: NodeContext,
        question: str,
        spec: Any,
        max_tokens: int,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """The request messages for ``question`` (system, fitted history, user) and the quote role."""
        from .call import fit_messages

        cfg = self.config
        quote_text = self._quote_text(ctx)
        quote_prompt, quote_role, holds_question = self._quote_prompt(ctx, question, quote_text)
        node_prompt = (
            ctx.render(
                cfg.system_prompt,
                field="config.system_prompt",
                extra={"quote": quote_text, "question": question},
            )
            if cfg.system_prompt
            else ""
        )
        parts = [spec.default_system_prompt, node_prompt, quote_prompt if quote_role == "system" else ""]
        system = SYSTEM_SEPARATOR.join(p for p in parts if p and p.strip())
        if quote_role == "user":
            user_content = quote_prompt if holds_question else f"{quote_prompt}\n\n{question}"
        else:
            user_content = question
        history = recent_turns(resolve_history(ctx, cfg), cfg.history)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        examples = self._examples(ctx, quote_text, question)
        pinned = range(len(messages), len(messages) + len(examples))
        messages += examples + history + [{"role": "user", "content": user_content}]
        return fit_messages(
            messages, max_input_tokens=spec.max_context - max_tokens, node_id=ctx.node_id, pinned=pinned
        ), quote_role

    def _examples(self, ctx: NodeContext, quote_text: str, question: str) -> list[dict[str, Any]]:
        """The prompt's fixed turns, rendered (``quote`` and ``question`` as in the system prompt)."""
        extra = {"quote": quote_text, "question": question}
        return [
            {
                "role": turn.role,
                "content": ctx.render(turn.text, field=f"config.examples[{i}].text", extra=extra)
                if turn.text
                else "",
            }
            for i, turn in enumerate(self.config.examples)
        ]

    async def answer(
        self,
        ctx: NodeContext,
        question: str,
        *,
        stream: bool = False,
        stream_reasoning: bool = False,
        received: Received | None = None,
    ) -> ChatTurn:
        """Ask ``question`` with this node's configuration; the usage is added to ``ctx.node_run.usage``.

        ``received`` collects the streamed text and reasoning as they arrive (whether or
        not they are streamed to the user). When the call fails after some of the reply
        arrived - the stream stalled, dropped or reported an error, or the node timed out
        or was cancelled - the tokens were spent: their usage (the provider's count when
        the call had one, else an estimate) is still added to ``ctx.node_run.usage`` and
        ``received`` keeps the partial text, so the caller can keep what was produced.

        Raises:
            NodeFailed: unknown model, bad history; ``LLMError`` subclasses for provider
                failures (they name the node).
        """
        from .call import LLMError, LLMRequest, call_llm, estimate_usage

        cfg = self.config
        spec = model_spec(ctx, cfg.model)
        temperature, max_tokens = sampling(cfg, spec, None)
        messages, quote_role = self.build_messages(ctx, question, spec, max_tokens)
        # what the model gets, for the trace, kept before the call so a failed call shows it
        # too (capped, secrets masked: nodes/llm/sent_messages.py)
        ctx.node_run.data["sent"] = sent_record(messages, deployment_secrets(ctx.deps.settings.environ()))
        request = LLMRequest(cfg.model, messages, temperature=temperature, max_tokens=max_tokens)
        got = received if received is not None else Received()
        got.text.clear()
        got.reasoning.clear()

        def on_answer(text: str) -> None:
            got.text.append(text)
            if stream:
                ctx.delta(text, "answer")

        def on_reasoning(text: str) -> None:
            got.reasoning.append(text)
            if stream_reasoning:
                ctx.delta(text, "reasoning")

        started = time.perf_counter()
        try:
            response = await call_llm(
                request,
                registry=registry_of(ctx),
                on_answer=on_answer,
                on_reasoning=on_reasoning,
                cancel=ctx.cancel,
                node_id=ctx.node_id,
                idle_timeout=stream_idle_timeout(ctx, spec),
            )
        except BaseException as exc:
            usage = exc.usage if isinstance(exc, LLMError) else None
            if usage is None and (got.text or got.reasoning):  # cut by a timeout or a cancel mid-stream
                usage = estimate_usage(
                    spec,
                    messages,
                    "".join(got.text),
                    "".join(got.reasoning),
                    latency_ms=(time.perf_counter() - started) * 1000.0,
                    max_tokens=max_tokens,
                )
            if usage is not None:
                got.usage = add_usage(ctx, usage)
            raise
        add_usage(ctx, response.usage)
        return ChatTurn(
            question,
            response.text or "",
            response.reasoning or "",
            response.usage,
            messages,
            quote_role,
            response.finish_reason,
            response.request,
        )

    @staticmethod
    def _keep_partial(ctx: NodeContext, received: Received, error: BaseException) -> None:
        """A failed call keeps what it produced: the partial ``answer`` / ``reasoning`` and the
        node's usage become the node run's outputs (the scheduler records a failed node's
        outputs as they are), and ``data.chat.partial`` says how the reply ended. Nothing
        is recorded when nothing arrived."""
        if not (received.text or received.reasoning or received.usage is not None):
            return
        usage = ctx.node_run.usage
        answer, reasoning = "".join(received.text), "".join(received.reasoning)
        ctx.node_run.outputs = {
            "answer": answer,
            "reasoning": reasoning,
            "usage": usage.model_dump() if usage is not None else None,
        }
        reason = getattr(error, "reason", None) or (
            "cancelled" if isinstance(error, asyncio.CancelledError) else type(error).__name__
        )
        ctx.node_run.data.setdefault("chat", {})["partial"] = PartialReply(
            answer_chars=len(answer),
            reasoning_chars=len(reasoning),
            ended_by=reason,
            answer=answer,
            reasoning=reasoning,
        )

    def as_tool(self, ctx: NodeContext) -> Callable[[str], Awaitable[str]]:
        """``async (question) -> answer text`` for an agent loop running in ``ctx`` (no streaming)."""

        async def ask(question: str) -> str:
            return (await self.answer(ctx, question)).answer

        ask.__name__ = f"chat_{ctx.node_id}"
        ask.__doc__ = (
            self.node.description or f"Ask the chat node {self.node.id!r} a question; returns its answer."
        )
        return ask

    async def run(self, ctx: NodeContext) -> NodeResult:
        cfg = self.config
        question = render_text(
            ctx,
            cfg.user_prompt,
            "user_prompt",
            extra={"quote": self._quote_text(ctx), "question": ctx.state.sys.get("query", "")},
        )
        received = Received()
        try:
            turn = await self.answer(
                ctx, question, stream=cfg.stream, stream_reasoning=cfg.stream_reasoning, received=received
            )
        except BaseException as exc:
            self._keep_partial(ctx, received, exc)
            raise
        source = resolve_history(ctx, cfg)
        history = source + [
            {"role": "user", "content": question},
            {"role": "assistant", "content": turn.answer},
        ]
        citations, cited = self._citations(ctx, turn.answer)
        ctx.node_run.data["chat"] = ChatRecord(
            quote_role=turn.quote_role,
            messages=len(turn.messages),
            history_messages=sum(1 for m in turn.messages[:-1] if m["role"] != "system") - len(cfg.examples),
            finish_reason=turn.finish_reason,
            cited=cited,
        )
        usage = ctx.node_run.usage or turn.usage
        return NodeResult(
            {
                "answer": turn.answer,
                "reasoning": turn.reasoning,
                "history": history,
                "usage": usage.model_dump(),
                "citations": citations,
            }
        )

    def _citations(self, ctx: NodeContext, answer: str) -> tuple[list[dict[str, Any]], list[str]]:
        """(the ``citations`` output, the ids the answer cited): see
        :func:`nodes.knowledge.quotes.answer_citations` - the cited quote items, or all of
        them when the answer cites none (``cited`` is then empty)."""
        from ..knowledge.quotes import answer_citations

        items = self._quote(ctx)[1]
        pieces, was_cited = answer_citations(answer, items)
        return [p.model_dump() for p in pieces], [p.citation_id for p in pieces] if was_cited else []
