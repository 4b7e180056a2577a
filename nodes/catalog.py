"""The built-in node catalog: the one place that lists Flowloom's node kinds.

Each entry pairs a kind's config model (``schemas/``) with its executor (here, in
``nodes/``, named by import path so checking a workflow does not import the model
SDKs) and the traits the engine acts on. The config models of ``start``, ``answer``,
``end`` and ``template`` are classes (``schemas.nodes``, which the workflow model imports
anyway); the others are named by import path too, so a command that checks or runs a
workflow does not create the models of the kinds it does not use (``schemas.nodes_flow``
for the other plumbing kinds, and the LLM, agent, code and knowledge modules). The
compiler, the JSON Schema, the CLI and the API all read this catalog; nothing else lists
kinds.
"""

from __future__ import annotations

import dataclasses
import functools

from engine.catalog import KindSpec, NodeCatalog
from nodes.help_zh import HELP_ZH_CN
from nodes.labels_zh import FIELD_ZH_CN, KIND_ZH_CN, VALUE_ZH_CN
from schemas import nodes as plumbing

__all__ = ["BUILTIN_KINDS", "FIELD_HELP", "FIELD_LABELS", "VALUE_LABELS", "builtin_catalog"]

#: Every built-in kind, in the order the canvas palette shows them (labels added below).
_KINDS: tuple[KindSpec, ...] = (
    KindSpec(
        "start",
        plumbing.StartConfig,
        "nodes.start:StartNode",
        entry=True,
        reads_only=True,
        pure=True,
        icon="play",
        category="flow",
    ),
    KindSpec(
        "answer",
        plumbing.AnswerConfig,
        "nodes.start:AnswerNode",
        collects="answer",
        reads_only=True,
        pure=True,
        icon="message",
        category="flow",
    ),
    KindSpec(
        "end",
        plumbing.EndConfig,
        "nodes.start:EndNode",
        collects="outputs",
        reads_only=True,
        pure=True,
        icon="flag",
        category="flow",
    ),
    KindSpec(
        "chat",
        "schemas.nodes_llm:ChatConfig",
        "nodes.llm.chat:ChatNode",
        streams="answer",
        reads_only=True,
        icon="sparkles",
        category="llm",
    ),
    KindSpec(
        "classify_question",
        "schemas.nodes_llm:ClassifyQuestionConfig",
        "nodes.llm.classify:ClassifyQuestionNode",
        reads_only=True,
        icon="split",
        category="llm",
    ),
    KindSpec(
        "extract_fields",
        "schemas.nodes_llm:ExtractFieldsConfig",
        "nodes.llm.extract:ExtractFieldsNode",
        reads_only=True,
        icon="list",
        category="llm",
    ),
    KindSpec(
        "query_extension",
        "schemas.nodes_llm:QueryExtensionConfig",
        "nodes.llm.query_extension:QueryExtensionNode",
        reads_only=True,
        icon="search",
        category="llm",
    ),
    KindSpec(
        "knowledge_retrieval",
        "schemas.nodes_knowledge:KnowledgeRetrievalConfig",
        "nodes.knowledge.retrieval_node:KnowledgeRetrievalNode",
        reads_only=True,
        icon="search",
        category="llm",
    ),
    KindSpec(
        "tool_call",
        "schemas.nodes_agent:ToolCallConfig",
        "nodes.agent.tool_call:ToolCallNode",
        container=True,
        streams="answer",
        icon="wrench",
        category="agent",
    ),
    KindSpec(
        "agent",
        "schemas.nodes_agent:AgentConfig",
        "nodes.agent.node:AgentNode",
        container=True,
        streams="answer",
        interactive=True,
        icon="bot",
        category="agent",
    ),
    KindSpec(
        "if_else",
        "schemas.nodes_flow:IfElseConfig",
        "nodes.if_else:IfElseNode",
        reads_only=True,
        pure=True,
        icon="git-branch",
        category="logic",
    ),
    KindSpec(
        "iteration",
        "schemas.nodes_flow:IterationConfig",
        "nodes.loop:IterationNode",
        container=True,
        icon="repeat",
        category="logic",
    ),
    KindSpec(
        "loop",
        "schemas.nodes_flow:LoopConfig",
        "nodes.loop:LoopNode",
        container=True,
        icon="rotate",
        category="logic",
    ),
    KindSpec(
        "loop_break",
        "schemas.nodes_flow:LoopBreakConfig",
        "nodes.loop:LoopBreakNode",
        inside=frozenset({"loop"}),
        reads_only=True,
        pure=True,
        icon="square",
        category="logic",
    ),
    KindSpec(
        "template",
        plumbing.TemplateConfig,
        "nodes.template:TemplateNode",
        reads_only=True,
        pure=True,
        icon="braces",
        category="transform",
    ),
    KindSpec(
        "code",
        "schemas.nodes_code:CodeConfig",
        "nodes.sandbox.code:CodeNode",
        reads_only=True,
        icon="code",
        category="transform",
    ),
    KindSpec(
        "variable_update",
        "schemas.nodes_flow:VariableUpdateConfig",
        "nodes.variables:VariableUpdateNode",
        pure=True,
        icon="pencil",
        category="transform",
    ),
    KindSpec(
        "variable_aggregator",
        "schemas.nodes_flow:VariableAggregatorConfig",
        "nodes.variables:VariableAggregatorNode",
        reads_only=True,
        pure=True,
        icon="merge",
        category="transform",
    ),
    KindSpec(
        "http_request",
        "schemas.nodes_flow:HttpRequestConfig",
        "nodes.http.request:HttpRequestNode",
        reads_only=True,
        icon="globe",
        category="integration",
    ),
    KindSpec(
        "user_select",
        "schemas.nodes_flow:UserSelectConfig",
        "nodes.interactive:UserSelectNode",
        interactive=True,
        icon="pointer",
        category="human",
    ),
    KindSpec(
        "form_input",
        "schemas.nodes_flow:FormInputConfig",
        "nodes.interactive:FormInputNode",
        interactive=True,
        icon="form",
        category="human",
    ),
    KindSpec(
        "unsupported",
        "schemas.nodes_flow:UnsupportedConfig",
        "nodes.unsupported:UnsupportedNode",
        reads_only=True,
        pure=True,
        icon="alert",
        category="imported",
    ),
)

#: Every built-in kind with its labels in other languages, in palette order.
BUILTIN_KINDS: tuple[KindSpec, ...] = tuple(
    dataclasses.replace(spec, labels=(("zh-CN", *KIND_ZH_CN[spec.kind]),)) for spec in _KINDS
)

#: Config field titles in other languages: language tag -> property name -> title. Keyed
#: by property name rather than by kind (a name means the same in every kind), so a kind's
#: titles are the entries its config schema uses; English is the schema's own title.
FIELD_LABELS: dict[str, dict[str, str]] = {"zh-CN": FIELD_ZH_CN}

#: Labels of enum values (what the config form's selects offer) in other languages:
#: language tag -> value -> label; English shows the value itself.
VALUE_LABELS: dict[str, dict[str, str]] = {"zh-CN": VALUE_ZH_CN}

#: Per language, the config fields' help (keyed by the English help, ``nodes.help_zh.help_key``).
FIELD_HELP: dict[str, dict[str, str]] = {"zh-CN": HELP_ZH_CN}


@functools.cache
def builtin_catalog() -> NodeCatalog:
    """The catalog of every built-in kind (built once per process)."""
    return NodeCatalog.of(*BUILTIN_KINDS)
