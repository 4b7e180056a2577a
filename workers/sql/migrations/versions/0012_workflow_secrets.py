"""Secret values of workflows' environment variables, encrypted.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``workflow_secrets`` (one row per tenant, workflow id and name)."""
    op.create_table(
        "workflow_secrets",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("workflow_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("token", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "workflow_id", "name"),
    )


def downgrade() -> None:
    """Drop ``workflow_secrets``."""
    op.drop_table("workflow_secrets")
