"""Node behaviour: one module per node kind, listed in the built-in catalog.

:func:`builtin_catalog` (:mod:`nodes.catalog`) is the list of kinds; executor modules
are imported when a plan first needs them.
"""

from .catalog import BUILTIN_KINDS, builtin_catalog

__all__ = ["BUILTIN_KINDS", "builtin_catalog"]
