"""Package exports loaded on first use: a package's ``__init__`` names each exported
name's submodule, and importing the package imports none of them, so a command that
needs one submodule does not pay for the rest (start-up time of the CLI)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` whose exported names are
    ``exports`` (name -> submodule); a name is imported on first access and then kept in
    ``namespace`` (the package's globals). ``__getattr__`` raises AttributeError for
    any other name."""

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *exports})

    return getattr_, dir_
