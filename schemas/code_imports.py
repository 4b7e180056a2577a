"""The third-party modules a code node's source imports, read from the text (never run).

The code sandbox gives Python code the standard library and JavaScript code Node's
built-in modules; anything else must be installed by the operator into the sandbox's
package environment (``flowloom sandbox install``). Validation, the importers and the
code node itself ask this module which modules a piece of code needs, so a missing one
is named before a run rather than as an ``ImportError`` in the middle of it.

Python is read with :mod:`ast`: ``import x.y`` / ``from x import y`` of a top-level
module outside :data:`sys.stdlib_module_names` (relative imports have no module to
install). An import inside a ``try`` whose handlers catch ``ImportError`` (or
``ModuleNotFoundError``, ``Exception``, ``BaseException``, a bare ``except``) is left
out: the code has its own fallback, so the package is optional.

JavaScript is read with a pattern: ``require('x')`` and ``import ... from 'x'`` of a
module that is not one of Node's built-ins, as the package name npm installs
(``lodash/fp`` -> ``lodash``, ``@scope/pkg/sub`` -> ``@scope/pkg``). A relative or
absolute path (``./util``) is kept as written: there is no file to load and nothing to
install. A heuristic: it may miss a module built at run time, never invents one.
"""

from __future__ import annotations

import ast
import re
import sys

__all__ = ["NODE_BUILTINS", "is_path_module", "third_party_imports"]

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

_REQUIRE = re.compile(
    r"""\brequire\s*\(\s*(['"])([^'"]+)\1\s*\)|\bimport\s+(?:[^'"]*?\sfrom\s+)?(['"])([^'"]+)\3"""
)
#: Exceptions whose handler makes an import optional.
_FALLBACK_CATCHES = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type
    if kinds is None:
        return True
    names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
    return any(isinstance(n, ast.Name) and n.id in _FALLBACK_CATCHES for n in names)


def _python_imports(node: ast.AST, out: list[str]) -> None:
    """Append the top-level modules imported under ``node``, skipping guarded imports."""
    if isinstance(node, ast.Import):
        out.extend(alias.name.split(".")[0] for alias in node.names)
        return
    if isinstance(node, ast.ImportFrom):
        if node.module and not node.level:
            out.append(node.module.split(".")[0])
        return
    if isinstance(node, ast.Try | ast.TryStar) and any(_catches_import_error(h) for h in node.handlers):
        children: list[ast.AST] = [*node.handlers, *node.orelse, *node.finalbody]
    else:
        children = list(ast.iter_child_nodes(node))
    for child in children:
        _python_imports(child, out)


def is_path_module(name: str) -> bool:
    """True for a JavaScript module given as a path (``./util``, ``../x``, ``/abs``): a
    file of the author's machine, which no package install provides."""
    return name.startswith((".", "/"))


def _npm_name(spec: str) -> str:
    """The npm package a module specifier loads from (``lodash/fp`` -> ``lodash``)."""
    parts = spec.split("/")
    return "/".join(parts[:2]) if spec.startswith("@") and len(parts) > 1 else parts[0]


def third_party_imports(language: str, code: str) -> list[str]:
    """The modules ``code`` imports that the sandbox's runtime does not ship, sorted and
    unique: Python top-level module names (``json_repair``, ``numpy``), JavaScript npm
    package names (``lodash``) or paths (``./util``). Code that does not parse adds
    nothing (the node reports the syntax error when it runs)."""
    if language == "python":
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            return []
        names: list[str] = []
        _python_imports(tree, names)
        return sorted({n for n in names if n not in sys.stdlib_module_names and n != "__future__"})
    found: set[str] = set()
    for m in _REQUIRE.finditer(code):
        spec = m.group(2) or m.group(4) or ""
        base = spec[5:] if spec.startswith("node:") else spec
        if base.split("/")[0] in NODE_BUILTINS:
            continue
        found.add(spec if is_path_module(spec) else _npm_name(spec))
    return sorted(found)
