"""The embedded Druid-compatible server: one FastAPI app with the Overlord, Coordinator and Broker APIs.

:func:`create_app` builds the app; its lifespan opens the metadata store (creating tables), the
deep storage, starts the task runner, the broker (when present) and the coordinator loop, and stops
them all in reverse order. Every error leaves as Druid's error JSON (:mod:`serving.errors`), including
unknown routes, bad request bodies and unexpected exceptions (500); nothing a request does can stop
the server. Request bodies above ``server.max_body_bytes`` get 413, and ``server.auth`` turns on HTTP
Basic auth (:mod:`serving.auth`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import radstack
from radstack.browser_guard import BrowserGuardMiddleware
from radstack.config import ServerSettings, Settings
from radstack.private_files import private_process
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.metadata import MetadataStore
from serving.auth import BasicAuthMiddleware, load_users
from serving.broker.api_native import router as native_router
from serving.broker.api_sql import router as sql_router
from serving.broker.service import BrokerService
from serving.broker.sql import planning_pool
from serving.console import router as console_router
from serving.coordinator.api import router as coordinator_router
from serving.coordinator.loop import CoordinatorLoop
from serving.errors import (
    DruidError,
    StartWatch,
    error_response,
    install_error_handlers,
    internal_error,
    send_error,
)
from serving.jobs import BatchJobs
from serving.lookups_api import router as lookups_router
from serving.metrics_api import install as install_metrics
from serving.overlord.api import router as overlord_router
from serving.overlord.supervisors_api import router as supervisors_router
from serving.overlord.tasks import TaskRunner
from serving.request_log import RequestLogMiddleware
from serving.server_context import ServerContext
from serving.subscriptions.api import router as subscriptions_router
from serving.subscriptions.hub import SubscriptionHub

log = logging.getLogger(__name__)

def _version() -> str:
    return getattr(radstack, "__version__", None) or _dist_version()


def _dist_version() -> str:

    try:
        return version("radstack")
    except PackageNotFoundError:
        return "0.0.0"


# -- coordinator loop ----------------------------------------------------------------------------


# -- middleware ----------------------------------------------------------------------------------


class _BodyTooLarge(Exception):
    pass


class BodySizeLimitMiddleware:
    """413 (Druid JSON) for bodies above ``max_bytes``: by Content-Length up front, or while
    streaming a body sent without one."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _error(self) -> DruidError:
        return DruidError(f"Request body is larger than the limit of {self.max_bytes} bytes "
                          "(server.max_body_bytes)", category="CAPACITY_EXCEEDED",
                          error_code="requestTooLarge", status=413)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for k, v in scope.get("headers", []):
            if k.lower() == b"content-length":
                try:
                    too_big = int(v) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    await send_error(send, self._error())
                    return
        seen = 0
        watch = StartWatch(send)

        async def limited_receive() -> Message:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max_bytes:
                    raise _BodyTooLarge()
            return msg

        try:
            await self.app(scope, limited_receive, watch)
        except _BodyTooLarge:
            if not watch.started:
                await send_error(send, self._error())


