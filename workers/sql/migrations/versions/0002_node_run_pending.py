"""Node runs keep the context a paused node needs to continue (``pending``).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``node_runs.pending`` (JSON, null for nodes that are not paused)."""
    with op.batch_alter_table("node_runs") as batch:
        batch.add_column(sa.Column("pending", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    """Drop ``node_runs.pending``."""
    with op.batch_alter_table("node_runs") as batch:
        batch.drop_column("pending")
