"""The catalog tests compile with: every built-in kind plus the test-only probe kind,
and ``compile_workflow`` / ``check_workflow`` bound to it and to the bundled model
registry (what the CLI passes), so a test reads like a caller of the engine."""

from __future__ import annotations

from typing import Any

from engine import compiler
from engine.catalog import KindSpec, NodeCatalog
from nodes import builtin_catalog
from nodes.llm.model_registry import get_registry

from .fake_nodes import ProbeConfig, ProbeNode

__all__ = ["TEST_CATALOG", "check_workflow", "compile_workflow", "import_workflow", "with_kinds"]

TEST_CATALOG: NodeCatalog = builtin_catalog().with_kinds(KindSpec("probe", ProbeConfig, ProbeNode))


def with_kinds(*specs: KindSpec) -> NodeCatalog:
    """:data:`TEST_CATALOG` plus ``specs``."""
    return TEST_CATALOG.with_kinds(*specs)


def compile_workflow(source: Any, *, catalog: NodeCatalog | None = None, models: Any = None, **kw: Any) -> Any:
    """:func:`engine.compile_workflow` with the test catalog and the bundled model registry by default."""
    return compiler.compile_workflow(source, catalog=catalog or TEST_CATALOG,
                                     models=models if models is not None else get_registry(), **kw)


def check_workflow(source: Any, *, catalog: NodeCatalog | None = None, models: Any = None) -> Any:
    """:func:`engine.check_workflow` with the test catalog and the bundled model registry by default."""
    return compiler.check_workflow(source, catalog=catalog or TEST_CATALOG,
                                   models=models if models is not None else get_registry())


def import_workflow(data: Any, *, catalog: NodeCatalog | None = None, models: Any = None, **kw: Any) -> Any:
    """:func:`nodes.importers.import_workflow` with the built-in catalog and the bundled
    model registry by default (what ``flowloom import`` passes)."""
    from nodes.importers import import_workflow as convert

    return convert(data, catalog=catalog or builtin_catalog(), models=models if models is not None else get_registry(),
                   **kw)
