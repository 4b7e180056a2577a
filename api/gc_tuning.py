"""The cyclic garbage collector of a long-running process (``flowloom serve``, ``flowloom
worker``): :func:`tune_gc`, called once the process started.

Kept apart from :mod:`api.app` so a worker tunes its collector without loading FastAPI.
"""

from __future__ import annotations

import gc

__all__ = ["GC_YOUNG_THRESHOLD", "tune_gc"]

#: allocations between two young collections of the cyclic GC in a long-running process
#: (Python's default: 700)
GC_YOUNG_THRESHOLD = 10_000


def tune_gc() -> None:
    """Tune the cyclic garbage collector for a long-running process, once it started.

    Everything alive then (modules, a server's routes, pydantic's schemas, the stores:
    about a million objects) is moved out of the collector's sight (``gc.freeze``), and
    young collections run every :data:`GC_YOUNG_THRESHOLD` allocations instead of 700.
    A run allocates many short-lived objects (events, node runs, rows); with the defaults
    the collector ran several times per plumbing run and, for a 10,000-node run, spent
    about as long scanning the heap as the run itself took; in a worker, a full collection
    every few hundred queued runs walked the whole heap (about 0.1 s each). Objects are
    still freed as their last reference goes; only cycles wait a little longer."""
    gc.collect()
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)
