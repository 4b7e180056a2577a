"""Saved workflows (a draft with its version) and their published versions.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-09
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``workflows`` and ``workflow_versions`` (deleted with their workflow)."""
    op.create_table(
        "workflows",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("workflow_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("draft", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("draft_version", sa.Integer(), nullable=False),
        sa.Column("published_version", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "workflow_id"),
    )
    op.create_table(
        "workflow_versions",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("workflow_id", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("doc_hash", sa.Text(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "workflow_id"], ["workflows.tenant_id", "workflows.workflow_id"], ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("tenant_id", "workflow_id", "version"),
    )


def downgrade() -> None:
    """Drop ``workflow_versions`` then ``workflows``."""
    op.drop_table("workflow_versions")
    op.drop_table("workflows")
