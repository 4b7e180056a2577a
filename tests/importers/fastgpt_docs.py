"""Small FastGPT workflows in the export format, for the kinds the corpus does not show.

Shapes follow FastGPT exports: ``nodeId``, ``flowNodeType``, ``inputs`` (``key``,
``value``, ``valueType``, ``renderTypeList``), ``outputs`` (``id``, ``key``, ``type``),
edges with ``<id>-source-<handle>`` / ``<id>-target-left`` handles.
"""

from __future__ import annotations

from typing import Any

V = "VARIABLE_NODE_ID"


def inp(key: str, value: Any = None, value_type: str = "string", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "renderTypeList": ["reference"], "valueType": value_type, "label": key}
    if value is not None:
        out["value"] = value
    out.update(extra)
    return out


def out(oid: str, key: str | None = None, value_type: str = "string", kind: str = "static") -> dict[str, Any]:
    return {"id": oid, "key": key or oid, "valueType": value_type, "type": kind, "label": key or oid}


def node(nid: str, kind: str, inputs: list[dict[str, Any]] | None = None, outputs: list[dict[str, Any]] | None = None,
         x: float = 0, y: float = 0, **extra: Any) -> dict[str, Any]:
    return {"nodeId": nid, "name": nid, "flowNodeType": kind, "position": {"x": x, "y": y}, "version": "481",
            "inputs": inputs or [], "outputs": outputs or [], **extra}


def edge(source: str, target: str, handle: str = "right") -> dict[str, Any]:
    sep = "_catch" if handle == "catch" else ""
    suffix = "right" if handle == "catch" else handle
    return {"source": source, "target": target, "sourceHandle": f"{source}-source{sep}-{suffix}",
            "targetHandle": f"{target}-target-left"}


def start(nid: str = "start") -> dict[str, Any]:
    return node(nid, "workflowStart", [inp("userChatInput")], [out("userChatInput")])


def wrap(nodes: list[dict[str, Any]], edges: list[dict[str, Any]], variables: list[dict[str, Any]] | None = None,
         name: str = "sample") -> dict[str, Any]:
    return {"name": name, "workflow": {"nodes": nodes, "edges": edges,
                                       "chatConfig": {"variables": variables or []}}}


def llm_kinds() -> dict[str, Any]:
    """start -> cfr -> contentExtract -> classifyQuestion (2 branches) -> answers."""
    return wrap([
        start(),
        node("qe", "cfr", [inp("model", "gpt-4o-mini"), inp("systemPrompt", "Topic: {{topic}}"),
                           inp("history", 4, "chatHistory"), inp("userChatInput", ["start", "userChatInput"])],
             [out("system_text")]),
        node("ex", "contentExtract", [
            inp("model", "gpt-4o-mini"), inp("description", "Extract from: {{$qe.system_text$}}"),
            inp("content", ["start", "userChatInput"]),
            inp("extractKeys", [{"key": "name", "desc": "person name", "required": True, "valueType": "string"},
                                {"key": "年龄", "desc": "age", "valueType": "number"},
                                {"key": "mood", "desc": "", "enum": "happy\nsad\n", "valueType": "string"}], "any"),
        ], [out("success", value_type="boolean"), out("fields"), out("k1", "name"), out("k2", "年龄", "number"),
            out("k3", "mood")]),
        node("cq", "classifyQuestion", [
            inp("model", "gpt-4o-mini"), inp("systemPrompt", ""), inp("history", 2, "chatHistory"),
            inp("userChatInput", ["ex", "k1"]),
            inp("agents", [{"value": "Adult", "key": "adult"}, {"value": "Child", "key": "child"}], "any"),
        ], [out("cqResult")]),
        node("a1", "answerNode", [inp("text", "{{$ex.k1$}} is {{$ex.k2$}} ({{$cq.cqResult$}}), queries "
                                              "{{$qe.system_text$}}", "any")]),
        node("a2", "answerNode", [inp("text", ["ex", "fields"], "any")]),
    ], [edge("start", "qe"), edge("qe", "ex"), edge("ex", "cq"), edge("cq", "a1", "adult"), edge("cq", "a2", "child")],
        variables=[{"key": "topic", "label": "Topic", "type": "input", "valueType": "string", "required": False,
                    "defaultValue": "people"}])


