"""FLOWLOOM_HOME and the embedded stores in it are private to the user running Flowloom:
the home is created 0700, the run store (``flowloom.db`` and its ``-wal``/``-shm``) and
the knowledge store (``flowloom-knowledge.db`` and its own) are 0600, new or older."""

from __future__ import annotations

import os
import stat
import uuid

from api.composition import database_url, knowledge_database_url
from engine.settings import Settings
from schemas.run import RunState
from workers.knowledge import open_knowledge_store
from workers.sql import SqlStore

STORES = ("flowloom.db", "flowloom-knowledge.db")


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


async def open_both(settings: Settings) -> None:
    """Open both stores as a server does, write to each (so their -wal/-shm exist), check
    the modes while they are open, and close them."""
    store = await SqlStore.open(database_url(settings))
    knowledge = await open_knowledge_store(knowledge_database_url(settings), settings.home)
    try:
        await store.create_run(RunState(run_id=f"run-{uuid.uuid4().hex}", workflow_id="wf", workflow_hash="h" * 8))
        for name in STORES:
            for suffix in ("", "-wal", "-shm"):
                path = settings.home / f"{name}{suffix}"
                assert path.exists(), path
                assert mode(path) == 0o600, f"{path.name} is {oct(mode(path))}"
    finally:
        await knowledge.close()
        await store.close()


async def test_a_new_home_is_0700_and_its_stores_0600(tmp_path):
    old = os.umask(0o022)  # the usual umask, whatever the test runner's
    try:
        settings = Settings(home=tmp_path / "home")
        await open_both(settings)
        assert mode(settings.home) == 0o700
    finally:
        os.umask(old)


async def test_store_files_an_older_version_left_readable_are_narrowed(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    for name in STORES:
        for suffix in ("", "-wal", "-shm"):
            path = home / f"{name}{suffix}"
            path.touch()
            path.chmod(0o644)
    await open_both(Settings(home=home))
    assert mode(home) == 0o755  # a directory that exists is the operator's: its files are private
