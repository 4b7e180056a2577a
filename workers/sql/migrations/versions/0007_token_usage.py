"""Token usage outside runs (embeddings of knowledge bases), counted in the daily token quota.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``token_usage`` (indexed by tenant and time, and by tenant, app and time)."""
    op.create_table(
        "token_usage",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("app_id", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost", sa.Double(), nullable=False),
        sa.Column("used_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_token_usage_tenant_at", "token_usage", ["tenant_id", "used_at"])
    op.create_index("ix_token_usage_tenant_app_at", "token_usage", ["tenant_id", "app_id", "used_at"])


def downgrade() -> None:
    """Drop ``token_usage``."""
    op.drop_index("ix_token_usage_tenant_app_at", table_name="token_usage")
    op.drop_index("ix_token_usage_tenant_at", table_name="token_usage")
    op.drop_table("token_usage")
