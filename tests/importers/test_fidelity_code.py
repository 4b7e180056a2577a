"""Imported code nodes behave as at home: FastGPT's input conversion, unchecked outputs
and JavaScript globals (real sandbox); packages the sandbox lacks and globals nothing
defines are reported at import time. Native code nodes stay strictly typed.

Every document is synthetic, saved to a temporary file and imported from there.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from engine.settings import Settings
from nodes.importers import ImportFailed
from nodes.sandbox.compat import fastgpt_input
from schemas.types import VarType

from . import dify_docs as dd
from . import fastgpt_docs as fd
from .helpers import load, run

SETTINGS = Settings(code_sandbox="bwrap", allow_unsandboxed_code=False)

JS_HELPERS = """async function main({text, data, count, flag}) {
  await delay(5);
  const signed = createHmac('sha256', 'secret');
  return {b64: strToBase64(text, 'data:text/plain;base64,'), tokens: countToken('abcdefgh'),
          signed: typeof signed.sign === 'string' && /^\\d+$/.test(signed.timestamp),
          data, count, flag, wrong: 'not a number'};
}"""


def save(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def code_node(nid: str, code: str, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]],
              language: str = "js") -> dict[str, Any]:
    return fd.node(nid, "code", [fd.inp("codeType", language), fd.inp("code", code), *inputs], outputs)


def fastgpt_code_flow() -> dict[str, Any]:
    """make (returns an object and numeric text) -> use (string/number/boolean inputs,
    FastGPT globals, a mistyped and a missing output) -> answer."""
    make = code_node("make", "function main() { return {obj: {a: 1}, num: '42', yes: 'true'} }", [],
                     [fd.out("obj", value_type="object", kind="dynamic"),
                      fd.out("num", value_type="string", kind="dynamic"),
                      fd.out("yes", value_type="string", kind="dynamic")])
    use = code_node("use", JS_HELPERS, [
        fd.inp("text", "hi"), fd.inp("data", ["make", "obj"], "string"), fd.inp("count", ["make", "num"], "number"),
        fd.inp("flag", ["make", "yes"], "boolean"),
    ], [fd.out(k, value_type=t, kind="dynamic") for k, t in (
        ("b64", "string"), ("tokens", "number"), ("signed", "boolean"), ("data", "string"), ("count", "number"),
        ("flag", "boolean"), ("wrong", "number"), ("missing", "string"))])
    say = fd.node("say", "answerNode", [fd.inp("text", "{{$use.wrong$}}/{{$use.missing$}}", "any")])
    return fd.wrap([fd.start(), make, use, say], [fd.edge("start", "make"), fd.edge("make", "use"),
                                                   fd.edge("use", "say")])


async def test_fastgpt_code_semantics_in_the_sandbox(tmp_path, scripted_registry):
    result = load(save(tmp_path, fastgpt_code_flow()), models=scripted_registry)
    assert not result.errors
    use = next(n for n in result.workflow["nodes"] if n["id"] == "use")["config"]
    assert use["semantics"] == "fastgpt"
    assert use["input_types"] == {"text": "string", "data": "string", "count": "number", "flag": "boolean"}
    state, _events = await run(result, registry=scripted_registry, tmp_path=tmp_path, settings=SETTINGS)
    assert state.status == "succeeded", (state.error, {k: v.error for k, v in state.node_runs.items()})
    out = state.node_runs["use"].outputs
    assert out["b64"] == "data:text/plain;base64," + base64.b64encode(b"hi").decode()
    assert out["tokens"] == 2 and out["signed"] is True
    assert out["data"] == '{"a": 1}' and out["count"] == 42 and out["flag"] is True  # converted to valueType
    assert out["wrong"] == "not a number" and out["missing"] is None  # outputs unchecked; missing is null
    assert state.node_runs["say"].outputs["answer"] == "not a number/null"


def test_unknown_globals_are_reported_at_import(tmp_path, scripted_registry):
    code = "function main({x}) {\n  // notDefined() in a comment is fine\n  const y = helper(x);\n" \
           "  return {y: sendMail(y) + countToken(x) + parseInt('1')};\n}\nfunction helper(v) { return v }"
    doc = fd.wrap([fd.start(), code_node("c", code, [fd.inp("x", "1")], [fd.out("y", kind="dynamic")])],
                  [fd.edge("start", "c")])
    result = load(save(tmp_path, doc), models=scripted_registry)
    warnings = [i.message for i in result.report if i.node_id == "c" and i.code == "behaviour_difference"]
    assert warnings == ["the code calls sendMail, which neither it nor the sandbox defines: each call fails with "
                        "ReferenceError when it runs"]


@pytest.mark.parametrize("language, code, names", [
    ("py", "import jieba\nfrom pandas import DataFrame\nimport json, os.path\n\ndef main():\n    return {}\n",
     "'jieba', 'pandas', which are not installed in the code sandbox (it offers only the Python standard library and "
     "what the operator installs): install with `flowloom sandbox install jieba pandas`"),
    ("js", "const _ = require('lodash');\nconst fs = require('node:fs');\nfunction main() { return {} }",
     "'lodash', which is not installed in the code sandbox (it offers only Node's built-in modules and what the "
     "operator installs): install with `flowloom sandbox install --npm lodash`"),
])
def test_fastgpt_packages_the_sandbox_lacks_are_reported(tmp_path, scripted_registry, language, code, names):
    doc = fd.wrap([fd.start(), code_node("c", code, [], [], language)], [fd.edge("start", "c")])
    with pytest.raises(ImportFailed) as failed:
        load(save(tmp_path, doc), models=scripted_registry)
    issues = [(i.code, i.node_id) for i in failed.value.report if i.severity == "error"]
    assert issues == [("missing_package", "c")]
    assert f"the code imports {names}" in str(failed.value)


def test_dify_packages_the_sandbox_lacks_are_reported(tmp_path, scripted_registry):
    code = "import numpy as np\n\ndef main(x: str) -> dict:\n    return {'result': x}\n"
    doc = dd.app([dd.node("start", "start", variables=[]),
                  dd.node("c", "code", code_language="python3", code=code, variables=[],
                          outputs={"结果": {"type": "string"}}),
                  dd.node("end", "end", outputs=[{"variable": "r", "value_selector": ["c", "结果"]}])],
                 [dd.edge("start", "c"), dd.edge("c", "end")])
    with pytest.raises(ImportFailed) as failed:
        load(save(tmp_path, doc), models=scripted_registry)
    assert [(i.code, i.node_id) for i in failed.value.report if i.severity == "error"] == [("missing_package", "c")]
    assert "numpy" in str(failed.value)


async def test_dify_code_output_names_that_are_not_identifiers(tmp_path, scripted_registry):
    code = "def main() -> dict:\n    return {'结果': 'ok', 'a-b': 2}\n"
    doc = dd.app([dd.node("start", "start", variables=[]),
                  dd.node("c", "code", code_language="python3", code=code, variables=[],
                          outputs={"结果": {"type": "string"}, "a-b": {"type": "number"}}),
                  dd.node("say", "answer", answer="{{#c.结果#}} {{#c.a-b#}}"),
                  dd.node("end", "end", outputs=[{"variable": "r", "value_selector": ["c", "a-b"]}])],
                 [dd.edge("start", "c"), dd.edge("c", "say"), dd.edge("say", "end")])
    result = load(save(tmp_path, doc), models=scripted_registry)
    end = next(n for n in result.workflow["nodes"] if n["id"] == "end")
    assert end["config"]["outputs"] == [{"name": "r", "value": {"ref": "c.a-b"}}]
    state, _ = await run(result, registry=scripted_registry, tmp_path=tmp_path, settings=SETTINGS)
    assert state.status == "succeeded", state.error
    assert state.node_runs["say"].outputs["answer"] == "ok 2" and state.outputs == {"r": 2}


async def test_native_code_nodes_stay_strict(tmp_path, scripted_registry):
    workflow = {"id": "strict", "name": "strict", "version": 1, "nodes": [
        {"id": "start", "type": "start"},
        {"id": "c", "type": "code", "config": {"language": "javascript", "code": "function main() { return {} }",
                                               "outputs": [{"name": "n", "type": "number"}]}}],
        "edges": [{"id": "e", "source": "start", "sourceHandle": "out", "target": "c"}]}
    state, _ = await run(workflow, registry=scripted_registry, tmp_path=tmp_path, settings=SETTINGS)
    assert state.status == "failed" and state.error.reason == "code_output"
    assert "output 'n' is declared but main() did not return it" in state.error.message


@pytest.mark.parametrize("value, type_, expected", [
    ({"a": 1}, VarType.string, '{"a": 1}'), ([1, "x"], VarType.string, '[1, "x"]'), (5, VarType.string, "5"),
    (True, VarType.string, "true"), ("12", VarType.number, 12), ("1.5", VarType.number, 1.5),
    ("abc", VarType.number, None), (True, VarType.number, 1), ("true", VarType.boolean, True),
    ("yes", VarType.boolean, False), (0, VarType.boolean, False), ('{"k": 2}', VarType.object, {"k": 2}),
    ("[1]", VarType.array, [1]), ("[1]", VarType.object, "[1]"), (None, VarType.string, None),
    ({"a": 1}, VarType.any, {"a": 1}),
])
def test_fastgpt_input_conversion(value, type_, expected):
    assert fastgpt_input(value, type_) == expected
