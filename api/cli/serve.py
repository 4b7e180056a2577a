"""``flowloom serve``: the HTTP API (FastAPI on uvicorn) and the web canvas on the
embedded defaults.

The same stores as the CLI (SQLite under ``FLOWLOOM_HOME`` unless
``FLOWLOOM_DATABASE_URL`` says otherwise), runs executed in the server process; no
Redis or other service needed. A port it cannot listen on is one line and exit 2, before
anything else is printed. It prints:

- the canvas URL (the built web app at ``/``, :mod:`api.static`);
- a **login URL** ``http://HOST:PORT/#key=...`` when it listens on a loopback address
  (or with ``--login-url``): the key is an admin key of tenant ``default`` named
  ``canvas (flowloom serve)``, created once and stored hashed like every key; its plain
  value is kept only in ``$FLOWLOOM_HOME/canvas-key`` (mode 0600), so every restart
  prints the same URL. The key is in the URL's fragment, which browsers never send
  to the server (it stays out of access logs); the canvas moves it to its local storage.
  Revoking it (``flowloom keys revoke``) makes the next start create a new one;
- on a first start (no admin key of your own yet) how to create one for API clients;
- with ``--examples`` (by default on the first start of ``serve`` on the database, even
  when the command line created tenant ``default`` before) the bundled examples saved as
  workflows (:mod:`api.examples`); a later start without the flag saves none (examples
  a user deleted stay deleted) and, when the tenant has none of them, says so and how
  to save them;
- a warning when the PostgreSQL server has no pgvector (datasets with an embedding
  model and semantic search are then unavailable; full-text ones work).

The access log (uvicorn's, on stdout) never holds a secret: a key sent in the query
string (``?api_key=``, ``?token=``...) or anywhere in the path is written ``***``
(:mod:`api.logs`). The error log (``$FLOWLOOM_HOME/flowloom.log``) falls back to stderr
when it cannot be written (a full disk).

Runs whose owner died (this server killed with runs in flight, a killed ``flowloom run``)
continue by themselves once it serves: the app's recovery loop (:mod:`api.recovery`)
finds them on start and then periodically; ``flowloom recover`` is not needed.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from .common import EXIT_INVALID, app, err, settings
from .running import with_service

__all__ = ["CANVAS_KEY_FILE", "CANVAS_KEY_NAME", "serve"]

#: the name of the key behind the login URL
CANVAS_KEY_NAME = "canvas (flowloom serve)"
#: the file under FLOWLOOM_HOME keeping the login URL's key (mode 0600)
CANVAS_KEY_FILE = "canvas-key"


@dataclass
class _Start:
    """What the start found or did before serving."""

    needs_admin_key: bool
    login_key: str | None
    examples: Any = None
    #: how many bundled examples there are when this start saved none and tenant default
    #: has none of them (0: it has some, or the start saved them or was told not to)
    examples_unsaved: int = 0
    vector_warning: str | None = None


def _loopback(host: str) -> bool:
    """True for an address only this machine reaches (127.0.0.0/8, ::1, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by this user only (created 0600, never wider)."""
    from engine.settings import private_directory  # on use: --help loads no engine

    private_directory(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
    os.chmod(path, 0o600)  # an older file with wider rights is narrowed too


async def _canvas_key(keys: Any, home: Path) -> str:
    """The login key: the one kept in ``home/canvas-key`` while it is still an active admin
    key of tenant ``default`` in this database, else a new one (kept there)."""
    path = home / CANVAS_KEY_FILE
    try:
        kept = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        kept = ""
    if kept:
        key = await keys.authenticate(kept)
        if key is not None and key.tenant_id == "default" and key.admin and key.app_id is None:
            return kept
    _record, plaintext = await keys.create_key("default", name=CANVAS_KEY_NAME, admin=True)
    _write_private(path, plaintext)
    return plaintext


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"  # listening everywhere: this machine reaches it on loopback
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _print_start(start: _Start, base: str, dist: Path, login_asked: bool | None, loopback: bool) -> None:
    from api.static import BUILD_COMMAND

    console = err()
    built = (dist / "index.html").is_file()
    hint = "" if built else f"  (not built yet: {BUILD_COMMAND})"
    if start.login_key is not None:
        console.print(Text.assemble(("canvas", "bold"), f": {base}/#key={start.login_key}{hint}"))
        console.print(
            Text(
                "  (logs the browser in as an admin of tenant default: keep this URL private; "
                "--no-login-url to leave it out)",
                style="dim",
            )
        )
    else:
        why = (
            "--login-url prints a login link"
            if login_asked is None and not loopback
            else "sign in with an API key"
        )
        console.print(Text.assemble(("canvas", "bold"), f": {base}/  ({why}){hint}"))
    if start.needs_admin_key:
        lead = "the canvas key is for the browser; scripts" if start.login_key is not None else "API clients"
        console.print(
            Text(
                f"{lead} should use a key of their own: `flowloom keys create --admin --name admin` "
                "(printed once), sent as `Authorization: Bearer <key>`",
                style="yellow",
            )
        )
    if start.examples_unsaved:
        console.print(
            Text(
                f"examples: not saved (tenant default has none of the {start.examples_unsaved} bundled "
                "examples); `flowloom serve --examples` saves them",
                style="yellow",
            )
        )
    report = start.examples
    if report is not None and (report.created or report.skipped):
        free = (
            f"; runnable without a model key: {', '.join(report.no_model_key)}" if report.no_model_key else ""
        )
        console.print(
            Text(
                f"examples: saved {len(report.created)} workflow(s) to tenant default "
                f"({', '.join(report.created) or 'none'}){free}"
            )
        )
        for need, ids in report.http_needs.items():
            console.print(Text(f"  - {', '.join(ids)}: no model key, but {need}"))
        if report.http_needs:
            console.print(
                Text(
                    "    (the bundled stub serves them: `python examples/stub_server.py --port 8765`, then "
                    "base_url http://127.0.0.1:8765 and FLOWLOOM_HTTP_ALLOW=127.0.0.1 for flowloom serve)",
                    style="dim",
                )
            )
        for problem in report.skipped:
            console.print(Text(f"  - skipped {problem}", style="yellow"))
    elif report is not None and report.kept:
        console.print(Text(f"examples: already saved ({len(report.kept)}), left as they are"))
    elif report is not None:
        from api.examples import EXAMPLES_DIR

        console.print(Text(f"examples: none found in {EXAMPLES_DIR}", style="yellow"))


async def _offer_examples(start: _Start, keys: Any, service: Any, asked: bool | None) -> None:
    """Save the bundled examples to tenant ``default`` (``start.examples``: the report)
    when ``asked`` (``--examples``) or, with neither flag, on the first start of ``serve``
    on the database, whoever created the tenant: a user following the README runs
    ``flowloom datasets create`` before ``serve``, and expects the examples all the same.
    Later starts save none unasked (examples a user deleted stay deleted) and set
    ``start.examples_unsaved`` when the tenant has none of them, so the banner says how."""
    from api.examples import example_ids, import_examples
    from workers.sql.workflows import SqlWorkflowStore

    repo = SqlWorkflowStore(service.stores.runs)
    offered = await keys.examples_offered("default")
    if asked if asked is not None else not offered:
        start.examples = await import_examples(repo, service, "default")
    elif asked is None:
        bundled = example_ids()
        if not {w.id for w in await repo.list("default")} & set(bundled):
            start.examples_unsaved = len(bundled)
    if not offered:  # --no-examples too: the user declined them, later starts do not insist
        await keys.mark_examples_offered("default")


#: the exit status of a server that never started serving (its lifespan failed): uvicorn's own
EXIT_STARTUP_FAILED = 3

#: uvicorn's default backlog: connections queued while the app starts.
_BACKLOG = 2048


def _listen_socket(host: str, port: int) -> socket.socket:
    """The socket the server will serve on, bound to ``host:port`` here (a ``port`` of 0:
    a free one, so the banner prints the real address). Exit 2 with one line naming
    ``host:port`` when it cannot be bound (in use, not an address of this machine), before
    anything is printed: a banner for a server that never starts misleads. Bound with
    ``SO_REUSEADDR`` as uvicorn binds, so a port in TIME_WAIT is not refused. Listening
    from here on: uvicorn logs "Application startup complete" before it serves the socket,
    and a client that connects on that line is queued, not refused."""
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(_BACKLOG)
        except OSError:
            sock.close()
            raise
    except OSError as exc:
        import errno

        hint = (
            " (another server listens there: stop it or pick another --port)"
            if exc.errno == errno.EADDRINUSE
            else ""
        )
        err().print(Text(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}", style="bold red"))
        raise typer.Exit(EXIT_INVALID) from None
    return sock


def store_label(url: str) -> str:
    """The run store's URL as the banner shows it: the way a user writes it, without the
    async driver the server adds (``sqlite:///...``, not ``sqlite+aiosqlite:///...``),
    so the default store and a ``FLOWLOOM_DATABASE_URL`` read alike; password masked."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from workers.sql import mask_url

    try:
        parsed = make_url(url)
    except ArgumentError:
        return mask_url(url)  # names it unparsable, never echoes it
    return mask_url(parsed.set(drivername=parsed.get_backend_name()))


def _print_model_override(base_url: str | None, model: str | None) -> None:
    """Where every model call goes when ``FLOWLOOM_LLM_BASE_URL_OVERRIDE`` is set: the
    server keeps the environment it started with, so the banner says which one it has
    (the URL without any credentials in it)."""
    if not base_url:
        return
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    host = parts.hostname or ""
    where = f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"
    also = f", chat models as {model!r} (FLOWLOOM_LLM_MODEL_OVERRIDE)" if model else ""
    err().print(Text(f"models: every model call goes to {where} (FLOWLOOM_LLM_BASE_URL_OVERRIDE){also}"))


def _print_execution(redis_url: str | None) -> None:
    """Where runs execute: in this process, or (with Redis) queued for ``flowloom worker``
    processes - with a warning when that Redis does not answer now, since queued runs then
    fail (503) until it does."""
    console = err()
    if not redis_url:
        console.print(Text("runs: executed in this process (FLOWLOOM_REDIS_URL unset)", style="dim"))
        return
    from redis import Redis
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    from workers.redis_bus import mask_redis_url

    where = mask_redis_url(redis_url)
    console.print(
        Text(
            f"runs: async runs, agent/tool runs and resumes are queued at Redis {where} for "
            "`flowloom worker` processes (start at least one); the others run in this process"
        )
    )
    client = Redis.from_url(redis_url, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except (RedisConnectionError, RedisTimeoutError) as exc:
        console.print(
            Text(
                f"warning: Redis at {where} is unreachable ({exc}): queued runs are refused (503) "
                "until it answers",
                style="yellow",
            )
        )
    finally:
        client.close()


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="port to listen on")] = 8400,
    heartbeat: Annotated[
        float, typer.Option(min=0.05, help="seconds between heartbeats of idle event streams")
    ] = 15.0,
    login_url: Annotated[
        bool | None,
        typer.Option(
            "--login-url/--no-login-url",
            help="print the canvas URL with a login key in its fragment (default: "
            "only when listening on a loopback address)",
        ),
    ] = None,
    examples: Annotated[
        bool | None,
        typer.Option(
            "--examples/--no-examples",
            help="save the bundled examples as workflows of tenant default, those not "
            "saved yet (default: on the first start of serve on a database)",
        ),
    ] = None,
) -> None:
    """Serve the HTTP API (/v1, OpenAPI at /docs) and the web canvas (/); every API call
    but /health needs an API key."""
    import uvicorn

    from api.app import create_app, key_store_of
    from api.composition import database_url
    from api.logs import uvicorn_log_config
    from api.static import dist_of
    from workers.knowledge import vector_support_warning

    current = settings()
    listening = _listen_socket(host, port)
    port = listening.getsockname()[1]
    loopback = _loopback(host)
    want_login = login_url if login_url is not None else loopback

    async def body(service: Any) -> _Start:
        keys = key_store_of(service)
        await keys.ensure_tenant("default", "Default tenant")
        own = [k for k in await keys.list_keys("default") if k.name != CANVAS_KEY_NAME]
        start = _Start(
            needs_admin_key=not any(k.admin and k.active for k in own),
            login_key=await _canvas_key(keys, current.home) if want_login else None,
        )
        await _offer_examples(start, keys, service, examples)
        start.vector_warning = vector_support_warning(service.knowledge.store)
        return start

    start = with_service(body, knowledge=True)
    base = f"http://{_url_host(host)}:{port}"
    err().print(
        Text.assemble(
            ("Flowloom API", "bold"),
            f" on {base}  (OpenAPI: /openapi.json; /docs needs internet access)  "
            f"run store: {store_label(database_url(current))}",
        )
    )
    _print_execution(current.redis_url)
    _print_model_override(current.llm_base_url_override, current.llm_model_override)
    if start.vector_warning:
        err().print(Text(start.vector_warning, style="yellow"))
    _print_start(start, base, dist_of(current), login_url, loopback)
    config = uvicorn.Config(
        create_app(current, heartbeat_s=heartbeat, server=True),
        host=host,
        port=port,
        http="httptools",
        lifespan="on",
        log_level="info",
        timeout_graceful_shutdown=10,
        log_config=uvicorn_log_config(json_format=current.log_format == "json"),
    )
    server = uvicorn.Server(config)
    with listening:  # the socket bound above: the port the banner printed, 0 included
        try:
            server.run(sockets=[listening])
        except KeyboardInterrupt:  # a second Ctrl-C while shutting down: quiet, as uvicorn.run is
            pass
    if not server.started:
        raise typer.Exit(EXIT_STARTUP_FAILED)
