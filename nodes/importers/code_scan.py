"""Import-time checks of code nodes' source text (never run): packages the sandbox lacks,
and JavaScript globals nothing defines.

The sandbox gives Python code the standard library only and JavaScript code Node's
built-in modules; a flow that imports ``jieba`` or ``pandas`` can only fail when it
runs, so the importer reports it at import time, with the package names. FastGPT's
JavaScript sandbox defines a few helper globals (:data:`nodes.sandbox_compat.FASTGPT_JS_GLOBALS`);
a call of any other name the code neither defines nor gets from JavaScript would be a
``ReferenceError`` at run time, so it is reported too.

Both checks read the text: Python with :mod:`ast`, JavaScript with patterns over the
source with comments and string literals blanked out (a heuristic: it may miss a name,
never invents a package).
"""

from __future__ import annotations

import ast
import re
import sys
from typing import Any

__all__ = ["check_code", "missing_packages", "undefined_js_calls"]

#: Node's built-in modules (``require('fs')``, ``require('node:fs')``).
NODE_BUILTINS = frozenset(
    {
        "assert",
        "async_hooks",
        "buffer",
        "child_process",
        "cluster",
        "console",
        "constants",
        "crypto",
        "dgram",
        "diagnostics_channel",
        "dns",
        "domain",
        "events",
        "fs",
        "http",
        "http2",
        "https",
        "inspector",
        "module",
        "net",
        "os",
        "path",
        "perf_hooks",
        "process",
        "punycode",
        "querystring",
        "readline",
        "repl",
        "stream",
        "string_decoder",
        "sys",
        "timers",
        "tls",
        "trace_events",
        "tty",
        "url",
        "util",
        "v8",
        "vm",
        "wasi",
        "worker_threads",
        "zlib",
        "test",
    }
)

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
_REQUIRE = re.compile(
    r"""\brequire\s*\(\s*(['"])([^'"]+)\1\s*\)|\bimport\s+(?:[^'"]*?\sfrom\s+)?(['"])([^'"]+)\3"""
)


def _python_imports(code: str) -> list[str]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module.split(".")[0])
    return names


def missing_packages(language: str, code: str) -> list[str]:
    """Top-level packages ``code`` imports that the sandbox does not have, sorted.

    Python: ``import x`` / ``from x import y`` of a module outside the standard library
    (:data:`sys.stdlib_module_names`). JavaScript: ``require('x')`` / ``import ... from 'x'``
    of a module that is not one of Node's built-ins (relative paths included: the
    sandbox has no files to load).
    """
    if language == "python":
        return sorted(
            {n for n in _python_imports(code) if n not in sys.stdlib_module_names and n != "__future__"}
        )
    found = set()
    for m in _REQUIRE.finditer(code):
        name = m.group(2) or m.group(4) or ""
        base = name[5:] if name.startswith("node:") else name
        if base.split("/")[0] not in NODE_BUILTINS:
            found.add(name)
    return sorted(found)


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
    importer: Any, p: Any, language: str, code: str, provided: frozenset[str] = frozenset()
) -> None:
    """Report what will fail when the code node ``p`` runs: packages the sandbox lacks
    (an error, deferred so the node's other problems are listed too) and, for
    JavaScript, calls of names nothing defines (a warning: the call may sit on a path
    that never runs)."""
    from .refs import Unconvertible

    packages = missing_packages(language, code)
    if packages:
        where = "the Python standard library" if language == "python" else "Node's built-in modules"
        importer.defer(
            Unconvertible(
                f"the code imports {', '.join(packages)}, which the sandbox does not have (it "
                f"offers {where} only)",
                "missing_package",
            )
        )
    if language == "javascript":
        unknown = undefined_js_calls(code, provided)
        if unknown:
            importer.warn(
                "behaviour_difference",
                f"the code calls {', '.join(unknown)}, which neither it nor the "
                "sandbox defines: each call fails with ReferenceError when it runs",
                p,
            )
