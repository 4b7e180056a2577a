"""Operator settings: the one place that reads ``FLOWLOOM_*`` environment variables.

Settings are the operator's, not the workflow's: a workflow can never widen what the
HTTP node may reach. Every other module receives a :class:`Settings` (in
:class:`~engine.context.RunDeps` or as an argument) instead of reading the environment.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

__all__ = ["SECRET_ENV_PREFIX", "Settings", "get_settings", "private_directory", "private_file"]

#: A workflow's ``{{secret:NAME}}`` reads the environment variable ``FLOWLOOM_SECRET_NAME``
#: (or the ``.env`` file): secrets live with the deployment, never in a workflow.
SECRET_ENV_PREFIX = "FLOWLOOM_SECRET_"


class Settings(BaseSettings):
    """Flowloom settings.

    ``http_allow``: hosts, IPs or CIDR networks the HTTP node may reach even though
    they are loopback/private/link-local (comma separated in ``FLOWLOOM_HTTP_ALLOW``,
    e.g. ``127.0.0.1,10.0.0.0/8,intranet.example``). A host entry matches the URL's
    host name; an IP/CIDR entry matches the resolved address.

    Code node (:mod:`nodes.sandbox.process`): ``code_sandbox`` is ``bwrap`` (default: user code
    runs in a bubblewrap sandbox) or ``none``. Without a working sandbox code nodes are
    refused unless ``allow_unsandboxed_code`` (``FLOWLOOM_ALLOW_UNSANDBOXED_CODE=1``)
    opts in to running code with only resource limits and a clean environment.
    ``code_bwrap`` / ``code_node``: the bwrap and Node.js executables (name on PATH or path).

    Storage: ``home`` (default ``~/.flowloom``) holds the embedded SQLite database
    ``flowloom.db``, node memory files and uploads; ``database_url`` points the run
    store at PostgreSQL (or another SQLite file) instead; ``redis_url`` keeps node
    memory in Redis. ``lease_ttl``: seconds a process owns a run without renewing its
    lease (a crashed owner's run becomes recoverable after it). ``recovery_concurrency``
    (``FLOWLOOM_RECOVERY_CONCURRENCY``, 0: off): how many runs whose owner died a
    ``flowloom serve`` or ``flowloom worker`` process continues at once, found on start and
    then every ``lease_ttl``/2 seconds (:mod:`engine.recovery`). ``workflow_path``:
    directories searched for workflows used as tools. ``models``: the model registry
    file (default: the bundled one); ``models_override`` (``FLOWLOOM_MODELS_OVERRIDE``): a
    file of changes merged key by key over it (default ``<home>/models.override.toml``,
    read when it exists; :mod:`nodes.llm.model_overrides`). ``upload_dir``: the only directory the agent's file
    reader may read (default ``<home>/uploads``).

    Models: ``llm_base_url_override`` (``FLOWLOOM_LLM_BASE_URL_OVERRIDE``) sends every
    registry model to one OpenAI-compatible endpoint (Ollama, llama.cpp, vLLM on this
    machine) instead of its provider's URL, so an imported flow naming OpenAI or
    DeepSeek models runs against a local server without editing the registry;
    ``llm_model_override`` (``FLOWLOOM_LLM_MODEL_OVERRIDE``) also replaces every chat
    model's upstream id, since a local server rarely serves the cloud model names
    (embedding and rerank models keep theirs).

    MCP tool sources (:mod:`nodes.agent.mcp_tools`): ``mcp_allow_stdio``
    (``FLOWLOOM_MCP_ALLOW_STDIO=1``) lets tool nodes start stdio MCP servers (a command the
    workflow names runs on this machine, so it is off by default); HTTP MCP servers follow
    ``http_allow``. A workflow's ``{{secret:NAME}}`` reads the variable
    ``FLOWLOOM_SECRET_NAME`` through :meth:`environ` at run time.

    Canvas: ``web_dist`` (``FLOWLOOM_WEB_DIST``): the built web app ``flowloom serve``
    serves at ``/`` (default: ``web/dist`` of the source tree, :mod:`api.static`).

    ``.env``: a ``.env`` file in the working directory is read too (as Dify and
    FastGPT users keep their keys), for ``FLOWLOOM_*`` settings and, through
    :meth:`environ`, for the provider keys the model registry names; a variable set in
    the real environment wins over the file.

    Size and depth caps (README "Limits"): exceeding one fails the compile (document
    caps) or the node (run caps) with a reason naming the cap, never a traceback or a
    hang. ``max_document_bytes`` / ``max_document_depth``: a workflow document's JSON
    size in bytes and nesting depth (objects and arrays); ``max_nodes``: nodes per
    workflow; ``max_id_length`` / ``max_name_length``: characters of a node or edge id and
    of a node's name (or description); ``max_template_output_bytes``: bytes one template
    render may produce, and the size of every value it builds on the way (``'a' * n``,
    ``s ~ s``, ``join``, ``format``, a list grown by ``append``...);
    ``max_template_memory_bytes``: what one render may build in all, so it cannot hold
    more at once however it builds its values; ``max_template_seconds``: how long one
    render may run (it runs in the server's event loop);
    ``max_node_output_bytes``: the size (string bytes plus 8 per other value) of one node
    run's outputs - which also bounds what a run record stores per node run;
    ``max_run_output_bytes``: the outputs of all node runs of one run together (loop rounds
    included), so a run record stays bounded however many nodes or rounds it has.

    HTTP API and run lifecycle: ``max_request_bytes`` (``FLOWLOOM_MAX_REQUEST_BYTES``):
    the largest request body the API reads (a larger one is refused with 413 before it
    is read); ``run_idle_timeout_s`` (``FLOWLOOM_RUN_IDLE_TIMEOUT_S``, 0: off): a run
    that produces no event for this many seconds (a provider that sent its headers and
    then nothing) fails with a reason naming the interval and the node, so no run and no
    stream is held forever; ``store_retry_s`` (``FLOWLOOM_STORE_RETRY_S``, 0: no retry):
    how long an executing run waits for a store that fails on it (a database
    restarting, a full disk) before it stops - its checkpoints are retried meanwhile, so
    an outage shorter than this costs the run a pause and nothing else. Quotas (defaults of every tenant; 0: unlimited; a tenant or
    an app may get its own through the API or ``flowloom quotas``):
    ``quota_runs_per_minute`` (``FLOWLOOM_QUOTA_RUNS_PER_MINUTE``): run starts and
    continuations admitted in any 60 seconds; ``quota_tokens_per_day``
    (``FLOWLOOM_QUOTA_TOKENS_PER_DAY``): model tokens (in + out) per UTC day.

    Metrics (Prometheus): ``metrics`` (``FLOWLOOM_METRICS``, default true): the server
    counts and serves ``GET /metrics`` (no key: counts only, no tenant data);
    ``metrics_port`` (``FLOWLOOM_METRICS_PORT``): serve them on that port instead of the
    API's (then ``/metrics`` on the API port answers 404), on ``metrics_host``
    (``FLOWLOOM_METRICS_HOST``, default 127.0.0.1); a worker's are on its ``--metrics-port``.
    ``log_format`` (``FLOWLOOM_LOG_FORMAT``): ``text`` (default) or ``json`` - the server's
    and a worker's log records as JSON objects carrying their tenant, run and node ids.

    Knowledge bases: ``knowledge_max_document_bytes``
    (``FLOWLOOM_KNOWLEDGE_MAX_DOCUMENT_BYTES``): the largest document a dataset accepts
    (a larger upload is rejected with 413, the other files of its batch kept).
    ``knowledge_full_text_memory_mb`` (``FLOWLOOM_KNOWLEDGE_FULL_TEXT_MEMORY_MB``, default
    256, 0: off): the memory the SQLite knowledge store may keep its in-memory full-text
    indexes in (about 0.6 MB per thousand chunks of 400 characters; the least recently
    searched tenants are dropped first, and their searches are ranked by FTS5 until rebuilt).
    """

    model_config = SettingsConfigDict(
        env_prefix="FLOWLOOM_",
        extra="ignore",
        env_file=".env",
        env_file_encoding="utf-8",
        env_ignore_empty=True,
    )

    home: Path = Field(default_factory=lambda: Path.home() / ".flowloom")
    database_url: str | None = None
    redis_url: str | None = None
    lease_ttl: float = Field(default=30.0, gt=0, le=3600)
    recovery_concurrency: int = Field(default=4, ge=0, le=256)
    workflow_path: Annotated[list[Path], NoDecode] = Field(default_factory=list)
    models: Path | None = None
    models_override: Path | None = None
    upload_dir: Path | None = None

    http_allow: Annotated[list[str], NoDecode] = Field(default_factory=list)
    http_max_response_bytes: int = Field(default=10 * 1024 * 1024, gt=0)
    http_user_agent: str = "flowloom/0.1"
    code_sandbox: Literal["bwrap", "none"] = "bwrap"
    allow_unsandboxed_code: bool = False
    code_bwrap: str = "bwrap"
    code_node: str = "node"
    mcp_allow_stdio: bool = False

    max_document_bytes: int = Field(default=8 * 1024 * 1024, gt=0)
    max_document_depth: int = Field(default=64, ge=8, le=500)
    max_nodes: int = Field(default=10_000, gt=0)
    max_id_length: int = Field(default=128, gt=0)
    max_name_length: int = Field(default=512, gt=0)
    max_template_output_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    max_template_memory_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    max_template_seconds: float = Field(default=2.0, gt=0)
    max_node_output_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    max_run_output_bytes: int = Field(default=256 * 1024 * 1024, gt=0)
    _dotenv: dict[str, str] | None = PrivateAttr(default=None)
    llm_base_url_override: str | None = None
    llm_model_override: str | None = None
    web_dist: Path | None = None

    max_request_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    run_idle_timeout_s: float = Field(default=300.0, ge=0)
    store_retry_s: float = Field(default=30.0, ge=0)
    quota_runs_per_minute: int = Field(default=0, ge=0)
    quota_tokens_per_day: int = Field(default=0, ge=0)
    knowledge_max_document_bytes: int = Field(default=20 * 1024 * 1024, gt=0)
    knowledge_full_text_memory_mb: int = Field(default=256, ge=0)
    metrics: bool = True
    metrics_port: int | None = Field(default=None, gt=0, le=65535)
    metrics_host: str = "127.0.0.1"
    log_format: Literal["text", "json"] = "text"

    @field_validator("http_allow", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("workflow_path", mode="before")
    @classmethod
    def _split_paths(cls, value: object) -> object:
        if isinstance(value, str):  # os.pathsep-separated, like PATH
            return [part for part in value.split(os.pathsep) if part.strip()]
        return value

    @field_validator("home", "models", "models_override", "upload_dir", mode="after")
    @classmethod
    def _expand_user(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator(
        "redis_url",
        "database_url",
        "llm_base_url_override",
        "llm_model_override",
        "models",
        "models_override",
        "upload_dir",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        # Refused here, by name, rather than when the store first opens: a typo would
        # otherwise surface as a driver error far from the setting that caused it.
        # The value itself is never echoed: it may hold a password.
        if value is None:
            return value
        scheme, sep, _rest = value.partition("://")
        if not sep or scheme.split("+")[0].lower() not in ("sqlite", "postgresql", "postgres"):
            raise ValueError("must be a sqlite:///PATH or postgresql://USER:PASSWORD@HOST/DB URL")
        return value

    @field_validator("llm_base_url_override")
    @classmethod
    def _check_base_url(cls, value: str | None) -> str | None:
        if value is not None and not value.strip().startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL (e.g. http://127.0.0.1:11434/v1)")
        return value.strip().rstrip("/") if value is not None else None

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return value

    def environ(self) -> Mapping[str, str]:
        """The process environment over the ``.env`` file: every variable, not only
        ``FLOWLOOM_*`` (provider keys such as ``OPENAI_API_KEY`` are read from it).

        The real environment wins over the file, as for the settings themselves. The
        mapping is live for the real environment (a rotated key takes effect) and reads
        the file once per :class:`Settings`. This is the one place besides the settings
        fields that reads the environment: the model registry receives this mapping.
        """
        # the file's values from pydantic's private store: ``self._dotenv`` goes through
        # BaseModel.__getattr__ (about 25x a field read), and every run start asks
        dotenv = self.__pydantic_private__["_dotenv"]  # type: ignore[index]  # pydantic types it Optional; set for every model with private attributes
        if dotenv is None:
            dotenv = self._dotenv = _read_env_file(self.model_config.get("env_file"))
        return collections.ChainMap(os.environ, dotenv)

    @property
    def models_override_path(self) -> Path:
        """The model override file: ``models_override``, else ``<home>/models.override.toml``."""
        return self.models_override or self.home / "models.override.toml"

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


def _read_env_file(env_file: Any) -> dict[str, str]:
    """The variables of ``env_file`` (a path, or None), empty when it does not exist."""
    if env_file is None or not Path(env_file).is_file():
        return {}
    from dotenv import dotenv_values  # a dependency of pydantic-settings

    return {k: v for k, v in dotenv_values(env_file, encoding="utf-8").items() if v is not None}


@functools.cache
def get_settings() -> Settings:
    """Process-wide settings (read once). Tests pass their own :class:`Settings` instead."""
    return Settings()


def private_directory(path: Path) -> Path:
    """``path`` (``FLOWLOOM_HOME`` or a directory in it) created when missing, mode 0700:
    the home holds every tenant's documents, inputs, outputs and chats, which no other
    local user may list or read. An existing directory keeps its mode (it may be a
    directory the operator chose and shares); the files in it are private on their own
    (:func:`private_file`). Parent directories created on the way get the default mode.

    Raises:
        OSError: the directory cannot be created.
    """
    path = Path(path).expanduser()
    if not path.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
    return path


def private_file(path: Path, *companions: str) -> Path:
    """``path`` created empty when missing and, like each existing ``path + companion``
    (``-wal``, ``-shm``), made mode 0600 (an older file with wider rights is narrowed).
    SQLite creates a database's ``-wal`` and ``-shm`` files with the database file's mode,
    so creating the database 0600 first keeps them private too.

    Raises:
        OSError: the file cannot be created or its mode set.
    """
    path = Path(path).expanduser()
    private_directory(path.parent)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    for name in (str(path), *(str(path) + c for c in companions)):
        with contextlib.suppress(FileNotFoundError, PermissionError):  # PermissionError: another user's file
            os.chmod(name, 0o600)
    return path
