"""``radctl serve``: the embedded serving process (Overlord, Coordinator and Broker APIs)."""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import socket
from pathlib import Path
from types import FrameType

import typer
import uvicorn
from fastapi import FastAPI

from operations.server import create_server_app
from radstack.config import load_settings
from serving.http_limits import limited_protocol

log = logging.getLogger("radstack.serve")

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
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for name in ("radstack.serve", *(("radstack.requests",) if settings.server.request_log else ())):
        logging.getLogger(name).setLevel(logging.INFO)
    app = create_server_app(settings)
    raise_open_files_limit()
    _Server(app, uvicorn.Config(app, host=settings.server.host, port=int(settings.server.port), log_level="warning",
                                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
                                http=limited_protocol(settings.server),
                                timeout_keep_alive=max(1, int(settings.server.idle_timeout_seconds)),
                                # X-Forwarded-For only from the proxies listed (uvicorn trusts loopback's by default)
                                proxy_headers=bool(settings.server.trusted_proxies),
                                forwarded_allow_ips=",".join(settings.server.trusted_proxies) or None)).run()


def raise_open_files_limit() -> None:
    """Open files up to the hard limit: ``server.max_connections`` must run out before the descriptors do."""
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class _Server(uvicorn.Server):
    """uvicorn's server, ending the subscription event streams first when told to stop (they would
    otherwise hold the graceful shutdown for its whole timeout)."""

    def __init__(self, app: FastAPI, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.app = app

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:  # the line operators grep serve.log for
            log.info("radstack serve listening on http://%s:%s (pid %d)", self.config.host, self.config.port,
                     os.getpid())

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        hub = getattr(getattr(self.app.state, "ctx", None), "subscriptions", None)
        if hub is not None:
            hub.close_streams()
        super().handle_exit(sig, frame)
