"""Simplified Chinese (``zh-CN``) help of the config fields: the text the config form shows
under a field, keyed by the field's English help (the first paragraph of its schema
``description``, whitespace collapsed, ``\u0060\u0060`` removed: what the canvas shows in
English), since one property name can mean slightly different things in different
kinds (``history``, ``timeout``, ``stream``). ``tests/nodes/test_help_zh.py`` checks
that every description of the built-in catalog has an entry here, so a new field
cannot ship with English help in the Chinese UI.
"""

from __future__ import annotations

import re

__all__ = ["HELP_ZH_CN", "help_key"]


def help_key(description: str) -> str:
    """The English help a description shows (its first paragraph, whitespace collapsed,
    double backquotes removed): the key of :data:`HELP_ZH_CN`."""
    first = re.split(r"\n\s*\n", description)[0]
    return re.sub(r"\s+", " ", first).replace("``", "")


HELP_ZH_CN: dict[str, str] = {
    "risk gate opt-out: true, or names of write tools that run without a person's confirmation": "关闭写操作确认：true，或无需人工确认即可运行的写工具名称",
    "stdio server: its arguments": "stdio 服务器：启动参数",
    "Jinja2 template, e.g. {{ inputs.api_base }}": "Jinja2 模板，例如 {{ inputs.api_base }}",
    "defines main(**inputs) (Python) / main(inputs) (JavaScript)": "定义 main(**inputs)（Python）或 main(inputs)（JavaScript）",
    "stdio server: the program to start": "stdio 服务器：要启动的程序",
    "seconds to connect and list the tools": "连接并列出工具的时限（秒）",
    "published version to run (default: the published one)": "要运行的已发布版本（默认：当前发布的版本）",
    "searches of the tenant's datasets": "在本租户的知识库中检索",
    "ids of the tenant's datasets to search": "要检索的本租户知识库 ID",
    "handle taken with default_output (default: first)": "使用默认输出时走的分支（默认：第一个）",
    "Jinja2 template shown above the form": "显示在表单上方的 Jinja2 模板",
    "Jinja2 template shown to the person": "展示给用户的 Jinja2 模板",
    "default: names the datasets searched": "默认：列出所检索的知识库",
    "default: the workflow's description or name": "默认：该工作流的描述或名称",
    "stdio server: environment variables; values may hold {{ env.NAME }} and {{secret:NAME}} references": "stdio 服务器：环境变量；值中可使用 {{ env.NAME }}（工作流的环境变量）和 {{secret:NAME}} 引用",
    "taken when the reply matches no category (default: the last)": "回复不属于任何类别时走的分支（默认：最后一个）",
    'a file value or an array of them, e.g. {"ref": "inputs.report"}': '一个文件值或文件数组，例如 {"ref": "inputs.report"}',
    "conditions on document metadata (all must hold)": "文档元数据上的筛选条件（需全部满足）",
    "hybrid merge: reciprocal rank fusion or weighted normalised scores": "混合检索的合并方式：倒数排名融合或归一化加权分数",
    "sent with every request; values may hold {{ env.NAME }} and {{secret:NAME}} references (credentials must)": "每次请求都会发送；值中可使用 {{ env.NAME }}（工作流的环境变量）和 {{secret:NAME}} 引用（凭据必须如此）",
    "templates sent on every call (credentials)": "每次调用都会发送的模板（凭据）",
    "past turns of history_source put in the prompt": "放入提示词的 history_source 历史轮数",
    "past turns shown to the model as context": "作为上下文提供给模型的历史轮数",
    "past turns used to resolve the question": "用于理解问题的历史轮数",
    "array of {role, content} messages, oldest first": "由 {role, content} 消息组成的数组，最早的在前",
    "semantics fastgpt: input name -> type it is converted to": "fastgpt 语义：输入名称 -> 转换后的类型",
    "extra background for the model (Jinja2 template)": "提供给模型的补充背景（Jinja2 模板）",
    "extra guidance for the model (Jinja2 template)": "提供给模型的补充指引（Jinja2 模板）",
    "required with code": "填写代码时必填",
    "chat model of the relevance pass": "相关性判断所用的对话模型",
    "most items accepted (also limited per run)": "最多接受的项数（每次运行也有上限）",
    "round limit when this node is the entry of a loop drawn with a back-edge": "此节点作为回连循环的入口时的轮次上限",
    "cap on the returned JSON and on printed output": "返回的 JSON 和打印输出的大小上限",
    "token budget of the quote; 0: none": "引用内容的 token 预算；0 表示不限",
    "output token cap; None: the model's max_output_tokens": "输出 token 上限；留空则使用模型的 max_output_tokens",
    "MCP servers whose tools are offered": "提供工具的 MCP 服务器",
    "memory limit in MiB": "内存上限（MiB）",
    "seconds; None: no expiry": "秒；留空表示不过期",
    "model name in the model registry": "模型列表中的模型名称",
    "registry name; None: the agent's model": "模型列表中的名称；留空则使用智能体的模型",
    "default: the workflow id": "默认：工作流 ID",
    "identifier used in templates and code": "在模板和代码中使用的标识符",
    "label shown to the model": "展示给模型的名称",
    "output name (any key without both quote kinds)": "输出名称（任意键名，但不能同时包含单引号和双引号）",
    "the builtin tool, e.g. current_time": "内置工具，例如 current_time",
    "the key main() receives the value under": "main() 接收该值时使用的键名",
    "the server's label in messages and records": "该服务器在消息和记录中的名称",
    "id of a body root node (parent = this node, no incoming edge)": "循环体中根节点的 ID（父节点为本节点，且没有输入连线）",
    "OpenAPI-style document: one tool per operation": "OpenAPI 风格的文档：每个操作对应一个工具",
    "the node kind in the source file, e.g. datasetSearchNode": "源文件中的节点类型，例如 datasetSearchNode",
    "output name -> JSONPath over the parsed response": "输出名称 -> 在解析后的响应上使用的 JSONPath",
    "id of the loop/iteration node whose body holds this node": "包含此节点的循环或批量执行节点的 ID",
    "appended to base_url; {name} segments are path parameters": "追加在 base_url 之后；{name} 部分为路径参数",
    "put before each tool name": "加在每个工具名称之前",
    "reference to an array of extra queries (e.g. a query extension's queries)": "引用一个额外查询数组（例如问题优化节点的 queries）",
    "template or reference": "模板或变量引用",
    "the question: template or reference": "问题：模板或变量引用",
    "knowledge text: string, array of strings or of {content|q/a|text}, or a retrieval node's chunks / quote": "知识文本：字符串、字符串数组或 {content|q/a|text} 数组，或知识库搜索节点的 chunks / quote",
    "Jinja2 with quote/question; None: built-in per role": "使用 quote/question 的 Jinja2 模板；留空则按角色使用内置模板",
    "treat a 4xx/5xx status as a node error": "把 4xx/5xx 状态码视为节点错误",
    "why it was not converted": "未能转换的原因",
    "node_id.output[.path] | inputs.NAME | sys.NAME | vars.NAME | conversation.NAME": "node_id.output[.path] | inputs.NAME | sys.NAME | vars.NAME | conversation.NAME",
    "chat model of the relevance pass; None: no pass": "相关性判断所用的对话模型；留空则不判断",
    "0: no loop detection": "0 表示不检测重复循环",
    "{required, schema} or the OpenAPI {required, content: {application/json: {schema}}} form": "{required, schema}，或 OpenAPI 的 {required, content: {application/json: {schema}}} 形式",
    "a rerank model and/or an LLM relevance pass": "重排模型和/或由大模型判断相关性",
    "reference / object with references / Jinja2 template; None: the last node's outputs as JSON": "变量引用、含引用的对象或 Jinja2 模板；留空则返回最后一个节点输出的 JSON",
    "seconds between attempts": "两次尝试之间的间隔（秒）",
    "None: read for GET/HEAD/OPTIONS, else write": "留空：GET/HEAD/OPTIONS 视为读操作，其余视为写操作",
    "minimum semantic similarity (or rerank / weighted score)": "最低语义相似度（或重排 / 加权分数）",
    "weighted fusion: the semantic share": "加权融合：语义检索所占比重",
    "strict typing, or FastGPT's (input conversion, unchecked outputs, globals)": "严格类型，或 FastGPT 的语义（输入转换、不检查输出、全局变量）",
    "send the accepted final answer as a node_delta": "把确认后的最终回答作为 node_delta 发送",
    "stream answer deltas (native tool calling only)": "流式输出回答（仅限原生工具调用）",
    "stream answer deltas as node_delta (channel answer)": "以 node_delta 流式输出回答（answer 通道）",
    "seconds a streamed reply may stay silent; None: the model's (registry); bounded by the node's timeout": "流式回复允许静默的秒数；留空则使用模型列表中的设置；不超过节点的超时",
    "stream reasoning deltas (channel reasoning)": "流式输出推理过程（reasoning 通道）",
    "Jinja2 template": "Jinja2 模板",
    "None: the kind's default": "留空则使用该节点类型的默认值",
    "text to extract from: template or reference": "要从中提取的文本：模板或变量引用",
    "seconds per attempt": "每次尝试的时限（秒）",
    "seconds per call; None: the node's": "每次调用的时限（秒）；留空则使用节点的超时",
    "seconds, per request": "每次请求的时限（秒）",
    "wall time in seconds": "运行时限（秒）",
    "a builtin tool run instead of code (imported Dify tool nodes)": "代替代码运行的内置工具（导入的 Dify 工具节点）",
    "0: no cap": "0 表示不限",
    "the tools offered; None: every tool it lists": "提供的工具；留空则提供它列出的所有工具",
    "most chunks returned": "最多返回的分段数",
    "coerce both operands to this type before comparing": "比较前把两边的值都转换为此类型",
    "declared type; checked against the reference": "声明的类型；会与引用的值核对",
    "Streamable HTTP endpoint, e.g. https://mcp.example.com/mcp": "Streamable HTTP 端点，例如 https://mcp.example.com/mcp",
    "the task: template or reference": "任务：模板或变量引用",
    "the user's message: template or reference": "用户消息：模板或变量引用",
    # the descriptions of the schemas fields refer to ($defs: a case, a tool, an enum...),
    # shown when the field itself has none
    "A binding whose name is an output name (:data:`OUTPUT_NAME`), not an identifier: the End node's outputs are "
    'read by key (run.outputs["1"], {"ref": "end[\'1\']"}), never as template or code names.': '名称为输出名（不必是标识符）的绑定：结束节点的输出按键名读取（run.outputs["1"]、{"ref": "end[\'1\']"}），'
    "不会作为模板或代码中的变量名",
    "Declared type of a global input, node output or node input.": "全局输入、节点输出或节点输入的声明类型",
    'A structured reference in a node config: {"ref": "node_id.output[0].name"}.': '节点配置中的结构化引用：{"ref": "node_id.output[0].name"}',
    "A class of question. id is stable (the output handle and what the model answers).": "问题的一个类别；id 固定不变（它是输出分支，也是模型回答的内容）",
    "One field to extract. enum (string/number/boolean only) lists the allowed values.": "要提取的一个字段；enum（仅限字符串、数字、布尔）列出允许的取值",
    "How hybrid search merges its recall lists: reciprocal rank fusion (FastGPT) or a weighted sum of normalised "
    "scores (Dify).": "混合检索如何合并召回结果：倒数排名融合（FastGPT）或归一化分数加权求和（Dify）",
    "One condition on a document's metadata; a search's filters all hold (AND).": "文档元数据上的一个条件；检索的所有筛选条件需同时满足（与）",
    "Reorder the merged hits: with a rerank model of the registry (an OpenAI-, Jina- or Cohere-style /v1/rerank "
    "endpoint), or llm: a chat model that keeps only the chunks relevant to the question.": "对合并后的结果重新排序：使用模型列表中的重排模型（OpenAI、Jina 或 Cohere 风格的 /v1/rerank 接口），"
    "或 llm：由对话模型只保留与问题相关的分段",
    "A builtin tool offered to the model (:mod:`nodes.agent.builtin_tools`): account-free utilities (time, JSON "
    "processing, arithmetic, regular expressions) run in-process, risk read.": "提供给模型的内置工具：无需账号的实用工具（时间、JSON 处理、计算、正则表达式），在进程内运行，视为读操作",
    "A fixed message of the prompt (a few-shot example): role and text (Jinja2, rendered like the system "
    "prompt). Part of the prompt, not of the conversation: never dropped to fit the context, never added to "
    "the history output.": "提示词中的固定消息（少样本示例）：角色和文本（Jinja2，与系统提示词一样渲染）。"
    "属于提示词而非对话：不会为适应上下文窗口而被丢弃，也不会加入 history 输出",
    "fixed turns after the system prompt, before the history": "系统提示词之后、聊天记录之前的固定对话轮次",
    "The tenant's datasets as a search tool: the model writes query, the tool answers the chunks found as a "
    "numbered quote with their sources (the knowledge retrieval node's search options). relevance_model: a chat "
    "model that keeps only the chunks relevant to the query (an LLM pass before the model sees them). Risk read.": "把本租户的知识库作为检索工具：模型给出查询，工具返回带编号和来源的分段（检索选项同知识库搜索节点）。"
    "relevance_model：在模型看到结果前，由对话模型只保留与查询相关的分段。视为读操作",
    "A tool that runs a body root node and its descendants (module docstring).": "运行循环体中一个根节点及其后续节点的工具",
    "An OpenAPI-style operation called through the guarded HTTP client.": "通过受保护的 HTTP 客户端调用的 OpenAPI 风格操作",
    "An OpenAPI parameter object (in: path / query / header).": "OpenAPI 参数对象（in：path / query / header）",
    "A Model Context Protocol server whose tools the model may call.": "模型可以调用其工具的 MCP（模型上下文协议）服务器",
    "The stop tool: calling it ends the loop after the round (the tool itself does nothing).": "停止工具：调用后在本轮结束时退出循环（工具本身不做任何事）",
    "One parameter of a graph tool; items is the JSON Schema of an array's items.": "图工具的一个参数；items 是数组元素的 JSON Schema",
    "Another workflow of the same tenant, by id, as a tool (run as a child run): its published version, or version when pinned.": "把同一租户的另一个工作流（按 ID）作为工具，以子运行的方式执行：运行其已发布版本，或指定的版本",
    'A sub-agent that reads the user\'s uploaded files (file values {"name", "path"|"url"}).': '读取用户上传文件的子智能体（文件值 {"name", "path"|"url"}）',
    "A sub-agent that is one model call (no loop, no tools): the task in, the text out.": "只调用一次模型的子智能体（无循环、无工具）：输入任务，输出文本",
    "One branch of an if-else: its id is the output handle taken when it matches.": "条件分支的一个分支：其 id 是匹配时走的输出分支",
    "left <operator> right. left and right are literals or references.": "left <运算符> right；left 和 right 为字面值或变量引用",
    "Comparison operators of an if-else condition.": "条件分支中条件的比较运算符",
    'A named, typed input of a node: {"name", "value", "type", "required", "default"}.': '节点的一个具名、带类型的输入：{"name", "value", "type", "required", "default"}',
    "After each round: variable = value (resolved in the round's scope).": "每轮结束后：变量 = 值（在本轮的作用域中求值）",
    "A bound input of the code. The name is any non-empty key: Python receives the inputs as keyword arguments "
    '(main(**inputs): def main(数据) or def main(**kw) reading kw["a-b"]), JavaScript as one object '
    '(inputs["a-b"]), so imported keys such as 数据 or a-b arrive unchanged.': "代码的一个输入。名称可以是任意非空键名：Python 以关键字参数接收（main(**inputs)：def main(数据) 或 "
    'def main(**kw) 读取 kw["a-b"]），JavaScript 以一个对象接收（inputs["a-b"]），因此导入的 数据、a-b '
    "这类键名保持不变",
    "One declared output of the code: main must return this key with a value of type.": "代码声明的一个输出：main 必须以该类型的值返回此键",
    "One update of a run variable (NAME, declared in workflow.variables) or of a conversation variable "
    "(conversation.NAME, declared in workflow.conversation_variables, kept by the chat after a successful turn).": "对一个运行变量（NAME，在 workflow.variables 中声明）或一个会话变量（conversation.NAME，在 "
    "workflow.conversation_variables 中声明，对话轮次成功后由该对话保留）的一次更新",
    "run variable NAME, or conversation.NAME": "运行变量 NAME，或 conversation.NAME",
    "Request body. json may hold references at any depth; strings in form and raw are templates.": "请求体；json 中任意层级都可以包含变量引用，form 和 raw 中的字符串是模板",
    "One choice of a user select; its id is the output handle taken when chosen.": "用户选择的一个选项；其 id 是选中时走的输出分支",
    "A typed form field; enum restricts the accepted values.": "带类型的表单字段；enum 限定可接受的取值",
    'What a node failure does (after its retries), like Dify\'s "error strategy".': "节点失败（重试之后）时的处理方式，相当于 Dify 的“异常处理”",
    "Canvas position in pixels.": "画布上的位置（像素）",
}
