"""Operator settings: the one place that reads ``FLOWLOOM_*`` environment variables.

Settings are the operator's, not the workflow's: a workflow can never widen what the
HTTP node may reach. Every other module receives a :class:`Settings` (in
:class:`~engine.context.RunDeps` or as an argument) instead of reading the environment.
"""

from __future__ import annotations

import functools
import ipaddress
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from typing import Annotated, Literal

__all__ = ["Settings", "flowloom_home", "get_settings"]


class Settings(BaseSettings):
    """Flowloom settings.

    ``http_allow``: hosts, IPs or CIDR networks the HTTP node may reach even though
    they are loopback/private/link-local (comma separated in ``FLOWLOOM_HTTP_ALLOW``,
    e.g. ``127.0.0.1,10.0.0.0/8,intranet.example``). A host entry matches the URL's
    host name; an IP/CIDR entry matches the resolved address.

    Code node (:mod:`nodes.sandbox`): ``code_sandbox`` is ``bwrap`` (default: user code
    runs in a bubblewrap sandbox) or ``none``. Without a working sandbox code nodes are
    refused unless ``allow_unsandboxed_code`` (``FLOWLOOM_ALLOW_UNSANDBOXED_CODE=1``)
    opts in to running code with only resource limits and a clean environment.
    ``code_bwrap`` / ``code_node``: the bwrap and Node.js executables (name on PATH or path).

    Storage: ``home`` (default ``~/.flowloom``) holds the embedded SQLite database
    ``flowloom.db``, node memory files and uploads; ``database_url`` points the run
    store at PostgreSQL (or another SQLite file) instead; ``redis_url`` keeps node
    memory in Redis. ``lease_ttl``: seconds a process owns a run without renewing its
    lease (a crashed owner's run becomes recoverable after it). ``workflow_path``:
    directories searched for workflows used as tools. ``models``: the model registry
    file (default: the bundled one). ``upload_dir``: the only directory the agent's file
    reader may read (default ``<home>/uploads``).
    """

    model_config = SettingsConfigDict(env_prefix="FLOWLOOM_", extra="ignore")

    home: Path = Field(default_factory=lambda: Path.home() / ".flowloom")
    database_url: str | None = None
    redis_url: str | None = None
    lease_ttl: float = Field(default=30.0, gt=0, le=3600)
    workflow_path: Annotated[list[Path], NoDecode] = Field(default_factory=list)
    models: Path | None = None
    upload_dir: Path | None = None

    http_allow: Annotated[list[str], NoDecode] = Field(default_factory=list)
    http_max_response_bytes: int = Field(default=10 * 1024 * 1024, gt=0)
    http_user_agent: str = "flowloom/0.1"
    code_sandbox: Literal["bwrap", "none"] = "bwrap"
    allow_unsandboxed_code: bool = False
    code_bwrap: str = "bwrap"
    code_node: str = "node"

    @field_validator("http_allow", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("workflow_path", mode="before")
    @classmethod
    def _split_paths(cls, value: object) -> object:
        import os

        if isinstance(value, str):  # os.pathsep-separated, like PATH
            return [part for part in value.split(os.pathsep) if part.strip()]
        return value

    @field_validator("home", "models", "upload_dir", mode="after")
    @classmethod
    def _expand_user(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator("redis_url", "database_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return value

    @property
    def uploads(self) -> Path:
        """The directory the agent's file reader may read, resolved."""
        return (self.upload_dir or self.home / "uploads").resolve()

    @field_validator("http_allow")
    @classmethod
    def _check_networks(cls, entries: list[str]) -> list[str]:
        # A malformed network must be an error, not an entry that silently matches nothing.
        for entry in entries:
            if "/" in entry:  # host names have no "/": this is meant as a network
                try:
                    ipaddress.ip_network(entry.replace("[", "").replace("]", ""), strict=False)
                except ValueError as exc:
                    raise ValueError(f"{entry!r} is not a valid network: {exc}") from None
        return entries


def flowloom_home() -> Path:
    """Flowloom's data directory (``Settings.home``): ``$FLOWLOOM_HOME``, else ``~/.flowloom``.

    Per user, not per working directory, so a paused run saved by one process is found
    by ``flowloom resume`` started anywhere else. Read on every call (tests change it).
    """
    return Settings().home


@functools.cache
def get_settings() -> Settings:
    """Process-wide settings (read once). Tests pass their own :class:`Settings` instead."""
    return Settings()
