"""The console's routes: the single-page app at ``/`` and ``/console/…`` (static files, no build
step, no CDN) and its JSON helpers under ``/radstack/v1/…``:

- ``GET /radstack/v1/capabilities``: what this server offers the console (auth on/off, backfill);
- ``GET /radstack/v1/whoami``: the user the request's Basic credentials name, and its role (with auth on
  it needs those credentials: 401 without ``WWW-Authenticate``, so the console shows its own form);
- ``GET /radstack/v1/datasources``: per-datasource summary (rows, size, segments, time range,
  ingestion rate, freshness);
- ``GET /radstack/v1/timeline/{dataSource}?interval=…``: every segment (used or not) with its kind,
  overshadowed flag and visible pieces;
- ``GET /radstack/v1/ingestion``: streaming job / archiver state and recent tasks with counters.

The static files and ``capabilities`` are readable without credentials so that the console can load
and show its sign-in form (``OPEN`` in ``serving.route_access.ROUTES``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from radstack.druid_cluster.status import druid_overview
from radstack.time.intervals import Interval
from serving.auth import datasource_reader, request_user
from serving.console.ingestion_view import datasource_summaries, ingestion_view
from serving.console.timeline_view import timeline_view
from serving.errors import DruidError, invalid_input, not_found

STATIC = Path(__file__).parent / "static"
BACKFILL_PATH = "/radstack/v1/backfill"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".ico": "image/x-icon"}

router = APIRouter()


def _ctx(request: Request) -> Any:
    return request.app.state.ctx


def _static(name: str) -> FileResponse:
    try:  # a NUL or an over-long name makes the OS refuse: no such console file either
        path = (STATIC / name).resolve()
        found = STATIC.resolve() in path.parents and path.is_file()
    except (OSError, ValueError):
        found = False
    if not found:
        raise not_found(f"no console file [{name[:200]!r}]")
    return FileResponse(path, media_type=CONTENT_TYPES.get(path.suffix, "application/octet-stream"),
                        headers={"Cache-Control": "no-cache"})


@router.get("/", include_in_schema=False)
def index() -> FileResponse:
    return _static("index.html")


@router.get("/console", include_in_schema=False)
def console_root() -> RedirectResponse:
    return RedirectResponse("/console/")


@router.get("/console/", include_in_schema=False)
def console_index() -> FileResponse:
    return _static("index.html")


@router.get("/unified-console.html", include_in_schema=False)
def unified_console() -> RedirectResponse:
    return RedirectResponse("/")


@router.get("/console/{name:path}", include_in_schema=False)
def console_file(name: str) -> FileResponse:
    return _static(name)


def backfill_available(request: Request) -> bool:
    """True once some router (the batch layer's) serves ``POST /radstack/v1/backfill``."""
    return _serves(request.app.router.routes, BACKFILL_PATH, "POST")


def _serves(routes: Any, path: str, method: str) -> bool:
    """Whether ``routes`` (including routers mounted with ``include_router``) serve ``method path``."""
    for route in routes:
        if getattr(route, "path", None) == path and method in (getattr(route, "methods", None) or ()):
            return True
        inner = getattr(route, "original_router", None)  # FastAPI's included routers
        if inner is not None and _serves(inner.routes, path, method):
            return True
    return False


@router.get("/radstack/v1/capabilities")
def capabilities(request: Request) -> dict[str, Any]:
    settings = _ctx(request).settings
    backfill = backfill_available(request)
    return {
        "auth": bool(settings.server.auth.enabled),
        "backfill": backfill,
        "backfillEndpoint": BACKFILL_PATH if backfill else None,
        "version": request.app.version,
    }


@router.get("/radstack/v1/whoami")
def whoami(request: Request) -> dict[str, Any]:
    settings = _ctx(request).settings
    if not settings.server.auth.enabled:
        return {"authenticated": True, "name": None, "role": "admin", "auth": False}
    user = request_user(request)  # the auth middleware answered 401 already when there is none
    if user is None:  # pragma: no cover - only without the middleware
        raise DruidError("Unauthorized: missing or invalid credentials", category="UNAUTHORIZED")
    return {"authenticated": True, "name": user.name, "role": user.role, "auth": True}


@router.get("/radstack/v1/datasources")
async def datasources(request: Request) -> list[dict[str, Any]]:
    may_read = datasource_reader(request)
    summaries = await run_in_threadpool(datasource_summaries, _ctx(request).metadata)
    return [s for s in summaries if may_read(s["name"])]


@router.get("/radstack/v1/timeline/{data_source}")
async def timeline(data_source: str, request: Request, interval: str | None = None,
                   includeUnused: bool = True) -> dict[str, Any]:  # noqa: N803 - Druid-style name
    window = None
    if interval:
        try:
            window = Interval.parse(interval.replace("_", "/"))
        except ValueError as e:
            raise invalid_input(f"invalid interval {interval!r}: {e}") from e
    metadata = _ctx(request).metadata

    def build() -> dict[str, Any]:
        used = None if includeUnused else True
        rows = metadata.segment_rows(data_source, used=used, interval=window)
        if window is not None and rows:
            # Overshadowing of a segment reaching outside the window depends on what covers it there.
            wide = Interval(min(r.segment.interval.start for r in rows), max(r.segment.interval.end for r in rows))
            if not window.contains(wide):
                keep = {r.segment.identifier for r in rows}
                extra = [r for r in metadata.segment_rows(data_source, used=True, interval=wide)
                         if r.segment.identifier not in keep]
                return timeline_view(data_source, rows, window, context=extra)
        return timeline_view(data_source, rows, window)

    return await run_in_threadpool(build)


@router.get("/radstack/v1/druid")
async def druid(request: Request) -> dict[str, Any]:
    """The Druid cluster's side of the datasources it serves (``druid:``), those the user may read."""
    may_read = datasource_reader(request)
    ctx = _ctx(request)
    view = await run_in_threadpool(druid_overview, ctx.settings, ctx.metadata)
    if view.get("configured"):
        view["datasources"] = {k: v for k, v in view["datasources"].items() if may_read(k)}
    return view


@router.get("/radstack/v1/ingestion")
async def ingestion(request: Request) -> dict[str, Any]:
    may_read = datasource_reader(request)
    view = await run_in_threadpool(ingestion_view, _ctx(request))
    for key in ("streaming", "tasks"):  # per datasource: only those the user may read
        view[key] = [e for e in view[key] if may_read(str(e.get("dataSource")))]
    return view