def branches() -> dict[str, Any]:
    """If / else if / else on global variables, a text editor, a variable update, user select, form."""
    return wrap([
        start(),
        node("if", "ifElseNode", [inp("ifElseList", [
            {"condition": "AND", "list": [{"variable": [V, "city"], "condition": "include", "value": "York"},
                                          {"variable": [V, "count"], "condition": "lessThan", "value": "10"}]},
            {"condition": "OR", "list": [{"variable": [V, "count"], "condition": "greaterThanOrEqualTo",
                                          "value": "100"},
                                         {"variable": ["start", "userChatInput"], "condition": "isEmpty"}]},
        ], "any")], [out("ifElseResult")]),
        node("te", "textEditor", [
            inp("system_textareaInput", "Hi {{who}} from {{city}} {{$VARIABLE_NODE_ID.count$}}: {{ not a var }} "
                                        "{% raw %} {#c#} {{unknown}} {{cTime}}"),
            inp("who", ["start", "userChatInput"]), inp("名字", "literal")]),
        node("vu", "variableUpdate", [inp("updateList", [
            {"variable": [V, "count"], "value": ["", "5"], "valueType": "number", "renderType": "input"},
            {"variable": [V, "city"], "value": ["te", "system_text"], "valueType": "string",
             "renderType": "reference"}], "any")]),
        node("done", "answerNode", [inp("text", "count={{$VARIABLE_NODE_ID.count$}} city={{city}}", "any")]),
        node("us", "userSelect", [inp("description", "Continue, {{city}}?"),
                                  inp("userSelectOptions", [{"value": "Yes please", "key": "yes"},
                                                            {"value": "No", "key": "no"}], "any")],
             [out("selectResult")]),
        node("form", "formInput", [inp("description", "Your details"), inp("userInputForms", [
            {"type": "input", "key": "email", "label": "Email", "valueType": "string", "required": True},
            {"type": "select", "key": "plan", "label": "Plan", "valueType": "string", "required": False,
             "defaultValue": "free", "list": [{"label": "Free", "value": "free"}, {"label": "Pro", "value": "pro"}]},
            {"type": "numberInput", "key": "seats", "label": "Seats", "valueType": "number", "defaultValue": 1}],
            "any")], [out("formInputResult", value_type="object"), out("email"), out("plan"),
                      out("seats", value_type="number")]),
        node("thanks", "answerNode", [inp("text", "Thanks {{$form.email$}} ({{$us.selectResult$}})", "any")]),
        node("other", "answerNode", [inp("text", "Nothing to do.", "any")]),
    ], [edge("start", "if"), edge("if", "te", "IF"), edge("te", "vu"), edge("vu", "done"),
        edge("if", "us", "ELSE IF 1"), edge("us", "form", "yes"), edge("us", "other", "no"), edge("form", "thanks"),
        edge("if", "other", "ELSE")],
        variables=[{"key": "city", "label": "City", "type": "input", "valueType": "string", "required": True},
                   {"key": "count", "label": "Count", "type": "numberInput", "valueType": "number",
                    "required": False, "defaultValue": 1}])


