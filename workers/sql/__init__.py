"""The SQL storage of runs, events, commands and chats (SQLite by default, or PostgreSQL).

:class:`SqlStore` implements the engine's ``RunStore``, ``EventLog``, ``CommandChannel``
and ``ChatStore`` ports on SQLAlchemy Core tables whose schema only Alembic migrations create
(:func:`upgrade`, :func:`downgrade`; :meth:`SqlStore.open` upgrades on first use)::

    store = await SqlStore.open(default_database_url(home))   # sqlite+aiosqlite:///<home>/flowloom.db
    store = await SqlStore.open("postgresql://user@host/flowloom")
"""

from .connect import default_database_url, mask_url, normalize_url
from .migrate import current_revision, downgrade, head_revision, upgrade
from .store import SqlStore

__all__ = [
    "SqlStore",
    "current_revision",
    "default_database_url",
    "downgrade",
    "head_revision",
    "mask_url",
    "normalize_url",
    "upgrade",
]
