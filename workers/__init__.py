"""The adapters behind the engine's ports, and the processes that run workflows elsewhere.

- :mod:`workers.sql`: the run store, event log, chats, saved workflows (and the source
  of workflow tools over them), keys, quotas, providers and secrets on SQLite or
  PostgreSQL.
- :mod:`workers.knowledge`: the knowledge bases' chunk and vector stores.
- :mod:`workers.memory`: node memory (files or Redis); :mod:`workers.redis_bus`: live
  events and commands on Redis; :mod:`workers.secret_box`: encryption of stored secrets.
- :mod:`workers.rq`: the RQ queue, its jobs and the ``flowloom worker`` process's runtime.
- :mod:`workers.metrics`, :mod:`workers.tracing`: Prometheus metrics and OpenTelemetry traces.
"""
