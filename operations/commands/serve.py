"""``radctl serve``: the embedded serving process (Overlord, Coordinator and Broker APIs)."""

from __future__ import annotations

from pathlib import Path

import typer
import uvicorn

from operations.server import create_server_app
from radstack.config import load_settings


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
    )
