"""A tenant's overrides of models' limits and capabilities.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``tenant_model_overrides``."""
    op.create_table(
        "tenant_model_overrides",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("override", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("tenant_id", "model"),
    )


def downgrade() -> None:
    """Drop the table."""
    op.drop_table("tenant_model_overrides")
