"""Druid's lookup API: the coordinator's configuration (``/druid/coordinator/v1/lookups``), the
process's own view (``/druid/listen/v1/lookups``) and introspection (``/druid/v1/lookups/introspect``).

Shapes and statuses follow Druid's ``LookupCoordinatorResource``: writes answer ``202 Accepted``; the
configuration must be initialized (``POST /config`` with ``{}``) before the first lookup; an update must
carry a lexicographically higher ``version``; a missing tier or lookup is ``404``. Errors are Druid's
``{"error": "…"}``, with 400 where Druid answers 500 for a bad request (a 5xx here means the server is
broken). Writes are checked (the same parsing the broker uses) before they are stored.
"""

from __future__ import annotations

import threading
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from radstack.lookups import LookupSpecError, check_name, parse_config, parse_container, replaces
from radstack.sql_text import quote_identifier
from radstack.storage.metadata import MetadataStore
from serving.lookups import CONFIG_KEY, read_config

router = APIRouter()

_PREFIX = "/druid/coordinator/v1/lookups"
_write_lock = threading.Lock()


def _ctx(request: Request) -> Any:
    return request.app.state.ctx


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() not in ("false", "0", "")


async def _body(request: Request) -> Any:
    raw = await request.body()
    try:
        return orjson.loads(raw) if raw.strip() else None
    except orjson.JSONDecodeError as e:
        raise LookupSpecError("body", f"not valid JSON: {e}") from None


def _update(metadata: MetadataStore, update: dict[str, dict[str, Any]]) -> None:
    """Merge ``update`` into the stored configuration (Druid's ``updateLookups``): nothing is deleted,
    and a lookup that exists must get a higher version."""
    parsed = parse_config(update)
    with _write_lock:
        current = read_config(metadata)
        if current is None:
            if any(update.values()):
                raise LookupSpecError("lookups", "Not initialized. If this is the first lookup, post an empty "
                                                 "map to initialize (POST /druid/coordinator/v1/lookups/config {})")
            current = {}
        merged = {tier: dict(lookups) for tier, lookups in current.items()}
        for tier, lookups in parsed.items():
            target = merged.setdefault(tier, {})
            for name, d in lookups.items():
                old = target.get(name)
                old_version = str(old.get("version", "")) if isinstance(old, dict) else None
                if old_version is not None and not replaces(d.version, old_version):
                    raise LookupSpecError(f"lookups.{tier}.{name}.version",
                                          f"version [{d.version}] is not newer than the existing version "
                                          f"[{old_version}]; use a lexicographically higher version")
                target[name] = d.to_json()
        metadata.set_config(CONFIG_KEY, merged)


def _delete(metadata: MetadataStore, tier: str, name: str | None) -> bool:
    with _write_lock:
        current = read_config(metadata)
        if current is None or tier not in current:
            return False
        if name is None:
            del current[tier]
        else:
            if name not in (current[tier] or {}):
                return False
            del current[tier][name]
            if not current[tier]:
                del current[tier]
        metadata.set_config(CONFIG_KEY, current)
        return True


async def _apply(request: Request) -> None:
    """Let the broker pick the change up now instead of at its next poll."""
    broker = getattr(_ctx(request), "broker", None)
    if broker is not None:
        await run_in_threadpool(broker.refresh)


# ---- configuration --------------------------------------------------------------------------------


@router.get(_PREFIX + "/config")
def tiers(request: Request) -> Any:
    config = read_config(_ctx(request).metadata)
    if _flag(request, "discover"):
        broker = getattr(_ctx(request), "broker", None)
        found = {broker.lookups.tier} if broker is not None else set()
        return sorted(found | set(config or {}))
    if config is None:
        return Response(status_code=404)
    return sorted(config)


@router.post(_PREFIX + "/config")
async def update_all(request: Request) -> Any:
    try:
        body = await _body(request)
        if not isinstance(body, dict):
            raise LookupSpecError("body", "expected {tier: {lookup: {version, lookupExtractorFactory}}}")
        await run_in_threadpool(_update, _ctx(request).metadata, body)
    except LookupSpecError as e:
        return _error(400, str(e))
    await _apply(request)
    return JSONResponse(body, status_code=202)


@router.get(_PREFIX + "/config/all")
def all_lookups(request: Request) -> Any:
    config = read_config(_ctx(request).metadata)
    return Response(status_code=404) if config is None else config


@router.get(_PREFIX + "/config/{tier}")
def tier_lookups(tier: str, request: Request) -> Any:
    config = read_config(_ctx(request).metadata)
    if config is None:
        return _error(404, "No lookups found")
    if tier not in config:
        return _error(404, f"Tier [{tier}] not found")
    return config[tier] if _flag(request, "detailed") else sorted(config[tier])


@router.delete(_PREFIX + "/config/{tier}")
async def delete_tier(tier: str, request: Request) -> Response:
    if not await run_in_threadpool(_delete, _ctx(request).metadata, tier, None):
        return Response(status_code=404)
    await _apply(request)
    return Response(status_code=202)


@router.get(_PREFIX + "/config/{tier}/{name}")
def get_lookup(tier: str, name: str, request: Request) -> Any:
    config = read_config(_ctx(request).metadata) or {}
    spec = (config.get(tier) or {}).get(name)
    if spec is None:
        return _error(404, f"lookup [{name}] not found")
    return spec


