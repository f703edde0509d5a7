"""``radctl serve``: the embedded serving process (Overlord, Coordinator and Broker APIs)."""

from __future__ import annotations

from pathlib import Path

import typer

from radstack.operations.cli import app


@app.command()
def serve(
    host: str = typer.Option(None, help="Bind address (default: server.host, 127.0.0.1)."),
    port: int = typer.Option(None, help="Port (default: server.port, 8888)."),
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
) -> None:
    """Start the embedded Druid-compatible server."""
    import uvicorn

    from radstack.config import load_settings
    from serving.app import create_app

    overrides: dict = {"server": {}}
    if host:
        overrides["server"]["host"] = host
    if port:
        overrides["server"]["port"] = port
    settings = load_settings(config, overrides=overrides)
    uvicorn.run(
        create_app(settings),
        host=settings.get("server.host"),
        port=int(settings.get("server.port")),
        log_level="warning",
    )
