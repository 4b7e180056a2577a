"""Every name a public module lists in ``__all__`` exists, and the packages' surfaces are small."""

from __future__ import annotations

import importlib

import pytest

MODULES = ["engine", "schemas", "nodes", "workers.memory", "workers.sql", "nodes.importers", "engine.service", "engine.ports", "engine.catalog",
           "nodes.llm.call", "nodes.llm.model_registry", "nodes.agent.loop", "nodes.sandbox.process", "engine.loops", "api.cli", "api.composition"]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist(name):
    module = importlib.import_module(name)
    missing = [member for member in module.__all__ if not hasattr(module, member)]
    assert missing == []
    assert len(module.__all__) == len(set(module.__all__)), "no duplicates in __all__"


@pytest.mark.parametrize("name", ["engine", "schemas"])
def test_what_type_checkers_see_of_a_lazy_package_is_what_it_exports(name):
    """The imports under ``TYPE_CHECKING`` in a lazily exporting ``__init__`` name each
    exported name once, from the submodule ``_EXPORTS`` loads it from: type checkers and
    IDEs see the package that runs."""
    import ast
    from pathlib import Path

    module = importlib.import_module(name)
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    seen = [
        (alias.asname or alias.name, node.module)
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names
    ]
    assert sorted(seen) == sorted(module._EXPORTS.items())
