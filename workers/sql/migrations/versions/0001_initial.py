"""Initial schema: runs, node runs, events, commands, chats, messages, workflow documents.

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create every table of the store."""
    op.create_table(
        "chats",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("chat_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "chat_id"),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("workflow_id", sa.Text(), nullable=False),
        sa.Column("workflow_version", sa.Text(), nullable=True),
        sa.Column("workflow_hash", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("chat_id", sa.Text(), nullable=True),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("inputs", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("sys", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("variables", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("interrupts", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("outputs", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("error", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("node_executions", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("deadline", sa.Double(), nullable=True),
        sa.Column("wall_time_left", sa.Double(), nullable=True),
        sa.Column("paused_at", sa.Double(), nullable=True),
        sa.Column("waited_s", sa.Double(), nullable=False),
        sa.Column("tokens_in", sa.BigInteger(), nullable=False),
        sa.Column("tokens_out", sa.BigInteger(), nullable=False),
        sa.Column("cost", sa.Double(), nullable=False),
        sa.Column("owner_id", sa.Text(), nullable=True),
        sa.Column("owner_host", sa.Text(), nullable=True),
        sa.Column("owner_pid", sa.Integer(), nullable=True),
        sa.Column("lease_until", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("run_id"),
    )
    op.create_index("ix_runs_created_at", "runs", ["created_at"])
    op.create_index("ix_runs_tenant_chat", "runs", ["tenant_id", "chat_id"])
    op.create_index("ix_runs_tenant_status", "runs", ["tenant_id", "status"])
    op.create_index("ix_runs_tenant_workflow", "runs", ["tenant_id", "workflow_id"])
    op.create_table(
        "workflow_docs",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.Text(), nullable=False),
        sa.Column("doc", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "content_hash"),
    )
    op.create_table(
        "messages",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("chat_id", sa.Text(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("parts", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "chat_id"], ["chats.tenant_id", "chats.chat_id"], ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
    )
    op.create_index("ix_messages_tenant_chat_created", "messages", ["tenant_id", "chat_id", "created_at"])
    op.create_table(
        "node_runs",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("node_run_id", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("node_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("current", sa.Boolean(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("inputs", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("outputs", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("handles", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("error", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("waited_s", sa.Double(), nullable=False),
        sa.Column("usage", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("data", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("loop_id", sa.Text(), nullable=True),
        sa.Column("iteration", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "node_run_id"),
    )
    op.create_index("ix_node_runs_run_node", "node_runs", ["run_id", "node_id"])
    op.create_table(
        "run_commands",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_run_commands_run_id", "run_commands", ["run_id", "id"])
    op.create_table(
        "run_events",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("node_id", sa.Text(), nullable=True),
        sa.Column("payload", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("ts", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "seq"),
    )


def downgrade() -> None:
    """Drop every table of the store (children first)."""
    op.drop_table("run_events")
    op.drop_index("ix_run_commands_run_id", table_name="run_commands")
    op.drop_table("run_commands")
    op.drop_index("ix_node_runs_run_node", table_name="node_runs")
    op.drop_table("node_runs")
    op.drop_index("ix_messages_tenant_chat_created", table_name="messages")
    op.drop_table("messages")
    op.drop_table("workflow_docs")
    op.drop_index("ix_runs_tenant_workflow", table_name="runs")
    op.drop_index("ix_runs_tenant_status", table_name="runs")
    op.drop_index("ix_runs_tenant_chat", table_name="runs")
    op.drop_index("ix_runs_created_at", table_name="runs")
    op.drop_table("runs")
    op.drop_table("chats")