def http_catch(url: str = "http://127.0.0.1:9/api") -> dict[str, Any]:
    """An HTTP request with a smart JSON body and error capture, and a batch loop over its items."""
    body = '{\n  "name": "{{name}}",\n  "count": {{count}},\n  "q": "{{$start.userChatInput$}}",\n  "tags": {{tags}}\n}'
    return wrap([
        start(),
        node("http", "httpRequest468", [
            inp("system_addInputParam", None, "dynamic", renderTypeList=["addInputParam"]),
            inp("name", ["start", "userChatInput"]), inp("count", [V, "count"], "number"), inp("tags", ["mk", "tags"]),
            inp("system_httpMethod", "POST"), inp("system_httpReqUrl", url + "/{{name}}"),
            inp("system_httpHeader", [{"key": "X-Count", "type": "string", "value": "{{count}}"}], "any"),
            inp("system_httpParams", [{"key": "lang", "type": "string", "value": "en"}], "any"),
            inp("system_httpJsonBody", body, "any"), inp("system_httpTimeout", 5, "number"),
        ], [out("system_addOutputParam", kind="dynamic", value_type="dynamic"), out("httpRawResponse", value_type="any"),
            out("error", value_type="object", kind="error"), out("d1", "data.items", "arrayNumber", "dynamic")],
            catchError=True),
        node("mk", "code", [inp("system_addInputParam", None, "dynamic", renderTypeList=["addInputParam"]),
                            inp("codeType", "py"),
                            inp("code", "def main(n=2):\n    return {'tags': ['a', 'b'][:n]}\n")],
             [out("system_rawResponse", value_type="object"), out("c1", "tags", "arrayString", "dynamic")]),
        node("loop", "loop", [inp("loopInputArray", ["http", "d1"], "arrayAny"),
                              inp("childrenNodeIdList", ["ls", "inner", "le"], "any")],
             [out("loopArray", value_type="arrayAny")]),
        node("ls", "loopStart", [], [out("loopStartInput", value_type="any"),
                                     out("loopStartIndex", value_type="number")], parentNodeId="loop"),
        node("inner", "code", [inp("system_addInputParam", None, "dynamic", renderTypeList=["addInputParam"]),
                               inp("item", ["ls", "loopStartInput"], "number"),
                               inp("index", ["ls", "loopStartIndex"], "number"),
                               inp("codeType", "js"),
                               inp("code", "function main({item, index}) {\n  return {value: item * 10 + index}\n}")],
             [out("r1", "value", "number", "dynamic")], parentNodeId="loop"),
        node("le", "loopEnd", [inp("loopEndInput", ["inner", "r1"], "any")], parentNodeId="loop"),
        node("ok", "answerNode", [inp("text", "{{$loop.loopArray$}} from {{$http.httpRawResponse$}}", "any")]),
        node("err", "answerNode", [inp("text", "failed: {{$http.error$}}", "any")]),
    ], [edge("start", "mk"), edge("mk", "http"), edge("http", "loop"), edge("ls", "inner"), edge("inner", "le"),
        edge("loop", "ok"), edge("http", "err", "catch")],
        variables=[{"key": "count", "label": "Count", "type": "numberInput", "valueType": "number",
                    "defaultValue": 3}])


def plugin() -> dict[str, Any]:
    """A plugin workflow: pluginInput -> text editor -> pluginOutput."""
    return wrap([
        node("pin", "pluginInput", [inp("topic", None, "string", required=True, description="the topic"),
                                    inp("n", None, "number", defaultValue=2)],
             [out("topic"), out("n", value_type="number")]),
        node("te", "textEditor", [inp("system_textareaInput", "{{t}} x{{k}}"), inp("t", ["pin", "topic"]),
                                  inp("k", ["pin", "n"], "number")], [out("system_text")]),
        node("pout", "pluginOutput", [inp("text", ["te", "system_text"]), inp("count", ["pin", "n"], "number")]),
    ], [edge("pin", "te"), edge("te", "pout")])


def plugin_tool() -> dict[str, Any]:
    """A tool call whose tool is a plugin (unsupported) followed by a stopTool node."""
    return wrap([
        start(),
        node("tc", "tools", [inp("model", "gpt-4o-mini"), inp("userChatInput", ["start", "userChatInput"])],
             [out("answerText")]),
        node("plug", "pluginModule", [inp("city", None, "string", toolDescription="the city", required=True)],
             [out("result")], intro="weather plugin"),
        node("stop", "stopTool"),
        node("ans", "answerNode", [inp("text", "{{$tc.answerText$}}")]),
    ], [edge("start", "tc"), {"source": "tc", "target": "plug", "sourceHandle": "selectedTools",
                              "targetHandle": "selectedTools"}, edge("plug", "stop"), edge("tc", "ans")])
