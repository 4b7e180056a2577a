"""The SQL tables of the run store, as SQLModel classes on their own metadata.

The migrations (``workers/sql/migrations``) create exactly these tables; a test checks
that Alembic's autogenerate finds no difference between the two. Every row a tenant
owns carries ``tenant_id``. Times are Unix seconds (double precision). JSON columns
use the portable ``JSON`` type (plain ``json`` on PostgreSQL: it keeps the key order of
objects, which JSONB does not, and inserts without re-encoding); ``None`` is stored as
SQL NULL. Rows that belong to a run (node runs, events, commands) are deleted with it
(``ON DELETE CASCADE``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

__all__ = [
    "ApiKeyRow",
    "ChatRow",
    "MessageRow",
    "ModelProviderRow",
    "NodeRunRow",
    "ProviderModelRow",
    "QuotaAdmissionRow",
    "QuotaLimitRow",
    "RunCommandRow",
    "RunEventRow",
    "RunRow",
    "TenantModelDefaultRow",
    "TenantModelOverrideRow",
    "TenantRow",
    "TokenUsageRow",
    "WorkflowDocRow",
    "WorkflowRow",
    "WorkflowSecretRow",
    "WorkflowVersionRow",
    "metadata",
]

#: JSON value, NULL for None (both backends).
JsonValue = sa.JSON(none_as_null=True)
Seconds: sa.Double[float] = sa.Double()
Text = sa.Text()


class _Table(SQLModel, registry=registry()):
    """Base of the store's tables: a registry (and metadata) of their own, so other
    SQLModel tables in the process never leak into these migrations."""

    if TYPE_CHECKING:  # the Core table SQLAlchemy sets on every table model (SQLModel does not declare it)
        __table__: ClassVar[sa.Table]


metadata = _Table.metadata


def _fk_run() -> Any:
    return sa.ForeignKey("runs.run_id", ondelete="CASCADE")


class WorkflowDocRow(_Table, table=True):
    """A workflow document kept under its content hash (per tenant)."""

    __tablename__ = "workflow_docs"

    tenant_id: str = Field(sa_type=Text, primary_key=True)
    content_hash: str = Field(sa_type=Text, primary_key=True)
    doc: dict[str, Any] = Field(sa_column=sa.Column(JsonValue, nullable=False))
    created_at: float = Field(sa_type=Seconds)


class RunRow(_Table, table=True):
    """A run: the scalar and JSON fields of ``RunState``, its usage totals and its owner lease."""

    __tablename__ = "runs"
    __table_args__ = (
        sa.Index("ix_runs_tenant_status", "tenant_id", "status"),
        sa.Index("ix_runs_tenant_chat", "tenant_id", "chat_id"),
        sa.Index("ix_runs_tenant_workflow", "tenant_id", "workflow_id"),
        sa.Index("ix_runs_created_at", "created_at"),
        sa.Index("ix_runs_status_lease", "status", "lease_until"),
    )

    run_id: str = Field(sa_type=Text, primary_key=True)
    tenant_id: str = Field(sa_type=Text)
    workflow_id: str = Field(sa_type=Text)
    workflow_version: str | None = Field(default=None, sa_type=Text)
    workflow_hash: str = Field(sa_type=Text)
    status: str = Field(sa_type=Text)
    chat_id: str | None = Field(default=None, sa_type=Text)
    user_id: str | None = Field(default=None, sa_type=Text)
    inputs: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    sys: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    variables: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    conversation: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    interrupts: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    outputs: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    answer: str = Field(default="", sa_type=Text)
    error: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    node_executions: int = Field(default=0)
    seq: int = Field(default=0)
    created_at: float = Field(sa_type=Seconds)
    started_at: float | None = Field(default=None, sa_type=Seconds)
    finished_at: float | None = Field(default=None, sa_type=Seconds)
    deadline: float | None = Field(default=None, sa_type=Seconds)
    wall_time_left: float | None = Field(default=None, sa_type=Seconds)
    paused_at: float | None = Field(default=None, sa_type=Seconds)
    waited_s: float = Field(default=0.0, sa_type=Seconds)
    tokens_in: int = Field(default=0, sa_type=sa.BigInteger)
    tokens_out: int = Field(default=0, sa_type=sa.BigInteger)
    cost: float = Field(default=0.0, sa_type=Seconds)
    #: some token count of the run was estimated (written with the totals, once it no longer runs)
    usage_estimated: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    owner_id: str | None = Field(default=None, sa_type=Text)
    owner_host: str | None = Field(default=None, sa_type=Text)
    owner_pid: int | None = Field(default=None)
    lease_until: float | None = Field(default=None, sa_type=Seconds)


class NodeRunRow(_Table, table=True):
    """A node run. ``current``: the latest run of its node (``RunState.node_runs``);
    false: an earlier loop round (``RunState.history``). ``seq`` orders rows within
    each of the two groups; ``data`` holds the kind-specific record (agent rounds...)."""

    __tablename__ = "node_runs"
    __table_args__ = (sa.Index("ix_node_runs_run_node", "run_id", "node_id"),)

    run_id: str = Field(sa_column=sa.Column(Text, _fk_run(), primary_key=True))
    node_run_id: str = Field(sa_type=Text, primary_key=True)
    tenant_id: str = Field(sa_type=Text)
    node_id: str = Field(sa_type=Text)
    kind: str = Field(sa_type=Text)
    status: str = Field(sa_type=Text)
    current: bool = Field(default=True)
    seq: int = Field(default=0)
    inputs: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    outputs: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    handles: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    error: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    attempts: int = Field(default=0)
    retries: int = Field(default=0)
    started_at: float | None = Field(default=None, sa_type=Seconds)
    finished_at: float | None = Field(default=None, sa_type=Seconds)
    waited_s: float = Field(default=0.0, sa_type=Seconds)
    usage: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    data: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    loop_id: str | None = Field(default=None, sa_type=Text)
    iteration: int | None = Field(default=None)
    pending: Any = Field(default=None, sa_column=sa.Column(JsonValue))


class RunEventRow(_Table, table=True):
    """A durable event of a run (``payload``: the event as JSON)."""

    __tablename__ = "run_events"

    run_id: str = Field(sa_column=sa.Column(Text, _fk_run(), primary_key=True))
    seq: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    tenant_id: str = Field(sa_type=Text)
    type: str = Field(sa_type=Text)
    node_id: str | None = Field(default=None, sa_type=Text)
    payload: Any = Field(sa_column=sa.Column(JsonValue, nullable=False))
    ts: float = Field(sa_type=Seconds)


class RunCommandRow(_Table, table=True):
    """A command sent to a run (``id`` increases, so pollers read from the last id seen)."""

    __tablename__ = "run_commands"
    __table_args__ = (sa.Index("ix_run_commands_run_id", "run_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(sa_column=sa.Column(Text, _fk_run(), nullable=False))
    tenant_id: str = Field(sa_type=Text)
    kind: str = Field(sa_type=Text)
    reason: str = Field(default="", sa_type=Text)
    created_at: float = Field(sa_type=Seconds)


class ChatRow(_Table, table=True):
    """A chat (created with its first message)."""

    __tablename__ = "chats"

    tenant_id: str = Field(sa_type=Text, primary_key=True)
    chat_id: str = Field(sa_type=Text, primary_key=True)
    created_at: float = Field(sa_type=Seconds)
    updated_at: float = Field(sa_type=Seconds)
    title: str | None = Field(default=None, sa_type=Text)
    variables: Any = Field(default=None, sa_column=sa.Column(JsonValue), description="conversation variables")


class MessageRow(_Table, table=True):
    """A chat message (key: tenant and message id); ``parts`` is the list of its parts as JSON."""

    __tablename__ = "messages"
    __table_args__ = (
        sa.ForeignKeyConstraint(
            ["tenant_id", "chat_id"], ["chats.tenant_id", "chats.chat_id"], ondelete="CASCADE"
        ),
        sa.Index("ix_messages_tenant_chat_created", "tenant_id", "chat_id", "created_at"),
    )

    tenant_id: str = Field(sa_type=Text, primary_key=True)
    id: str = Field(sa_type=Text, primary_key=True)
    chat_id: str = Field(sa_type=Text)
    role: str = Field(sa_type=Text)
    run_id: str | None = Field(default=None, sa_type=Text)
    status: str = Field(sa_type=Text)
    parts: Any = Field(sa_column=sa.Column(JsonValue, nullable=False))
    created_at: float = Field(sa_type=Seconds)
    updated_at: float = Field(sa_type=Seconds)


class TenantRow(_Table, table=True):
    """A tenant (the owner of the rows that carry its ``tenant_id``)."""

    __tablename__ = "tenants"

    tenant_id: str = Field(sa_type=Text, primary_key=True)
    name: str = Field(default="", sa_type=Text)
    created_at: float = Field(sa_type=Seconds)


class ApiKeyRow(_Table, table=True):
    """An API key: its visible ``prefix`` (unique, the lookup key) and the SHA-256 of its
    secret (hex), never the secret itself."""

    __tablename__ = "api_keys"
    __table_args__ = (
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),
        sa.Index("ix_api_keys_tenant", "tenant_id"),
        sa.Index("ux_api_keys_prefix", "prefix", unique=True),
    )

    id: str = Field(sa_type=Text, primary_key=True)
    tenant_id: str = Field(sa_type=Text)
    name: str = Field(default="", sa_type=Text)
    prefix: str = Field(sa_type=Text)
    secret_hash: str = Field(sa_type=Text)
    app_id: str | None = Field(default=None, sa_type=Text)
    admin: bool = Field(default=False)
    created_at: float = Field(sa_type=Seconds)
    last_used_at: float | None = Field(default=None, sa_type=Seconds)
    revoked_at: float | None = Field(default=None, sa_type=Seconds)


class WorkflowRow(_Table, table=True):
    """A saved workflow of a tenant: its draft (any document with an id) and the draft's
    version (optimistic concurrency), and the number of its published version."""

    __tablename__ = "workflows"

    tenant_id: str = Field(sa_type=Text, primary_key=True)
    workflow_id: str = Field(sa_type=Text, primary_key=True)
    name: str = Field(default="", sa_type=Text)
    draft: Any = Field(sa_column=sa.Column(JsonValue, nullable=False))
    draft_version: int = Field(default=1)
    published_version: int | None = Field(default=None)
    created_at: float = Field(sa_type=Seconds)
    updated_at: float = Field(sa_type=Seconds)


class WorkflowVersionRow(_Table, table=True):
    """A published version of a workflow: its document by content hash (a row of
    ``workflow_docs``, which retention never deletes) and a note. Deleted with its workflow."""

    __tablename__ = "workflow_versions"
    __table_args__ = (
        sa.ForeignKeyConstraint(
            ["tenant_id", "workflow_id"], ["workflows.tenant_id", "workflows.workflow_id"], ondelete="CASCADE"
        ),
    )

    tenant_id: str = Field(sa_type=Text, primary_key=True)
    workflow_id: str = Field(sa_type=Text, primary_key=True)
    version: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    doc_hash: str = Field(sa_type=Text)
    note: str = Field(default="", sa_type=Text)
    created_at: float = Field(sa_type=Seconds)


class QuotaLimitRow(_Table, table=True):
    """A tenant's own quota (``app_id`` empty) or one app's (``app_id``: the workflow id):
    runs per minute and tokens per day; NULL keeps the default (0: unlimited)."""

    __tablename__ = "quota_limits"
    __table_args__ = (sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),)

    tenant_id: str = Field(sa_type=Text, primary_key=True)
    app_id: str = Field(default="", sa_type=Text, primary_key=True)
    runs_per_minute: int | None = Field(default=None)
    tokens_per_day: int | None = Field(default=None, sa_type=sa.BigInteger)
    updated_at: float = Field(sa_type=Seconds)


class QuotaAdmissionRow(_Table, table=True):
    """A run start or continuation admitted under the quotas (the runs-per-minute window
    counts these rows; the tokens of the runs admitted since midnight make the day's use)."""

    __tablename__ = "quota_admissions"
    __table_args__ = (
        sa.Index("ix_quota_admissions_tenant_at", "tenant_id", "admitted_at"),
        sa.Index("ix_quota_admissions_tenant_app_at", "tenant_id", "app_id", "admitted_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    tenant_id: str = Field(sa_type=Text)
    app_id: str = Field(sa_type=Text)
    run_id: str = Field(sa_type=Text)
    admitted_at: float = Field(sa_type=Seconds)


class TokenUsageRow(_Table, table=True):
    """Model tokens a tenant spent outside runs (``source``: ``embedding`` for ingestion
    and searches of knowledge bases), counted in its tokens per day beside its runs'.
    ``app_id`` is empty for the tenant's own use, else the app whose key spent them."""

    __tablename__ = "token_usage"
    __table_args__ = (
        sa.Index("ix_token_usage_tenant_at", "tenant_id", "used_at"),
        sa.Index("ix_token_usage_tenant_app_at", "tenant_id", "app_id", "used_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    tenant_id: str = Field(sa_type=Text)
    app_id: str = Field(default="", sa_type=Text)
    source: str = Field(sa_type=Text)
    tokens: int = Field(sa_type=sa.BigInteger)
    cost: float = Field(default=0.0, sa_type=sa.Double)
    used_at: float = Field(sa_type=Seconds)


class WorkflowSecretRow(_Table, table=True):
    """The value of one secret environment variable of a workflow, encrypted
    (:mod:`workers.secret_box`; the tenant, workflow id and name are sealed with the
    value, so a token copied to another row does not open there). Kept by workflow id,
    not by document: every version of the workflow reads the current value."""

    __tablename__ = "workflow_secrets"

    tenant_id: str = Field(sa_type=Text, primary_key=True)
    workflow_id: str = Field(sa_type=Text, primary_key=True)
    name: str = Field(sa_type=Text, primary_key=True)
    token: str = Field(sa_type=Text)
    updated_at: float = Field(sa_type=Seconds)


class ModelProviderRow(_Table, table=True):
    """A tenant's own OpenAI-compatible endpoint (``preset``: which kind of server, for the
    canvas and the defaults it gave). ``api_key_token``: the key encrypted
    (:mod:`workers.secret_box`), NULL for none; ``api_key_mask``: what may be shown of it."""

    __tablename__ = "model_providers"
    __table_args__ = (sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),)

    tenant_id: str = Field(sa_type=Text, primary_key=True)
    provider_id: str = Field(sa_type=Text, primary_key=True)
    name: str = Field(default="", sa_type=Text)
    preset: str = Field(sa_type=Text)
    base_url: str = Field(sa_type=Text)
    api_key_token: str | None = Field(default=None, sa_type=Text)
    api_key_mask: str | None = Field(default=None, sa_type=Text)
    settings: Any = Field(default=None, sa_column=sa.Column(JsonValue))
    created_at: float = Field(sa_type=Seconds)
    updated_at: float = Field(sa_type=Seconds)


class ProviderModelRow(_Table, table=True):
    """A model of a tenant's provider, under the name the tenant's workflows use (unique
    per tenant whatever the provider). ``spec``: the registry fields (type, upstream id,
    context, output cap, capabilities, pricing) as JSON. Deleted with its provider."""

    __tablename__ = "provider_models"
    __table_args__ = (
        sa.ForeignKeyConstraint(
            ["tenant_id", "provider_id"],
            ["model_providers.tenant_id", "model_providers.provider_id"],
            ondelete="CASCADE",
        ),
        sa.Index("ix_provider_models_tenant_provider", "tenant_id", "provider_id"),
    )

    tenant_id: str = Field(sa_type=Text, primary_key=True)
    name: str = Field(sa_type=Text, primary_key=True)
    provider_id: str = Field(sa_type=Text)
    spec: Any = Field(sa_column=sa.Column(JsonValue, nullable=False))
    created_at: float = Field(sa_type=Seconds)
    updated_at: float = Field(sa_type=Seconds)


class TenantModelDefaultRow(_Table, table=True):
    """The tenant's default model of one type (``chat``, ``embedding``, ``rerank``): a
    model of its providers or of the operator's registry, by name."""

    __tablename__ = "tenant_model_defaults"
    __table_args__ = (sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),)

    tenant_id: str = Field(sa_type=Text, primary_key=True)
    type: str = Field(sa_type=Text, primary_key=True)
    model: str = Field(sa_type=Text)
    updated_at: float = Field(sa_type=Seconds)


class TenantModelOverrideRow(_Table, table=True):
    """A tenant's changes to one model's limits and capabilities (``override``: the
    :class:`~nodes.llm.model_overrides.ModelOverride` table, only the keys set), applied over
    the model as the tenant's registry has it."""

    __tablename__ = "tenant_model_overrides"
    __table_args__ = (sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),)

    tenant_id: str = Field(sa_type=Text, primary_key=True)
    model: str = Field(sa_type=Text, primary_key=True)
    override: Any = Field(sa_column=sa.Column(JsonValue, nullable=False))
    updated_at: float = Field(sa_type=Seconds)
