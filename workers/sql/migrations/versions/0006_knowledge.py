"""Knowledge bases: datasets, their vector indexes, documents (with ingestion leases and
the parsed text), chunks (with their full-text terms) and vectors.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02

What Alembic does not create, and why:

* SQLite: each tenant's FTS5 table ``kb_fts_<hash>`` (external content over ``kb_chunks``)
  and its triggers are created by the knowledge store before the tenant's first chunk (``workers.knowledge.sqlite_base``):
  the store runs SQLite through ``sqlean`` (which can load extensions and has a recent
  FTS5), while Alembic runs on the interpreter's ``sqlite3``. Vectors are plain float32
  BLOBs in ``kb_vectors``: sqlite-vec's distance functions read them as they are, so no
  ``vec0`` virtual table (one fixed dimension per table) is needed, and the in-memory
  HNSW index is built from them.
* PostgreSQL: the ``embedding vector`` column exists only when the server has the
  ``vector`` extension (pgvector); without it the store works for full-text datasets and
  says so. The per-index HNSW indexes are partial expression indexes the store creates
  when an index's dimension becomes known (the dimension differs per index).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: A surrogate integer key: SQLite's rowid (AUTOINCREMENT: never reused, so a full-text
#: row or an in-memory index entry can not be mistaken for a later chunk or vector).
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    """Create the ``kb_*`` tables (and on PostgreSQL the ``vector`` extension and column when available)."""
    bind = op.get_bind()
    pg = bind.dialect.name == "postgresql"
    op.create_table(
        "kb_datasets",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False, server_default=""),
        sa.Column("embedding_model", sa.Text(), nullable=True),
        sa.Column("chunking", _json(), nullable=False),
        sa.Column("metadata_fields", _json(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
    )
    op.create_table(
        "kb_indexes",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("dataset_id", sa.Text(), nullable=False),
        sa.Column("embedding_model", sa.Text(), nullable=False),
        sa.Column("dimension", sa.Integer(), nullable=True),
        sa.Column("state", sa.Text(), nullable=False),
        # bumped when vectors of the index are deleted: in-memory indexes rebuild
        sa.Column("generation", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "dataset_id"], ["kb_datasets.tenant_id", "kb_datasets.id"], ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_kb_indexes_dataset", "kb_indexes", ["tenant_id", "dataset_id"])
    op.create_table(
        "kb_documents",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("dataset_id", sa.Text(), nullable=False),
        sa.Column("source_name", sa.Text(), nullable=False),
        sa.Column("content_type", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.Text(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("chunks_done", sa.Integer(), nullable=False),
        sa.Column("metadata", _json(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_until", sa.Double(), nullable=True),
        sa.Column("parsed_type", sa.Text(), nullable=True),
        sa.Column("parsed_text", sa.Text(), nullable=True),
        sa.Column("parsed_qa", _json(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id", "dataset_id"], ["kb_datasets.tenant_id", "kb_datasets.id"], ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ux_kb_documents_source", "kb_documents", ["tenant_id", "dataset_id", "source_name"], unique=True
    )
    op.create_index("ix_kb_documents_status", "kb_documents", ["status", "lease_until"])
    op.create_table(
        "kb_chunks",
        sa.Column("seq", _SEQ, nullable=False, autoincrement=True),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("dataset_id", sa.Text(), nullable=False),
        sa.Column("document_id", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("search_text", sa.Text(), nullable=False),
        sa.Column("text_hash", sa.Text(), nullable=False),
        sa.Column("heading_path", _json(), nullable=False),
        sa.Column("parent_id", sa.Text(), nullable=True),
        sa.Column("tokens", sa.Integer(), nullable=False),
        # the tokenised search text (workers.knowledge.text): what full text indexes
        sa.Column("search_terms", sa.Text(), nullable=True),
        *([sa.Column("search_vector", postgresql.TSVECTOR(), nullable=True)] if pg else []),
        sa.ForeignKeyConstraint(["document_id"], ["kb_documents.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id", name="ux_kb_chunks_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_kb_chunks_document", "kb_chunks", ["document_id", "position"])
    op.create_index("ix_kb_chunks_dataset", "kb_chunks", ["tenant_id", "dataset_id"])
    if pg:
        op.create_index("ix_kb_chunks_search", "kb_chunks", ["search_vector"], postgresql_using="gin")
    op.create_table(
        "kb_vectors",
        sa.Column("seq", _SEQ, nullable=False, autoincrement=True),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("index_id", sa.Text(), nullable=False),
        sa.Column("chunk_id", sa.Text(), nullable=False),
        *([] if pg else [sa.Column("embedding", sa.LargeBinary(), nullable=False)]),
        sa.ForeignKeyConstraint(["index_id"], ["kb_indexes.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["chunk_id"], ["kb_chunks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("index_id", "chunk_id", name="ux_kb_vectors_chunk"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_kb_vectors_chunk", "kb_vectors", ["chunk_id"])
    # the newest vector of an index, read before each in-memory search, is one index probe
    op.create_index("ix_kb_vectors_index_seq", "kb_vectors", ["index_id", "seq"])
    if pg:
        available = bind.execute(
            sa.text("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
        ).scalar()
        if available:
            op.execute("CREATE EXTENSION IF NOT EXISTS vector")
            op.execute("ALTER TABLE kb_vectors ADD COLUMN embedding vector NOT NULL")
    else:
        # deleting vectors (a chunk, a document, a retired index) makes in-memory HNSW indexes stale
        op.execute(
            "CREATE TRIGGER kb_vectors_deleted AFTER DELETE ON kb_vectors BEGIN "
            "UPDATE kb_indexes SET generation = generation + 1 WHERE id = old.index_id; END"
        )


def downgrade() -> None:
    """Drop the ``kb_*`` tables (and on SQLite the store's full-text table and triggers)."""
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for trigger in ("kb_vectors_deleted", "kb_chunks_fts_insert", "kb_chunks_fts_delete"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS kb_chunks_fts")
        # the tenants' full-text tables and their triggers (kb_fts_<hash>, made by the store)
        found = bind.execute(
            sa.text(
                "SELECT type, name FROM sqlite_master WHERE name GLOB 'kb_fts_*' AND type IN ('trigger', 'table')"
            )
        ).fetchall()
        for kind, name in sorted(found, key=lambda row: row[0] != "trigger"):  # triggers first
            if kind == "trigger":
                op.execute(f"DROP TRIGGER IF EXISTS {name}")
            elif not name.endswith(("_data", "_idx", "_docsize", "_config", "_content")):
                op.execute(f"DROP TABLE IF EXISTS {name}")  # a virtual table drops its shadow tables
    for table in ("kb_vectors", "kb_chunks", "kb_documents", "kb_indexes", "kb_datasets"):
        op.drop_table(table)
