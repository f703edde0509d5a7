"""The receiver's app: its lifespan (the producer or spool), the routes, the browser guard; and
:func:`serve` for ``radctl receiver``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response

from radstack.browser_guard import BrowserGuardMiddleware
from radstack.config import Settings
from radstack.private_files import private_process
from realtime.producer import BatchProducer
from realtime.receiver.answers import Refusal, refusal_response, response
from realtime.receiver.posting import EventPosting
from realtime.receiver.state import ReceiverState


def create_app(settings: Settings, producer: BatchProducer | None = None) -> FastAPI:
    """The receiver app. ``producer`` defaults to one built from ``kafka.bootstrap_servers``; it is
    closed on shutdown only when the app created it."""
    state = ReceiverState(settings, producer=producer)
    posting = EventPosting(settings, state)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        private_process(settings.home)  # the spool holds events: 0600 (radstack/private_files.py)
        state.open()
        try:
            yield
        finally:
            await state.close()

    app = FastAPI(title="radstack event receiver", lifespan=lifespan, docs_url=None, redoc_url=None)

    @app.exception_handler(Refusal)
    async def _refused(_request: Request, exc: Refusal) -> Response:
        return refusal_response(exc)

    @app.get("/health")
    @app.get("/status/health")
    async def health() -> Response:
        return response(200, True)

    @app.post("/v1/events/{topic}")
    async def post_events(topic: str, request: Request) -> Response:
        return await posting.post(topic, request)

    # other websites: a page in a browser cannot post events or rebind a name to it (radstack/browser_guard.py)
    app.add_middleware(BrowserGuardMiddleware, allowed_hosts=settings.receiver.allowed_hosts,
                       cors_allowed_origins=settings.receiver.cors_allowed_origins, section="receiver",
                       bind_host=settings.receiver.host)
    return app


def serve(settings: Settings, host: str | None = None, port: int | None = None) -> None:
    """Run the receiver in this process (``radctl receiver``)."""
    uvicorn.run(
        create_app(settings),
        host=host or str(settings.receiver.host),
        port=int(port or settings.receiver.port),
        log_level="warning",
        access_log=False,
        # X-Forwarded-For only from the proxies listed (uvicorn trusts loopback's by default)
        proxy_headers=bool(settings.receiver.trusted_proxies),
        forwarded_allow_ips=",".join(settings.receiver.trusted_proxies) or None,
    )
