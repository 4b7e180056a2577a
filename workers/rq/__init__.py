"""Queued execution of runs on RQ: the queues, the job, the worker process's runtime and
the worker class that ``flowloom worker`` starts.

- :mod:`workers.rq.queues`: queue names by priority, the job's timeout, enqueueing a run
  (the job carries only ``(tenant_id, run_id)``).
- :mod:`workers.rq.jobs`: the job function RQ calls.
- :mod:`workers.rq.runtime`: the asyncio side of a worker process (the run service, the
  event bus, leases of executing runs in Redis, the sweeper that re-enqueues a run whose
  worker died).
- :mod:`workers.rq.worker`: the RQ worker class (no fork; reconnects to Redis).

The run lifecycle itself is the engine's :class:`~engine.service.RunService`; nothing
here starts, resumes or cancels a run any other way.
"""
