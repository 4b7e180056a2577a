"""Import-time checks of code nodes' source text (never run): packages the sandbox's
environment lacks, and JavaScript globals nothing defines.

The sandbox gives Python code the standard library and JavaScript code Node's built-in
modules, plus the packages the operator installed (``flowloom sandbox install``,
:mod:`engine.code_packages`). A flow that imports ``jieba`` or ``json_repair`` when
they are not installed can only fail when it runs, so the importer reports it at
import time, naming the packages and the command that installs them; every package a
code node imports is listed in the import's result (:func:`package_summary`), installed
or not. FastGPT's JavaScript sandbox defines a few helper globals
(:data:`nodes.sandbox.compat.FASTGPT_JS_GLOBALS`); a call of any other name the code
neither defines nor gets from JavaScript would be a ``ReferenceError`` at run time, so
it is reported too.

Both checks read the text (:mod:`schemas.code_imports` for the imports; JavaScript
globals with patterns over the source with comments and string literals blanked out,
a heuristic: it may miss a name, never invents a package).
"""

from __future__ import annotations

import re
from typing import Any

from engine.code_packages import Language, PackageNeed, missing_message, package_needs

__all__ = ["check_code", "package_summary", "undefined_js_calls"]

#: Names JavaScript (and Node) define globally, and words a call pattern also matches.
_JS_KNOWN = frozenset(
    {
        # keywords and operators followed by "("
        "if",
        "for",
        "while",
        "switch",
        "catch",
        "function",
        "return",
        "typeof",
        "new",
        "await",
        "async",
        "yield",
        "do",
        "else",
        "in",
        "of",
        "instanceof",
        "void",
        "delete",
        "throw",
        "case",
        "with",
        "super",
        "import",
        "this",
        "class",
        "extends",
        "get",
        "set",
        "static",
        # standard built-ins
        "Array",
        "ArrayBuffer",
        "BigInt",
        "Boolean",
        "DataView",
        "Date",
        "Error",
        "EvalError",
        "Function",
        "Intl",
        "JSON",
        "Map",
        "Math",
        "Number",
        "Object",
        "Promise",
        "Proxy",
        "RangeError",
        "ReferenceError",
        "Reflect",
        "RegExp",
        "Set",
        "String",
        "Symbol",
        "SyntaxError",
        "TypeError",
        "URIError",
        "WeakMap",
        "WeakSet",
        "Int8Array",
        "Uint8Array",
        "Uint8ClampedArray",
        "Int16Array",
        "Uint16Array",
        "Int32Array",
        "Uint32Array",
        "Float32Array",
        "Float64Array",
        "BigInt64Array",
        "BigUint64Array",
        "AggregateError",
        "WeakRef",
        "decodeURI",
        "decodeURIComponent",
        "encodeURI",
        "encodeURIComponent",
        "escape",
        "unescape",
        "eval",
        "isFinite",
        "isNaN",
        "parseFloat",
        "parseInt",
        "globalThis",
        # Node globals
        "Buffer",
        "URL",
        "URLSearchParams",
        "TextEncoder",
        "TextDecoder",
        "atob",
        "btoa",
        "clearInterval",
        "clearTimeout",
        "setInterval",
        "setTimeout",
        "setImmediate",
        "clearImmediate",
        "queueMicrotask",
        "structuredClone",
        "require",
        "fetch",
        "AbortController",
        "console",
        "process",
    }
)

_JS_STRIP = re.compile(
    r"""//[^\n]*|/\*.*?\*/|`(?:\\.|[^`\\])*`|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*\"""", re.S
)
_JS_CALL = re.compile(r"(?<![\w$.])([A-Za-z_$][\w$]*)\s*\(")
_JS_DECL = re.compile(
    r"(?:function\s*\*?\s*|class\s+|(?:const|let|var)\s+)([A-Za-z_$][\w$]*)"
    r"|([A-Za-z_$][\w$]*)\s*(?:=(?![=>])|=>)"
)
_JS_DESTRUCTURED = re.compile(r"(?:const|let|var)\s*[{\[]([^}\]]*)[}\]]|\(\s*\{([^}]*)\}")
_JS_PARAMS = re.compile(r"(?:function\s*[\w$]*\s*|\b)\(([^()]*)\)\s*(?:=>|\{)")


def undefined_js_calls(code: str, provided: frozenset[str] = frozenset()) -> list[str]:
    """Names ``code`` calls as functions that it does not define and that are neither
    JavaScript/Node globals nor in ``provided``, sorted: each would raise
    ``ReferenceError`` when the call runs."""
    text = _JS_STRIP.sub('""', code)
    defined: set[str] = set()
    for m in _JS_DECL.finditer(text):
        defined.add(m.group(1) or m.group(2))
    for m in _JS_DESTRUCTURED.finditer(text):
        defined.update(re.findall(r"([A-Za-z_$][\w$]*)\s*(?:[,=}]|$)", m.group(1) or m.group(2) or ""))
    for m in _JS_PARAMS.finditer(text):
        defined.update(re.findall(r"[A-Za-z_$][\w$]*", m.group(1)))
    calls = {m.group(1) for m in _JS_CALL.finditer(text)}
    return sorted(calls - defined - _JS_KNOWN - provided)


def check_code(
    importer: Any, p: Any, language: Language, code: str, provided: frozenset[str] = frozenset()
) -> None:
    """Record the packages the code node ``p`` imports (``importer.package_needs``) and
    report what will fail when it runs: packages the sandbox's environment
    (``importer.package_env``) lacks, an error naming the install command (deferred so
    the node's other problems are listed too), and, for JavaScript, calls of names
    nothing defines (a warning: the call may sit on a path that never runs)."""
    from .refs import Unconvertible

    needs = package_needs(importer.package_env, language, code)
    importer.package_needs.extend((p.src_id, need) for need in needs)
    missing = missing_message(needs)
    if missing:
        importer.defer(Unconvertible(missing, "missing_package"))
    if language == "javascript":
        unknown = undefined_js_calls(code, provided)
        if unknown:
            importer.warn(
                "behaviour_difference",
                f"the code calls {', '.join(unknown)}, which neither it nor the "
                "sandbox defines: each call fails with ReferenceError when it runs",
                p,
            )


def package_summary(needs: list[tuple[str, PackageNeed]]) -> list[dict[str, Any]]:
    """Each package the flow's code imports, once: ``{"language", "module",
    "requirement", "installed", "nodes"}`` (``requirement``: what to install, None for a
    JavaScript path; ``nodes``: the source ids of the nodes importing it), sorted by
    language and module."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for node_id, need in needs:
        entry = merged.setdefault((need.language, need.module), {**need.to_dict(), "nodes": []})
        if node_id not in entry["nodes"]:
            entry["nodes"].append(node_id)
    return [merged[key] for key in sorted(merged)]
