"""The built-in node catalog: the one place that lists Flowloom's node kinds.

Each entry pairs a kind's config model (``schemas/``) with its executor (here, in
``nodes/``, named by import path so checking a workflow does not import the model
SDKs) and the traits the engine acts on. The compiler, the JSON Schema, the CLI and
the API all read this catalog; nothing else lists kinds.
"""

from __future__ import annotations

import dataclasses
import functools

from engine.catalog import KindSpec, NodeCatalog
from schemas import nodes as plumbing
from schemas.nodes_agent import AgentConfig, ToolCallConfig
from schemas.nodes_code import CodeConfig
from schemas.nodes_llm import ChatConfig, ClassifyQuestionConfig, ExtractFieldsConfig, QueryExtensionConfig

__all__ = ["BUILTIN_KINDS", "builtin_catalog"]

#: Titles and descriptions in Simplified Chinese (many FastGPT and Dify builders work in
#: Chinese; the terms are theirs), kind -> (title, description).
_ZH_CN: dict[str, tuple[str, str]] = {
    "start": ("开始", "工作流的入口：把工作流的全局输入作为输出提供给后续节点。"),
    "answer": ("直接回复", "向用户流式输出渲染后的模板文本；该文本也是节点的 answer 输出。"),
    "end": ("结束", "声明工作流的输出：每个绑定成为运行结果中的一个输出。"),
    "chat": ("AI 对话", "一次模型调用：系统提示词 + 历史记录 +（知识库引用）+ 用户消息。"),
    "classify_question": ("问题分类", "由模型判断问题所属的类别，并按类别选择分支。"),
    "extract_fields": ("文本内容提取", "从文本中提取带类型的字段。"),
    "query_extension": ("问题优化", "把问题改写为若干条检索查询。"),
    "tool_call": ("工具调用", "模型按轮次调用工具，直到给出回答。"),
    "agent": ("规划智能体", "带计划的工具循环：可以向用户提问，写操作前请求确认，并有停止检查。"),
    "if_else": ("条件分支", "按顺序检查各条件，走第一个满足的分支，否则走 else 分支。"),
    "iteration": ("批量执行", "对数组中的每一项运行一次循环体（可并发），并收集结果。"),
    "loop": ("循环", "重复运行循环体，直到满足退出条件、运行到退出循环节点或达到轮次上限。"),
    "loop_break": ("退出循环", "位于循环体内：运行到此节点时，本轮结束后退出循环。"),
    "template": ("模板转换", "渲染沙箱中的 Jinja2 模板；变量按名称绑定到模板中。"),
    "code": ("代码运行", "在独立的沙箱进程中运行代码的 main 函数（Python 或 JavaScript）。"),
    "variable_update": ("变量更新", "设置运行变量，并输出每个被更新变量的新值。"),
    "variable_aggregator": ("变量聚合", "输出多个分支汇合处第一个非空的值。"),
    "http_request": ("HTTP 请求", "发送 HTTP 请求；URL、请求头、查询参数和请求体都可以使用模板。"),
    "user_select": ("用户选择", "暂停运行并给出说明和选项；用户选择的选项决定分支。"),
    "form_input": ("表单输入", "暂停运行并请用户填写表单；输出每个字段以及整个表单。"),
    "unsupported": ("不支持的节点（导入）", "导入时无法转换的节点的占位：运行到这里会失败并说明原因。"),
}

#: Every built-in kind, in the order the canvas palette shows them (labels added below).
_KINDS: tuple[KindSpec, ...] = (
    KindSpec("start", plumbing.StartConfig, "nodes.start:StartNode", entry=True, reads_only=True, icon="play", category="flow"),
    KindSpec("answer", plumbing.AnswerConfig, "nodes.start:AnswerNode", collects="answer", reads_only=True, icon="message",
             category="flow"),
    KindSpec("end", plumbing.EndConfig, "nodes.start:EndNode", collects="outputs", reads_only=True, icon="flag", category="flow"),
    KindSpec("chat", ChatConfig, "nodes.chat:ChatNode", streams="answer", reads_only=True, icon="sparkles", category="llm"),
    KindSpec("classify_question", ClassifyQuestionConfig, "nodes.classify:ClassifyQuestionNode", reads_only=True, icon="split",
             category="llm"),
    KindSpec("extract_fields", ExtractFieldsConfig, "nodes.extract:ExtractFieldsNode", reads_only=True, icon="list", category="llm"),
    KindSpec("query_extension", QueryExtensionConfig, "nodes.query_extension:QueryExtensionNode", reads_only=True, icon="search",
             category="llm"),
    KindSpec("tool_call", ToolCallConfig, "nodes.tool_call:ToolCallNode", container=True, streams="answer", icon="wrench",
             category="agent"),
    KindSpec("agent", AgentConfig, "nodes.agent:AgentNode", container=True, streams="answer", interactive=True, icon="bot",
             category="agent"),
    KindSpec("if_else", plumbing.IfElseConfig, "nodes.if_else:IfElseNode", reads_only=True, icon="git-branch", category="logic"),
    KindSpec("iteration", plumbing.IterationConfig, "nodes.loop:IterationNode", container=True, icon="repeat",
             category="logic"),
    KindSpec("loop", plumbing.LoopConfig, "nodes.loop:LoopNode", container=True, icon="rotate", category="logic"),
    KindSpec("loop_break", plumbing.LoopBreakConfig, "nodes.loop:LoopBreakNode", inside=frozenset({"loop"}),
             reads_only=True, icon="square", category="logic"),
    KindSpec("template", plumbing.TemplateConfig, "nodes.template:TemplateNode", reads_only=True, icon="braces", category="transform"),
    KindSpec("code", CodeConfig, "nodes.code:CodeNode", reads_only=True, icon="code", category="transform"),
    KindSpec("variable_update", plumbing.VariableUpdateConfig, "nodes.variables:VariableUpdateNode", icon="pencil",
             category="transform"),
    KindSpec("variable_aggregator", plumbing.VariableAggregatorConfig, "nodes.variables:VariableAggregatorNode",
             reads_only=True, icon="merge", category="transform"),
    KindSpec("http_request", plumbing.HttpRequestConfig, "nodes.http_request:HttpRequestNode", reads_only=True, icon="globe",
             category="integration"),
    KindSpec("user_select", plumbing.UserSelectConfig, "nodes.interactive:UserSelectNode", interactive=True,
             icon="pointer", category="human"),
    KindSpec("form_input", plumbing.FormInputConfig, "nodes.interactive:FormInputNode", interactive=True,
             icon="form", category="human"),
    KindSpec("unsupported", plumbing.UnsupportedConfig, "nodes.unsupported:UnsupportedNode", reads_only=True, icon="alert",
             category="imported"),
)

#: Every built-in kind with its labels in other languages, in palette order.
BUILTIN_KINDS: tuple[KindSpec, ...] = tuple(
    dataclasses.replace(spec, labels=(("zh-CN", *_ZH_CN[spec.kind]),)) for spec in _KINDS)


@functools.cache
def builtin_catalog() -> NodeCatalog:
    """The catalog of every built-in kind (built once per process)."""
    return NodeCatalog.of(*BUILTIN_KINDS)
