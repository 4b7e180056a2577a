"""Operator settings, read from ``FLOWLOOM_*`` environment variables.

Settings are the operator's, not the workflow's: a workflow can never widen what the
HTTP node may reach.
"""

from __future__ import annotations

import functools
import ipaddress
import os
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
    """

    model_config = SettingsConfigDict(env_prefix="FLOWLOOM_", extra="ignore")

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
    """Flowloom's data directory: ``$FLOWLOOM_HOME``, else ``~/.flowloom``.

    Per user, not per working directory, so a paused run saved by one process is found
    by ``flowloom resume`` started anywhere else. Read on every call (tests change it).
    """
    home = os.environ.get("FLOWLOOM_HOME")
    return Path(home).expanduser() if home else Path.home() / ".flowloom"


@functools.cache
def get_settings() -> Settings:
    """Process-wide settings (read once). Tests pass their own :class:`Settings` instead."""
    return Settings()