@router.post(_PREFIX + "/config/{tier}/{name}")
async def update_lookup(tier: str, name: str, request: Request) -> Any:
    try:
        check_name(tier, "tier")
        body = await _body(request)
        parse_container(name, body, f"lookups.{tier}.{name}")
        await run_in_threadpool(_update, _ctx(request).metadata, {tier: {name: body}})
    except LookupSpecError as e:
        return _error(400, str(e))
    await _apply(request)
    return Response(status_code=202)


@router.delete(_PREFIX + "/config/{tier}/{name}")
async def delete_lookup(tier: str, name: str, request: Request) -> Response:
    if not await run_in_threadpool(_delete, _ctx(request).metadata, tier, name):
        return Response(status_code=404)
    await _apply(request)
    return Response(status_code=202)


# ---- status -------------------------------------------------------------------------------------------


def _node(request: Request) -> str:
    s = _ctx(request).settings.server
    return f"{s.host}:{s.port}"


def _status(request: Request, tier: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Druid's LookupStatus: loaded when every node of the tier serves this version (one node here)."""
    broker = getattr(_ctx(request), "broker", None)
    served = broker is not None and broker.lookups.tier == tier
    loaded = served and getattr(broker.state.lookups.get(name), "version", None) == spec.get("version")
    out: dict[str, Any] = {"loaded": bool(loaded)}
    if _flag(request, "detailed"):
        out["pendingNodes"] = [] if loaded or not served else [_node(request)]
    return out


@router.get(_PREFIX + "/status")
def status_all(request: Request) -> Any:
    config = read_config(_ctx(request).metadata)
    if config is None:
        return _error(404, "No lookups found")
    return {tier: {name: _status(request, tier, name, spec) for name, spec in lookups.items()}
            for tier, lookups in config.items()}


def _tier(request: Request, tier: str) -> dict[str, Any] | JSONResponse:
    """The tier's configured lookups, or Druid's 404 for the status endpoints."""
    config = read_config(_ctx(request).metadata)
    if config is None:
        return _error(404, "No lookups found")
    if tier not in config:
        return _error(404, f"No lookups found for tier [{tier}].")
    return dict(config[tier])


@router.get(_PREFIX + "/status/{tier}")
def status_tier(tier: str, request: Request) -> Any:
    lookups = _tier(request, tier)
    if isinstance(lookups, JSONResponse):
        return lookups
    return {name: _status(request, tier, name, spec) for name, spec in lookups.items()}


@router.get(_PREFIX + "/status/{tier}/{name}")
def status_lookup(tier: str, name: str, request: Request) -> Any:
    lookups = _tier(request, tier)
    if isinstance(lookups, JSONResponse):
        return lookups
    if name not in lookups:
        return _error(404, f"Lookup [{name}] not found for tier [{tier}].")
    return _status(request, tier, name, lookups[name])


def _served(request: Request) -> dict[str, Any]:
    """The lookups this process serves now, with the container of the version it serves."""
    broker = _ctx(request).broker
    config = (read_config(_ctx(request).metadata) or {}).get(broker.lookups.tier) or {}
    return {name: config.get(name, {"version": lk.version}) for name, lk in broker.state.lookups.items()
            if config.get(name, {}).get("version") == lk.version}


@router.get(_PREFIX + "/nodeStatus")
def node_status(request: Request) -> Any:
    broker = _ctx(request).broker
    served = _served(request)
    if not _flag(request, "detailed") and "detailed" in request.query_params:
        served = {n: {"version": c.get("version")} for n, c in served.items()}
    config = read_config(_ctx(request).metadata) or {}
    wanted = config.get(broker.lookups.tier) or {}
    to_load = {n: c for n, c in wanted.items() if n not in served}
    return {broker.lookups.tier: {_node(request): {"loaded": served, "toLoad": to_load, "toDrop": []}}}


# ---- this process ---------------------------------------------------------------------------------


@router.get("/druid/listen/v1/lookups")
def listen_lookups(request: Request) -> Any:
    return _served(request)


@router.get("/druid/listen/v1/lookups/{name}")
def listen_lookup(name: str, request: Request) -> Any:
    served = _served(request)
    if name not in served:
        return _error(404, f"lookup [{name}] not found")
    return served[name]


def _pairs(request: Request, name: str) -> dict[str, str] | None:
    broker = _ctx(request).broker
    with broker.snapshot() as (cur, state):
        lk = state.lookups.get(name)
        if lk is None:
            return None
        return dict(cur.execute(f"SELECT k, v FROM {quote_identifier(lk.table)} ORDER BY k").fetchall())


@router.get("/druid/v1/lookups/introspect/{name}")
def introspect(name: str, request: Request) -> Any:
    pairs = _pairs(request, name)
    return _error(404, f"lookup [{name}] not found") if pairs is None else pairs


@router.get("/druid/v1/lookups/introspect/{name}/{part}")
def introspect_part(name: str, part: str, request: Request) -> Any:
    if part == "version":
        lk = _ctx(request).broker.state.lookups.get(name)
        return _error(404, f"lookup [{name}] not found") if lk is None else lk.version
    if part not in ("keys", "values"):
        return _error(404, f"unknown introspection [{part}] (keys, values, version)")
    pairs = _pairs(request, name)
    if pairs is None:
        return _error(404, f"lookup [{name}] not found")
    return list(pairs) if part == "keys" else list(pairs.values())
