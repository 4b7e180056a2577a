"""Runs say whether their token totals are partly estimated (the model server did not
report some usage), so a list of runs shows it without reading every node run.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``runs.usage_estimated`` (false for every run before it: their totals stay as counted)."""
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column("usage_estimated", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    """Drop ``runs.usage_estimated``."""
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("usage_estimated")
