"""Conversation variables: the values a chat keeps across its turns, and the values a run
of a chat works with (checkpointed with the run, so a paused turn resumes with them).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``chats.variables`` and ``runs.conversation`` (JSON objects, null: none yet)."""
    op.add_column("chats", sa.Column("variables", sa.JSON(none_as_null=True), nullable=True))
    op.add_column("runs", sa.Column("conversation", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    """Drop ``runs.conversation`` and ``chats.variables``."""
    op.drop_column("runs", "conversation")
    op.drop_column("chats", "variables")
