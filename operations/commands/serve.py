"""``radctl serve``: the embedded serving process (Overlord, Coordinator and Broker APIs)."""

from __future__ import annotations

from pathlib import Path

import typer
import uvicorn

from operations.server import create_server_app
from radstack.config import load_settings

GRACEFUL_SHUTDOWN_SECONDS = 5
"""On SIGTERM, requests in flight get this long; then the lifespan cancels running queries and tasks, so
the process ends within 10 s."""


def serve(
    host: str = typer.Option(None, help="Bind address (default: server.host, 127.0.0.1)."),
    port: int = typer.Option(None, help="Port (default: server.port, 8888)."),
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
) -> None:
    """Start the embedded Druid-compatible server."""
    overrides: dict = {"server": {}}
    if host:
        overrides["server"]["host"] = host
    if port:
        overrides["server"]["port"] = port
    settings = load_settings(config, overrides=overrides)
    uvicorn.run(
        create_server_app(settings),
        host=settings.server.host,
        port=int(settings.server.port),
        log_level="warning",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
