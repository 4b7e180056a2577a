"""The SQL tables of the run store, as SQLAlchemy Core tables on their own metadata.

The migrations (``workers/sql/migrations``) create exactly these tables; a test checks
that Alembic's autogenerate finds no difference between the two. Every row a tenant
owns carries ``tenant_id``. Times are Unix seconds (double precision). JSON columns
use the portable ``JSON`` type (plain ``json`` on PostgreSQL: it keeps the key order of
objects, which JSONB does not, and inserts without re-encoding); ``None`` is stored as
SQL NULL. Rows that belong to a run (node runs, events, commands) are deleted with it
(``ON DELETE CASCADE``). A column's ``default`` is what an insert that leaves it out
writes.

Core tables, not ORM or SQLModel classes: the store reads and writes with Core
statements only, and declaring the tables as model classes cost every process that
opens the store a pydantic model and an ORM mapper per table at import (about a third
of ``flowloom run``'s start-up).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

__all__ = [
    "api_keys",
    "chats",
    "messages",
    "metadata",
    "model_providers",
    "node_runs",
    "provider_models",
    "quota_admissions",
    "quota_limits",
    "run_commands",
    "run_events",
    "runs",
    "tenant_model_defaults",
    "tenant_model_overrides",
    "tenants",
    "token_usage",
    "workflow_docs",
    "workflow_secrets",
    "workflow_versions",
    "workflows",
]

#: The store's own metadata: tables of other libraries in the process never leak into
#: these migrations.
metadata = sa.MetaData()

#: JSON value, NULL for None (both backends).
JsonValue = sa.JSON(none_as_null=True)
Seconds: sa.Double[float] = sa.Double()
Text = sa.Text()


def _fk_run() -> Any:
    return sa.ForeignKey("runs.run_id", ondelete="CASCADE")


# A workflow document kept under its content hash (per tenant).
workflow_docs = sa.Table(
    "workflow_docs",
    metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("content_hash", Text, primary_key=True),
    sa.Column("doc", JsonValue, nullable=False),
    sa.Column("created_at", Seconds, nullable=False),
)


# A run: the scalar and JSON fields of ``RunState``, its usage totals and its owner lease.
runs = sa.Table(
    "runs",
    metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("tenant_id", Text, nullable=False),
    sa.Column("workflow_id", Text, nullable=False),
    sa.Column("workflow_version", Text),
    sa.Column("workflow_hash", Text, nullable=False),
    sa.Column("status", Text, nullable=False),
    sa.Column("chat_id", Text),
    sa.Column("user_id", Text),
    sa.Column("inputs", JsonValue),
    sa.Column("sys", JsonValue),
    sa.Column("variables", JsonValue),
    sa.Column("conversation", JsonValue),
    sa.Column("interrupts", JsonValue),
    sa.Column("outputs", JsonValue),
    sa.Column("answer", Text, nullable=False, default=""),
    sa.Column("error", JsonValue),
    sa.Column("node_executions", sa.Integer(), nullable=False, default=0),
    sa.Column("seq", sa.Integer(), nullable=False, default=0),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("started_at", Seconds),
    sa.Column("finished_at", Seconds),
    sa.Column("deadline", Seconds),
    sa.Column("wall_time_left", Seconds),
    sa.Column("paused_at", Seconds),
    sa.Column("waited_s", Seconds, nullable=False, default=0.0),
    sa.Column("tokens_in", sa.BigInteger(), nullable=False, default=0),
    sa.Column("tokens_out", sa.BigInteger(), nullable=False, default=0),
    sa.Column("cost", Seconds, nullable=False, default=0.0),
    # some token count of the run was estimated (written with the totals, once it no longer runs)
    sa.Column("usage_estimated", sa.Boolean(), nullable=False, default=False, server_default=sa.false()),
    sa.Column("owner_id", Text),
    sa.Column("owner_host", Text),
    sa.Column("owner_pid", sa.Integer()),
    sa.Column("lease_until", Seconds),
    sa.Index("ix_runs_tenant_status", "tenant_id", "status"),
    sa.Index("ix_runs_tenant_chat", "tenant_id", "chat_id"),
    sa.Index("ix_runs_tenant_workflow", "tenant_id", "workflow_id"),
    sa.Index("ix_runs_created_at", "created_at"),
    sa.Index("ix_runs_status_lease", "status", "lease_until"),
)


# A node run. ``current``: the latest run of its node (``RunState.node_runs``); false: an earlier loop
# round (``RunState.history``). ``seq`` orders rows within each of the two groups; ``data`` holds the
# kind-specific record (agent rounds...).
node_runs = sa.Table(
    "node_runs",
    metadata,
    sa.Column("run_id", Text, _fk_run(), primary_key=True),
    sa.Column("node_run_id", Text, primary_key=True),
    sa.Column("tenant_id", Text, nullable=False),
    sa.Column("node_id", Text, nullable=False),
    sa.Column("kind", Text, nullable=False),
    sa.Column("status", Text, nullable=False),
    sa.Column("current", sa.Boolean(), nullable=False, default=True),
    sa.Column("seq", sa.Integer(), nullable=False, default=0),
    sa.Column("inputs", JsonValue),
    sa.Column("outputs", JsonValue),
    sa.Column("handles", JsonValue),
    sa.Column("error", JsonValue),
    sa.Column("attempts", sa.Integer(), nullable=False, default=0),
    sa.Column("retries", sa.Integer(), nullable=False, default=0),
    sa.Column("started_at", Seconds),
    sa.Column("finished_at", Seconds),
    sa.Column("waited_s", Seconds, nullable=False, default=0.0),
    sa.Column("usage", JsonValue),
    sa.Column("data", JsonValue),
    sa.Column("loop_id", Text),
    sa.Column("iteration", sa.Integer()),
    sa.Column("pending", JsonValue),
    sa.Index("ix_node_runs_run_node", "run_id", "node_id"),
)


# A durable event of a run (``payload``: the event as JSON).
run_events = sa.Table(
    "run_events",
    metadata,
    sa.Column("run_id", Text, _fk_run(), primary_key=True),
    sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("tenant_id", Text, nullable=False),
    sa.Column("type", Text, nullable=False),
    sa.Column("node_id", Text),
    sa.Column("payload", JsonValue, nullable=False),
    sa.Column("ts", Seconds, nullable=False),
)


# A command sent to a run (``id`` increases, so pollers read from the last id seen).
run_commands = sa.Table(
    "run_commands",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True),
    sa.Column("run_id", Text, _fk_run(), nullable=False),
    sa.Column("tenant_id", Text, nullable=False),
    sa.Column("kind", Text, nullable=False),
    sa.Column("reason", Text, nullable=False, default=""),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Index("ix_run_commands_run_id", "run_id", "id"),
)


# A chat (created with its first message).
chats = sa.Table(
    "chats",
    metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("chat_id", Text, primary_key=True),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("updated_at", Seconds, nullable=False),
    sa.Column("title", Text),
    sa.Column("variables", JsonValue),  # conversation variables
)


# A chat message (key: tenant and message id); ``parts`` is the list of its parts as JSON.
messages = sa.Table(
    "messages",
    metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("id", Text, primary_key=True),
    sa.Column("chat_id", Text, nullable=False),
    sa.Column("role", Text, nullable=False),
    sa.Column("run_id", Text),
    sa.Column("status", Text, nullable=False),
    sa.Column("parts", JsonValue, nullable=False),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("updated_at", Seconds, nullable=False),
    sa.ForeignKeyConstraint(
        ["tenant_id", "chat_id"], ["chats.tenant_id", "chats.chat_id"], ondelete="CASCADE"
    ),
    sa.Index("ix_messages_tenant_chat_created", "tenant_id", "chat_id", "created_at"),
)


# A tenant (the owner of the rows that carry its ``tenant_id``).
tenants = sa.Table(
    "tenants",
    metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("name", Text, nullable=False, default=""),
    sa.Column("created_at", Seconds, nullable=False),
    # when ``flowloom serve`` first offered it the bundled examples (null: not yet)
    sa.Column("examples_offered_at", Seconds),
)


# An API key: its visible ``prefix`` (unique, the lookup key) and the SHA-256 of its secret (hex),
# never the secret itself.
api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", Text, primary_key=True),
    sa.Column("tenant_id", Text, nullable=False),
    sa.Column("name", Text, nullable=False, default=""),
    sa.Column("prefix", Text, nullable=False),
    sa.Column("secret_hash", Text, nullable=False),
    sa.Column("app_id", Text),
    sa.Column("admin", sa.Boolean(), nullable=False, default=False),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("last_used_at", Seconds),
    sa.Column("revoked_at", Seconds),
    sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),
    sa.Index("ix_api_keys_tenant", "tenant_id"),
    sa.Index("ux_api_keys_prefix", "prefix", unique=True),
)


# A saved workflow of a tenant: its draft (any document with an id) and the draft's version
# (optimistic concurrency), and the number of its published version.
workflows = sa.Table(
    "workflows",
    metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("workflow_id", Text, primary_key=True),
    sa.Column("name", Text, nullable=False, default=""),
    sa.Column("draft", JsonValue, nullable=False),
    sa.Column("draft_version", sa.Integer(), nullable=False, default=1),
    sa.Column("published_version", sa.Integer()),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("updated_at", Seconds, nullable=False),
)


# A published version of a workflow: its document by content hash (a row of ``workflow_docs``, which
# retention never deletes) and a note. Deleted with its workflow.
workflow_versions = sa.Table(
    "workflow_versions",
    metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("workflow_id", Text, primary_key=True),
    sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("doc_hash", Text, nullable=False),
    sa.Column("note", Text, nullable=False, default=""),
    sa.Column("created_at", Seconds, nullable=False),
    sa.ForeignKeyConstraint(
        ["tenant_id", "workflow_id"], ["workflows.tenant_id", "workflows.workflow_id"], ondelete="CASCADE"
    ),
)


# A tenant's own quota (``app_id`` empty) or one app's (``app_id``: the workflow id): runs per minute
# and tokens per day; NULL keeps the default (0: unlimited).
quota_limits = sa.Table(
    "quota_limits",
    metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("app_id", Text, primary_key=True, default=""),
    sa.Column("runs_per_minute", sa.Integer()),
    sa.Column("tokens_per_day", sa.BigInteger()),
    sa.Column("updated_at", Seconds, nullable=False),
    sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),
)


# A run start or continuation admitted under the quotas (the runs-per-minute window counts these rows;
# the tokens of the runs admitted since midnight make the day's use).
quota_admissions = sa.Table(
    "quota_admissions",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True),
    sa.Column("tenant_id", Text, nullable=False),
    sa.Column("app_id", Text, nullable=False),
    sa.Column("run_id", Text, nullable=False),
    sa.Column("admitted_at", Seconds, nullable=False),
    sa.Index("ix_quota_admissions_tenant_at", "tenant_id", "admitted_at"),
    sa.Index("ix_quota_admissions_tenant_app_at", "tenant_id", "app_id", "admitted_at"),
)


# Model tokens a tenant spent outside runs (``source``: ``embedding`` for ingestion and searches of
# knowledge bases), counted in its tokens per day beside its runs'. ``app_id`` is empty for the
# tenant's own use, else the app whose key spent them.
token_usage = sa.Table(
    "token_usage",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True),
    sa.Column("tenant_id", Text, nullable=False),
    sa.Column("app_id", Text, nullable=False, default=""),
    sa.Column("source", Text, nullable=False),
    sa.Column("tokens", sa.BigInteger(), nullable=False),
    sa.Column("cost", Seconds, nullable=False, default=0.0),
    sa.Column("used_at", Seconds, nullable=False),
    sa.Index("ix_token_usage_tenant_at", "tenant_id", "used_at"),
    sa.Index("ix_token_usage_tenant_app_at", "tenant_id", "app_id", "used_at"),
)


# The value of one secret environment variable of a workflow, encrypted (:mod:`workers.secret_box`;
# the tenant, workflow id and name are sealed with the value, so a token copied to another row does
# not open there). Kept by workflow id, not by document: every version of the workflow reads the
# current value.
workflow_secrets = sa.Table(
    "workflow_secrets",
    metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("workflow_id", Text, primary_key=True),
    sa.Column("name", Text, primary_key=True),
    sa.Column("token", Text, nullable=False),
    sa.Column("updated_at", Seconds, nullable=False),
)


# A tenant's own OpenAI-compatible endpoint (``preset``: which kind of server, for the canvas and the
# defaults it gave). ``api_key_token``: the key encrypted (:mod:`workers.secret_box`), NULL for none;
# ``api_key_mask``: what may be shown of it.
model_providers = sa.Table(
    "model_providers",
    metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("provider_id", Text, primary_key=True),
    sa.Column("name", Text, nullable=False, default=""),
    sa.Column("preset", Text, nullable=False),
    sa.Column("base_url", Text, nullable=False),
    sa.Column("api_key_token", Text),
    sa.Column("api_key_mask", Text),
    sa.Column("settings", JsonValue),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("updated_at", Seconds, nullable=False),
    sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),
)


# A model of a tenant's provider, under the name the tenant's workflows use (unique per tenant
# whatever the provider). ``spec``: the registry fields (type, upstream id, context, output cap,
# capabilities, pricing) as JSON. Deleted with its provider.
provider_models = sa.Table(
    "provider_models",
    metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("name", Text, primary_key=True),
    sa.Column("provider_id", Text, nullable=False),
    sa.Column("spec", JsonValue, nullable=False),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("updated_at", Seconds, nullable=False),
    sa.ForeignKeyConstraint(
        ["tenant_id", "provider_id"],
        ["model_providers.tenant_id", "model_providers.provider_id"],
        ondelete="CASCADE",
    ),
    sa.Index("ix_provider_models_tenant_provider", "tenant_id", "provider_id"),
)


# The tenant's default model of one type (``chat``, ``embedding``, ``rerank``): a model of its
# providers or of the operator's registry, by name.
tenant_model_defaults = sa.Table(
    "tenant_model_defaults",
    metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("type", Text, primary_key=True),
    sa.Column("model", Text, nullable=False),
    sa.Column("updated_at", Seconds, nullable=False),
    sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),
)


# A tenant's changes to one model's limits and capabilities (``override``: the
# :class:`~nodes.llm.model_overrides.ModelOverride` table, only the keys set), applied over the model
# as the tenant's registry has it.
tenant_model_overrides = sa.Table(
    "tenant_model_overrides",
    metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("model", Text, primary_key=True),
    sa.Column("override", JsonValue, nullable=False),
    sa.Column("updated_at", Seconds, nullable=False),
    sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),
)
