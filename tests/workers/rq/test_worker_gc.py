"""A worker tunes its cyclic garbage collector once its run service is open, before it
takes a job, as ``flowloom serve`` does (:func:`api.gc_tuning.tune_gc`): what start-up
loaded is frozen out of later collections, and young collections run every
``GC_YOUNG_THRESHOLD`` allocations rather than Python's 700."""

from __future__ import annotations

import gc
from typing import Any

from api.gc_tuning import GC_YOUNG_THRESHOLD


def test_a_worker_freezes_its_start_up_heap_before_its_first_job(deployment, monkeypatch):
    from api.cli.worker import worker
    from workers.rq.worker import FlowloomWorker

    for name, value in deployment.env.items():
        if name.startswith("FLOWLOOM_"):
            monkeypatch.setenv(name, value)
    seen: dict[str, Any] = {}

    def work(self: FlowloomWorker, **_kwargs: Any) -> bool:
        seen.update(threshold=gc.get_threshold()[0], frozen=gc.get_freeze_count())
        return True

    monkeypatch.setattr(FlowloomWorker, "work", work)
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    try:
        worker(queues=["default"], burst=True, name="gc1", sweep=1.0, metrics_port=None)
    finally:
        gc.unfreeze()  # this test process's collector as it was
        gc.set_threshold(*threshold)
    assert seen["threshold"] == GC_YOUNG_THRESHOLD
    assert seen["frozen"] > frozen + 10_000, seen  # the modules and the open service: far more
