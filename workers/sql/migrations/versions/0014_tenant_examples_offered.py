"""When ``flowloom serve`` first offered a tenant the bundled examples, so that its first
start saves them even when the command line created the tenant before (``flowloom
datasets create``), and never again once a user deleted them.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``tenants.examples_offered_at`` (seconds; null: not offered yet). A tenant that
    exists already counts as offered at its creation: whether a server offered it the
    examples before cannot be told, and examples its users deleted must not come back."""
    op.add_column("tenants", sa.Column("examples_offered_at", sa.Double(), nullable=True))
    op.execute("UPDATE tenants SET examples_offered_at = created_at")


def downgrade() -> None:
    """Drop ``tenants.examples_offered_at``."""
    op.drop_column("tenants", "examples_offered_at")
