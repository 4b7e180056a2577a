"""Runs indexed by status and lease: the recovery loop's cross-tenant look for runs whose
owner is gone reads only the unfinished runs, not every run ever made.

Revision ID: 0006_runs_status_lease
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``ix_runs_status_lease`` on ``runs (status, lease_until)``."""
    op.create_index("ix_runs_status_lease", "runs", ["status", "lease_until"])


def downgrade() -> None:
    """Drop ``ix_runs_status_lease``."""
    op.drop_index("ix_runs_status_lease", table_name="runs")