class CatchAllMiddleware:
    """Last line of defence: an exception that escaped every handler becomes a 500 Druid error."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        watch = StartWatch(send)
        try:
            await self.app(scope, receive, watch)
        except _BodyTooLarge:
            raise
        except Exception as e:  # noqa: BLE001
            log.warning("unhandled error in %s %s", scope.get("method"), scope.get("path"))
            if not watch.started:
                await send_error(send, internal_error(e))


# -- status --------------------------------------------------------------------------------------


def _memory() -> dict[str, int]:
    page = os.sysconf("SC_PAGE_SIZE")
    total = os.sysconf("SC_PHYS_PAGES") * page
    free = os.sysconf("SC_AVPHYS_PAGES") * page
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * page
    except OSError:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"maxMemory": total, "totalMemory": total, "freeMemory": free, "usedMemory": rss, "directMemory": 0}


# -- the app -------------------------------------------------------------------------------------


def _open_context(settings: Settings, jobs: BatchJobs) -> tuple[ServerContext, BrokerService]:

    metadata = MetadataStore.from_url(settings.metadata_url)
    metadata.create_tables()
    deep_storage = open_deep_storage(settings)
    runner = TaskRunner(settings, metadata, deep_storage, jobs=jobs)
    broker = BrokerService(settings, metadata, deep_storage)
    ctx = ServerContext(settings=settings, metadata=metadata, deep_storage=deep_storage, task_runner=runner,
                        broker=broker, jobs=jobs)
    return ctx, broker


#: how long a successful ping of the metadata store stands for /status/health
HEALTH_PING_SECONDS = 1.0
#: worker threads beyond the query slots and the queue: every other route (health, metrics, tasks …)
OTHER_WORK_THREADS = 40


def size_thread_pool(server: ServerSettings) -> None:
    """A query waits for its slot on a worker thread: the pool must hold every running and queued query
    and still serve everything else, or a full queue starves health checks and other users (#49)."""
    limiter = anyio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = max(limiter.total_tokens, server.max_concurrent_queries + server.max_queued_queries
                               + OTHER_WORK_THREADS)


def _lifespan(settings: Settings, jobs: BatchJobs) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The server's parts, started in order and stopped in the reverse (queries cancelled first)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        private_process(settings.home)  # 0700 home, 0600 files: radstack/private_files.py
        size_thread_pool(settings.server)
        ctx, broker = _open_context(settings, jobs)
        app.state.ctx = ctx
        runner = ctx.task_runner
        runner.start()
        broker.start()
        subscriptions = SubscriptionHub(
            broker, ctx.metadata, load_users(settings) if settings.server.auth.enabled else None,
            settings.server.max_subscriptions, settings.server.subscription_tick_ms,
            settings.server.subscription_threads, per_user=settings.server.max_subscriptions_per_user,
            streams_per_user=settings.server.max_streams_per_user,
            max_answer_bytes=settings.server.max_subscription_answer_bytes)
        ctx.subscriptions = subscriptions
        subscriptions.start()
        coordinator = CoordinatorLoop(
            settings, ctx.metadata, ctx.deep_storage, spark_compactor=ctx.jobs.spark_compactor,
            busy=runner.is_busy)
        ctx.coordinator = coordinator
        coordinator.start()
        try:
            yield
        finally:
            subscriptions.stop()  # ends the open event streams
            broker.queries.cancel_all()  # first: a long query must not hold the shutdown
            coordinator.stop()
            runner.stop()
            with contextlib.suppress(Exception):
                broker.stop()
            with contextlib.suppress(Exception):
                ctx.metadata.close()
            planning_pool.shutdown()

    return lifespan


def _status_router() -> APIRouter:
    """Druid's ``/status`` endpoints."""
    router = APIRouter()
    answered: dict[int, float] = {}  # id of the metadata store → when it last answered a ping

    @router.get("/status")
    def status() -> dict[str, Any]:
        return {"version": _version(), "modules": [], "memory": _memory()}

    @router.get("/status/health")
    async def health(request: Request) -> Any:
        """``true`` when ready: the metadata store answers and the broker has loaded its timeline; else
        503 naming what is not ready (load balancers and readiness probes read the status). A store that
        answered less than :data:`HEALTH_PING_SECONDS` ago is not pinged again, so a flood of health checks
        costs no thread and no database round trip each (#49)."""
        ctx = getattr(request.app.state, "ctx", None)
        waiting = []
        if ctx is not None and time.monotonic() - answered.get(id(ctx.metadata), -1e9) > HEALTH_PING_SECONDS:
            try:
                await run_in_threadpool(ctx.metadata.ping)
                answered.clear()
                answered[id(ctx.metadata)] = time.monotonic()
            except Exception:  # noqa: BLE001 - any failure to reach it means not ready
                log.warning("health: the metadata store is not reachable", exc_info=True)
                waiting.append("the metadata store is not reachable")
        if ctx is not None and ctx.broker is not None and not ctx.broker.loaded:
            waiting.append("the segment timeline is not loaded yet")
        if waiting:
            return error_response(DruidError("Not ready: " + "; ".join(waiting), category="SERVICE_UNAVAILABLE"))
        return True

    @router.get("/status/selfDiscovered/status")
    def self_discovered() -> dict[str, bool]:
        return {"selfDiscovered": True}

    return router


def create_app(settings: Settings, jobs: BatchJobs | None = None) -> FastAPI:
    """The server app. Its parts start with the lifespan (uvicorn, or ``with TestClient(app)``).
    ``jobs``: the batch layer's entry points (:func:`operations.server.create_server_app`
    passes radstack's); without them compaction runs in process and index tasks natively."""
    jobs = jobs or BatchJobs()
    app = FastAPI(title="radstack", version=_version(), lifespan=_lifespan(settings, jobs), docs_url=None,
                  redoc_url=None)
    install_error_handlers(app)
    app.include_router(_status_router())
    # The query endpoints first: a request is matched against the routes in order, and dashboards'
    # queries are most of the requests (about 0.3 ms of matching saved on each: docs/benchmarks.md).
    for router in (sql_router, native_router, overlord_router, supervisors_router, coordinator_router,
                   lookups_router, subscriptions_router, console_router, *jobs.routers):
        app.include_router(router)

    install_metrics(app)  # GET /metrics + query metrics (coordinator engineer)

    # Outermost first: errors → other websites → body limit → auth → the app.
    if settings.server.auth.enabled:
        app.add_middleware(BasicAuthMiddleware, users=load_users(settings), auth=settings.server.auth)
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=int(settings.server.max_body_bytes or 0) or 2**62)
    # other websites: the Host allow-list, cross-site writes, security headers (radstack/browser_guard.py)
    app.add_middleware(BrowserGuardMiddleware, allowed_hosts=settings.server.allowed_hosts,
                       cors_allowed_origins=settings.server.cors_allowed_origins, bind_host=settings.server.host)
    app.add_middleware(CatchAllMiddleware)
    app.add_middleware(RequestLogMiddleware)  # outermost: it sees every answer, a 500 included
    return app

