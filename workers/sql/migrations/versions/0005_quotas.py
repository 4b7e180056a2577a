"""Quotas: a tenant's or an app's own limits, and the admissions they are counted on.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``quota_limits`` (per tenant and app) and ``quota_admissions`` (indexed by time)."""
    op.create_table(
        "quota_limits",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("app_id", sa.Text(), nullable=False),
        sa.Column("runs_per_minute", sa.Integer(), nullable=True),
        sa.Column("tokens_per_day", sa.BigInteger(), nullable=True),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("tenant_id", "app_id"),
    )
    op.create_table(
        "quota_admissions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("app_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("admitted_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_quota_admissions_tenant_at", "quota_admissions", ["tenant_id", "admitted_at"])
    op.create_index(
        "ix_quota_admissions_tenant_app_at", "quota_admissions", ["tenant_id", "app_id", "admitted_at"]
    )


def downgrade() -> None:
    """Drop ``quota_admissions`` then ``quota_limits``."""
    op.drop_index("ix_quota_admissions_tenant_app_at", table_name="quota_admissions")
    op.drop_index("ix_quota_admissions_tenant_at", table_name="quota_admissions")
    op.drop_table("quota_admissions")
    op.drop_table("quota_limits")
