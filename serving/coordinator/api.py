"""Druid's Coordinator HTTP API (``/druid/coordinator/v1``) over the metadata store.

"Served" views (``/datasources…``) show what the embedded server serves: used segments that are not
overshadowed. "Metadata" views (``/metadata/…``) show the ``druid_segments`` table as it is. Shapes
follow Druid's ``DataSourcesResource`` / ``MetadataResource`` / ``RulesResource``: an unknown
datasource on a served view answers ``204 No Content``, as Druid does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from radstack.storage.compaction import CompactionError, compaction_config_document, save_compaction_config
from radstack.storage.compaction import delete_compaction_config as delete
from radstack.storage.kill import kill_unused_segments
from radstack.storage.segments import DataSegment
from radstack.storage.timeline import VersionedIntervalTimeline, timelines_by_data_source
from radstack.time.clock import now_millis
from radstack.time.intervals import Interval, format_instant
from serving.auth import datasource_reader
from serving.errors import invalid_input, not_found
from serving.server_context import ServerContext

router = APIRouter(prefix="/druid/coordinator/v1")

DEFAULT_RULES: list[dict[str, Any]] = [{"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}]
DEFAULT_TIER = "_default_tier"
RULE_TYPES = (
    "loadForever", "loadByInterval", "loadByPeriod", "dropForever", "dropByInterval", "dropByPeriod",
    "dropBeforeByPeriod", "broadcastForever", "broadcastByInterval", "broadcastByPeriod",
)


def _ctx(request: Request) -> Any:
    return request.app.state.ctx


def _flag(request: Request, name: str) -> bool:
    """Druid's presence flags: ``?full`` counts, ``?full=false`` does not."""
    if name not in request.query_params:
        return False
    return request.query_params.get(name, "").lower() not in ("false", "0")


def _interval(text: str) -> Interval:
    try:
        return Interval.parse(text.replace("_", "/"))
    except ValueError as e:
        raise invalid_input(f"invalid interval {text!r}: {e}") from e


def _served(ctx: ServerContext, data_source: str | None = None) -> dict[str, list[DataSegment]]:
    """Used, non-overshadowed segments by datasource, in Druid's segment order."""
    used = ctx.metadata.segments(data_source, used=True)
    out: dict[str, list[DataSegment]] = {}
    for ds, tl in timelines_by_data_source(used).items():
        over = tl.overshadowed()
        segs = [s for s in tl.segments() if s.identifier not in over]
        if segs:
            out[ds] = sorted(segs, key=lambda s: s.id.sort_key())
    return dict(sorted(out.items()))


def _no_content() -> Response:
    return Response(status_code=204)


def _host(ctx: ServerContext) -> str:
    return f"{ctx.settings.server.host}:{ctx.settings.server.port}"


def _simple(segments: list[DataSegment]) -> dict[str, Any]:
    size = sum(s.size for s in segments)
    return {
        "tiers": {DEFAULT_TIER: {"segmentCount": len(segments), "size": size, "replicatedSize": size}},
        "segments": {
            "count": len(segments),
            "size": size,
            "replicatedSize": size,
            "minTime": format_instant(min(s.interval.start for s in segments)),
            "maxTime": format_instant(max(s.interval.end for s in segments)),
        },
    }


def _full(name: str, segments: Iterable[DataSegment]) -> dict[str, Any]:
    return {"name": name, "properties": {"created": format_instant(now_millis())},
            "segments": [s.to_json() for s in segments]}


def _intervals_desc(segments: Iterable[DataSegment]) -> list[Interval]:
    return sorted({s.interval for s in segments}, key=lambda i: (i.start, i.end), reverse=True)


# -- served datasources --------------------------------------------------------------------------


@router.get("/datasources")
def datasources(request: Request) -> Any:
    may_read = datasource_reader(request)
    served = {ds: segs for ds, segs in _served(_ctx(request)).items() if may_read(ds)}
    if _flag(request, "full"):
        return [_full(ds, segs) for ds, segs in served.items()]
    if _flag(request, "simple"):
        return [{"name": ds, "properties": _simple(segs)} for ds, segs in served.items()]
    return list(served)


@router.get("/datasources/{data_source}")
def datasource(data_source: str, request: Request) -> Any:
    segs = _served(_ctx(request), data_source).get(data_source)
    if not segs:
        return _no_content()
    return _full(data_source, segs) if _flag(request, "full") else _simple(segs)


