"""Every name a public module lists in ``__all__`` exists, and the packages' surfaces are small."""

from __future__ import annotations

import importlib

import pytest

MODULES = ["engine", "schemas", "nodes", "workers.memory", "workers.sql", "nodes.importers", "engine.service", "engine.ports", "engine.catalog",
           "nodes.llm", "nodes.model_registry", "nodes.agent_loop", "nodes.sandbox", "engine.loops", "api.cli", "api.composition"]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist(name):
    module = importlib.import_module(name)
    missing = [member for member in module.__all__ if not hasattr(module, member)]
    assert missing == []
    assert len(module.__all__) == len(set(module.__all__)), "no duplicates in __all__"
