"""The SQL database of a test, on each backend the run store supports.

``database_url`` is parametrised over :data:`BACKENDS`, so a test that asks for it runs
once per backend (ids ``[sqlite]`` and ``[postgres]``). Each run gets a database of its
own, empty (no schema; ``SqlStore.open`` and ``upgrade`` migrate it), so a test may
count commits, list every run or migrate down without seeing another test's rows:

- ``sqlite``: a file ``<tmp_path>/db/flowloom.db`` (the store makes its folder);
- ``postgres``: a new database on the test server (:mod:`tests.support.postgres`),
  dropped after the test.

The URLs are the plain ones a user writes (``sqlite:///...``, ``postgresql://...``);
Flowloom maps them to its async drivers. A test module that must stay on one backend
overrides ``database_url`` with a fixture of the same name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["BACKENDS", "database_url", "sqlite_url"]

#: the backends a test of ``database_url`` runs on (the test ids' suffixes)
BACKENDS = ("sqlite", "postgres")


def sqlite_url(folder: Path) -> str:
    """The URL of a SQLite file ``<folder>/db/flowloom.db``."""
    return f"sqlite:///{folder / 'db' / 'flowloom.db'}"


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database of the backend of the test's parameter. A sync fixture
    on purpose: the PostgreSQL database is made and dropped with an event loop of its
    own, outside the test's. It is dropped right after the test (after the fixtures that
    use it have closed their connections), so a session never holds hundreds of them
    and their cost is not all paid at its end."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path)
        return
    databases = request.getfixturevalue("make_postgres_database")
    url = databases()
    yield url
    databases.drop(url)