def _per_interval(ctx: ServerContext, segs: list[DataSegment], full: bool, keep: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for iv in _intervals_desc(segs):
        if not keep(iv):
            continue
        in_iv = [s for s in segs if s.interval == iv]
        if full:
            out[iv.iso()] = {s.identifier: {"metadata": s.to_json(), "servers": [_host(ctx)]} for s in in_iv}
        else:
            out[iv.iso()] = {"size": sum(s.size for s in in_iv), "count": len(in_iv)}
    return out


@router.get("/datasources/{data_source}/intervals")
def datasource_intervals(data_source: str, request: Request) -> Any:
    ctx = _ctx(request)
    segs = _served(ctx, data_source).get(data_source)
    if not segs:
        return _no_content()
    if _flag(request, "simple") or _flag(request, "full"):
        return _per_interval(ctx, segs, _flag(request, "full"), lambda iv: True)
    return [iv.iso() for iv in _intervals_desc(segs)]


@router.get("/datasources/{data_source}/intervals/{interval}")
def datasource_interval(data_source: str, interval: str, request: Request) -> Any:
    ctx = _ctx(request)
    within = _interval(interval)
    segs = _served(ctx, data_source).get(data_source)
    if not segs:
        return _no_content()
    if _flag(request, "simple") or _flag(request, "full"):
        return _per_interval(ctx, segs, _flag(request, "full"), within.contains)
    return [s.identifier for s in segs if within.contains(s.interval)]


@router.get("/datasources/{data_source}/segments")
def datasource_segments(data_source: str, request: Request) -> Any:
    segs = _served(_ctx(request), data_source).get(data_source)
    if not segs:
        return _no_content()
    if _flag(request, "full"):
        return [s.to_json() for s in segs]
    return [s.identifier for s in segs]


@router.get("/datasources/{data_source}/segments/{segment_id}")
def datasource_segment(data_source: str, segment_id: str, request: Request) -> Any:
    ctx = _ctx(request)
    for s in _served(ctx, data_source).get(data_source, []):
        if s.identifier == segment_id:
            return {"metadata": s.to_json(), "servers": [_host(ctx)]}
    return _no_content()


@router.delete("/datasources/{data_source}/segments/{segment_id}")
def mark_segment_unused(data_source: str, segment_id: str, request: Request) -> dict[str, bool]:
    ctx = _ctx(request)
    row = ctx.metadata.get_segment(segment_id)
    changed = row is not None and row.segment.data_source == data_source and ctx.metadata.mark_unused([segment_id]) > 0
    return {"segmentStateChanged": changed}


@router.post("/datasources/{data_source}/segments/{segment_id}")
def mark_segment_used(data_source: str, segment_id: str, request: Request) -> dict[str, bool]:
    ctx = _ctx(request)
    row = ctx.metadata.get_segment(segment_id)
    changed = row is not None and row.segment.data_source == data_source and ctx.metadata.mark_used([segment_id]) > 0
    return {"segmentStateChanged": changed}


async def _mark_payload(request: Request) -> tuple[Interval | None, list[str] | None]:
    body = await request.body()
    try:
        payload = orjson.loads(body) if body.strip() else None
    except orjson.JSONDecodeError as e:
        raise invalid_input(f"the request body is not valid JSON: {e}") from e
    if not isinstance(payload, dict):
        payload = {}
    iv, ids = payload.get("interval"), payload.get("segmentIds")
    if (iv is None) == (ids is None) or (ids is not None and (not isinstance(ids, list) or not ids)):
        raise invalid_input("Invalid request payload, either interval or segmentIds array must be specified")
    if iv is not None:
        if not isinstance(iv, str):
            raise invalid_input("interval: expected an ISO interval string")
        return _interval(iv), None
    return None, [str(i) for i in ids]


def _ids_in(segments: Iterable[DataSegment], data_source: str, interval: Interval | None,
            ids: list[str] | None) -> list[str]:
    if interval is not None:
        return [s.identifier for s in segments if interval.contains(s.interval)]
    wanted = set(ids or [])
    return [s.identifier for s in segments if s.identifier in wanted and s.data_source == data_source]


@router.post("/datasources/{data_source}/markUnused")
async def mark_unused(data_source: str, request: Request) -> Any:
    interval, ids = await _mark_payload(request)
    ctx = _ctx(request)

    def run() -> Any:
        used = ctx.metadata.segments(data_source, used=True)
        if not used and data_source not in ctx.metadata.data_sources(used_only=False):
            return _no_content()
        return {"numChangedSegments": ctx.metadata.mark_unused(_ids_in(used, data_source, interval, ids))}

    return await run_in_threadpool(run)


def _mark_used_non_overshadowed(ctx: ServerContext, data_source: str, candidates: list[DataSegment]) -> int:
    used = ctx.metadata.segments(data_source, used=True)
    tl = VersionedIntervalTimeline.from_segments([*used, *candidates])
    over = tl.overshadowed()
    return ctx.metadata.mark_used([s.identifier for s in candidates if s.identifier not in over])


@router.post("/datasources/{data_source}/markUsed")
async def mark_used(data_source: str, request: Request) -> Any:
    interval, ids = await _mark_payload(request)
    ctx = _ctx(request)

    def run() -> Any:
        if data_source not in ctx.metadata.data_sources(used_only=False):
            return _no_content()
        unused = ctx.metadata.segments(data_source, used=False)
        chosen = set(_ids_in(unused, data_source, interval, ids))
        return {"numChangedSegments": _mark_used_non_overshadowed(
            ctx, data_source, [s for s in unused if s.identifier in chosen])}

    return await run_in_threadpool(run)


@router.post("/datasources/{data_source}")
def mark_all_used(data_source: str, request: Request) -> dict[str, int]:
    ctx = _ctx(request)
    unused = ctx.metadata.segments(data_source, used=False)
    return {"numChangedSegments": _mark_used_non_overshadowed(ctx, data_source, unused)}


def _kill(ctx: ServerContext, data_source: str, interval: Interval) -> int:
    """Delete unused segments inside ``interval`` from the metadata store and deep storage
    (:func:`serving.coordinator.duties.kill.kill_unused_segments`: never a used segment or files a used one needs)."""

    return len(kill_unused_segments(ctx.metadata, ctx.deep_storage, data_source, interval).segments)


@router.delete("/datasources/{data_source}")
def mark_all_unused(data_source: str, request: Request, kill: str | None = None,
                    interval: str | None = None) -> Any:
    ctx = _ctx(request)
    if kill is not None and kill.lower() == "true":
        if not interval:
            raise invalid_input("interval: required with kill=true")
        _kill(ctx, data_source, _interval(interval))
        return Response(status_code=200)
    ids = [s.identifier for s in ctx.metadata.segments(data_source, used=True)]
    return {"numChangedSegments": ctx.metadata.mark_unused(ids)}


@router.delete("/datasources/{data_source}/intervals/{interval}")
def kill_interval(data_source: str, interval: str, request: Request) -> Response:
    _kill(_ctx(request), data_source, _interval(interval))
    return Response(status_code=200)


# -- metadata ------------------------------------------------------------------------------------


@router.get("/metadata/datasources")
def metadata_datasources(request: Request) -> Any:
    ctx = _ctx(request)
    include_unused = _flag(request, "includeUnused") or _flag(request, "includeDisabled")
    may_read = datasource_reader(request)
    names = [ds for ds in ctx.metadata.data_sources(used_only=not include_unused) if may_read(ds)]
    if _flag(request, "full"):
        return [_full(ds, ctx.metadata.segments(ds, used=True))
                for ds in ctx.metadata.data_sources(used_only=True) if may_read(ds)]
    return names


@router.get("/metadata/datasources/{data_source}")
def metadata_datasource(data_source: str, request: Request) -> Any:
    segs = _ctx(request).metadata.segments(data_source, used=True)
    if not segs:
        raise not_found(f"datasource [{data_source}] has no used segments")
    return _full(data_source, segs)


@router.get("/metadata/datasources/{data_source}/segments")
def metadata_datasource_segments(data_source: str, request: Request) -> Any:
    segs = _ctx(request).metadata.segments(data_source, used=True)
    if _flag(request, "full"):
        return [s.to_json() for s in segs]
    return [s.identifier for s in segs]


@router.get("/metadata/datasources/{data_source}/segments/{segment_id}")
def metadata_segment(data_source: str, segment_id: str, request: Request) -> Any:
    ctx = _ctx(request)
    row = ctx.metadata.get_segment(segment_id)
    if row is None or row.segment.data_source != data_source:
        raise not_found(f"segment [{segment_id}] not found")
    if not row.used and not _flag(request, "includeUnused"):
        raise not_found(f"segment [{segment_id}] is unused (pass includeUnused=true to see it)")
    return row.segment.to_json()


@router.get("/metadata/segments")
def metadata_segments(request: Request) -> Any:
    ctx = _ctx(request)
    wanted = request.query_params.getlist("datasources")
    may_read = datasource_reader(request)
    used = [s for s in ctx.metadata.segments(None, used=True) if may_read(s.data_source)]
    if wanted:
        used = [s for s in used if s.data_source in set(wanted)]
    if not _flag(request, "includeOvershadowedStatus"):
        return [s.to_json() for s in used]
    over: set[str] = set()
    for tl in timelines_by_data_source(used).values():
        over |= tl.overshadowed()
    out = []
    for s in used:
        d = s.to_json()
        d.update({"overshadowed": s.identifier in over, "replicationFactor": None,
                  "numRows": s.num_rows, "realtime": False})
        out.append(d)
    return out


# -- rules ---------------------------------------------------------------------------------------


def _rules_of(ctx: ServerContext, ds: str) -> list[dict[str, Any]]:
    rules = ctx.metadata.get_rules(ds)
    if ds == "_default" and not rules:
        return [dict(r) for r in DEFAULT_RULES]
    return rules or []


@router.get("/rules")
def all_rules(request: Request) -> dict[str, list[dict[str, Any]]]:
    ctx = _ctx(request)
    may_read = datasource_reader(request)
    out = {ds: r for ds, r in ctx.metadata.all_rules().items() if ds == "_default" or may_read(ds)}
    if not out.get("_default"):
        out["_default"] = [dict(r) for r in DEFAULT_RULES]
    return out


@router.get("/rules/{data_source}")
def rules(data_source: str, request: Request) -> list[dict[str, Any]]:
    ctx = _ctx(request)
    own = _rules_of(ctx, data_source)
    if _flag(request, "full") and data_source != "_default":
        return own + _rules_of(ctx, "_default")
    return own


@router.post("/rules/{data_source}")
async def set_rules(data_source: str, request: Request) -> Response:
    body = await request.body()
    try:
        rules = orjson.loads(body) if body.strip() else None
    except orjson.JSONDecodeError as e:
        raise invalid_input(f"the request body is not valid JSON: {e}") from e
    if not isinstance(rules, list):
        raise invalid_input("rules: expected a JSON array of rules")
    for i, r in enumerate(rules):
        if not isinstance(r, dict) or r.get("type") not in RULE_TYPES:
            raise invalid_input(f"rules[{i}].type: unknown rule type {r.get('type') if isinstance(r, dict) else r!r}")
        if "interval" in r:
            _interval(str(r["interval"]))
    if data_source == "_default" and not rules:
        raise invalid_input("rules: the cluster default rules cannot be empty")

    await run_in_threadpool(_ctx(request).metadata.set_rules, data_source, rules)
    return Response(status_code=200)


# -- compaction config (radstack/storage/compaction/config.py) ---------------------------------------------------


@router.get("/config/compaction")
def compaction_configs(request: Request) -> dict[str, Any]:
    may_read = datasource_reader(request)
    doc = compaction_config_document(_ctx(request).metadata)
    return {**doc, "compactionConfigs": [c for c in doc["compactionConfigs"] if may_read(str(c.get("dataSource")))]}


@router.post("/config/compaction")
async def set_compaction_config(request: Request) -> Response:

    body = await request.body()
    try:
        raw = orjson.loads(body) if body.strip() else None
    except orjson.JSONDecodeError as e:
        raise invalid_input(f"the request body is not valid JSON: {e}") from e

    try:
        await run_in_threadpool(save_compaction_config, _ctx(request).metadata, raw)
    except CompactionError as e:
        raise invalid_input(str(e)) from e
    return Response(status_code=200)


@router.get("/config/compaction/{data_source}")
def compaction_config(data_source: str, request: Request) -> Any:

    for c in compaction_config_document(_ctx(request).metadata)["compactionConfigs"]:
        if c.get("dataSource") == data_source:
            return c
    raise not_found(f"datasource [{data_source}] has no compaction config")


@router.delete("/config/compaction/{data_source}")
def delete_compaction_config(data_source: str, request: Request) -> Response:

    if not delete(_ctx(request).metadata, data_source):
        raise not_found(f"datasource [{data_source}] has no compaction config")
    return Response(status_code=200)
