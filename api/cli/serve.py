"""``flowloom serve``: the HTTP API (FastAPI on uvicorn) on the embedded defaults.

The same stores as the CLI (SQLite under ``FLOWLOOM_HOME`` unless
``FLOWLOOM_DATABASE_URL`` says otherwise), runs executed in the server process; no
Redis or other service needed. On a first start (no admin key yet) it prints how to
create one.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from .common import app, err, settings
from .running import execute

__all__ = ["serve"]


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="port to listen on")] = 8400,
    heartbeat: Annotated[float, typer.Option(min=0.05, help="seconds between heartbeats of idle event "
                                             "streams")] = 15.0,
) -> None:
    """Serve the HTTP API (/v1, OpenAPI at /docs); every call but /health needs an API key."""
    import uvicorn

    from api.app import create_app, key_store_of
    from api.runtime import database_url
    from workers.sql import mask_url

    current = settings()

    async def body(service: Any) -> bool:
        keys = key_store_of(service)
        await keys.ensure_tenant("default", "Default tenant")
        return not any(k.admin and k.active for k in await keys.list_keys("default"))

    needs_admin_key = execute(body)
    console = err()
    console.print(Text.assemble(("Flowloom API", "bold"), f" on http://{host}:{port}  (OpenAPI: /docs)  "
                                f"run store: {mask_url(database_url(current))}"))
    if needs_admin_key:
        console.print(Text("no admin API key yet: create one with `flowloom keys create --admin --name admin` "
                           "(printed once), then send it as `Authorization: Bearer <key>`", style="yellow"))
    uvicorn.run(create_app(current, heartbeat_s=heartbeat), host=host, port=port, http="httptools",
                lifespan="on", log_level="info", timeout_graceful_shutdown=10)
