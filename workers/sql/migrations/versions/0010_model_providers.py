"""Model providers managed per tenant: their endpoints (keys encrypted), their models and
the tenant's default model of each type.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``model_providers``, ``provider_models`` and ``tenant_model_defaults``."""
    op.create_table(
        "model_providers",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("provider_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("preset", sa.Text(), nullable=False),
        sa.Column("base_url", sa.Text(), nullable=False),
        sa.Column("api_key_token", sa.Text(), nullable=True),
        sa.Column("api_key_mask", sa.Text(), nullable=True),
        sa.Column("settings", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("tenant_id", "provider_id"),
    )
    op.create_table(
        "provider_models",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("provider_id", sa.Text(), nullable=False),
        sa.Column("spec", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "provider_id"],
            ["model_providers.tenant_id", "model_providers.provider_id"],
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "name"),
    )
    op.create_index("ix_provider_models_tenant_provider", "provider_models", ["tenant_id", "provider_id"])
    op.create_table(
        "tenant_model_defaults",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.tenant_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("tenant_id", "type"),
    )


def downgrade() -> None:
    """Drop the three tables."""
    op.drop_table("tenant_model_defaults")
    op.drop_index("ix_provider_models_tenant_provider", table_name="provider_models")
    op.drop_table("provider_models")
    op.drop_table("model_providers")
