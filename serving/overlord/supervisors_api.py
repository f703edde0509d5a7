"""Druid's supervisor API (``/druid/indexer/v1/supervisor``) over radstack's streaming job.

A posted Kafka supervisor spec is stored (:mod:`radstack.storage.supervisors`); the streaming process
(``radctl stream``) runs a Spark streaming query for every running supervisor and stops it when it is
suspended or terminated. Status comes from what that query commits: the Kafka offsets of its last
published micro-batch (``committedOffsets``) and the newest offsets in Kafka, asked of the configured cluster at each status
request (``latestOffsets``), and their difference per partition (the lag).

| Druid | here |
| --- | --- |
| ``POST /supervisor`` | create, or update (the running query restarts with the new spec) → ``{"id"}`` |
| ``GET /supervisor`` (``?full``, ``?state=true``) | ids / full records / states |
| ``GET /supervisor/{id}``, ``…/status`` | the spec / the status payload |
| ``POST /supervisor/{id}/suspend``, ``…/resume`` | stop / start the query; → the spec |
| ``POST /supervisor/{id}/reset`` | forget the offsets: the query restarts at the earliest (``useEarliestOffset``) or latest offsets |
| ``POST /supervisor/{id}/terminate`` | stop the query and remove the supervisor (its segments stay) |
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException
from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from radstack.datasources import case_twin, case_twin_message, load_catalog
from radstack.kafka_offsets import latest_offsets
from radstack.spec import SpecError
from radstack.storage.replicas import progress_key, state_key
from radstack.storage.supervisors import (
    SupervisorError,
    SupervisorRecord,
    datasource_spec_from_supervisor,
    delete_supervisor,
    load_supervisors,
    save_supervisor,
)
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant
from serving.auth import datasource_reader, request_user
from serving.errors import DruidError, not_found
from serving.overlord.api import read_json
from serving.server_context import ServerContext

router = APIRouter(prefix="/druid/indexer/v1")


def _ctx(request: Request) -> Any:
    return request.app.state.ctx


def _record(ctx: ServerContext, supervisor_id: str, request: Request | None = None) -> SupervisorRecord:
    """The supervisor; with ``request`` (a read), READ on its datasource is needed to see it at all."""
    rec = load_supervisors(ctx.metadata).get(supervisor_id)
    if rec is None:
        raise not_found(f"Cannot find any supervisor with id: [{supervisor_id}]")
    user = request_user(request) if request is not None else None
    if user is not None:
        user.require("DATASOURCE", [rec.id], "READ")
    return rec


def _require_write(request: Request, data_source: str) -> None:
    user = request_user(request)
    if user is not None:
        user.require("DATASOURCE", [data_source], "WRITE")


def _spec_out(rec: SupervisorRecord) -> dict[str, Any]:
    return {**rec.shown_spec(), "suspended": rec.suspended}


def status_payload(ctx: ServerContext, rec: SupervisorRecord) -> dict[str, Any]:
    """Druid's supervisor status, from the query's committed state and its last progress."""
    committed_state = ctx.metadata.get_state(state_key(rec.id)) or {}
    progress = ctx.metadata.get_state(progress_key(rec.id)) or {}
    committed = {int(p): int(o) for p, o in ((committed_state.get("offsets") or {}).get(rec.topic) or {}).items()}
    try:  # the real lag: Kafka's newest offsets now (the configured cluster only), else the query's last view
        latest = latest_offsets(ctx.settings.kafka.clients_bootstrap, rec.topic, timeout=3.0)
    except KafkaException:
        latest = {int(p): int(o) for p, o in ((progress.get("latestOffsets") or {}).get(rec.topic) or {}).items()}
    lag = {p: max(0, latest[p] - committed.get(p, 0)) for p in latest}
    state = "SUSPENDED" if rec.suspended else ("RUNNING" if progress else "PENDING")
    return {
        "dataSource": rec.id,
        "stream": rec.topic,
        "partitions": len(latest) or len(committed),
        "replicas": 1,
        "durationSeconds": None,
        "activeTasks": [],
        "publishingTasks": [],
        "latestOffsets": {str(p): o for p, o in sorted(latest.items())},
        "committedOffsets": {str(p): o for p, o in sorted(committed.items())},
        "minimumLag": {str(p): lag_ for p, lag_ in sorted(lag.items())},
        "aggregateLag": sum(lag.values()),
        "offsetsLastUpdated": progress.get("updated"),
        "suspended": rec.suspended,
        "healthy": True,
        "state": state,
        "detailedState": state,
        "recentErrors": [],
    }


def _state_row(ctx: ServerContext, rec: SupervisorRecord) -> dict[str, Any]:
    st = status_payload(ctx, rec)
    return {"id": rec.id, "state": st["state"], "detailedState": st["detailedState"], "healthy": st["healthy"],
            "suspended": rec.suspended}


@router.post("/supervisor")
async def post_supervisor(request: Request) -> dict[str, str]:
    body = await read_json(request)
    ctx = _ctx(request)
    try:
        datasource = datasource_spec_from_supervisor(body)
    except SupervisorError as e:
        raise DruidError(str(e), category="INVALID_INPUT", context={"field": e.field}) from e
    name = str(datasource["dataSchema"]["dataSource"])
    _require_write(request, name)
    user = request_user(request)
    if user is not None:
        user.require("TOPIC", datasource["processing"]["topics"], "READ")  # a stream reads its topic
    try:
        catalog = load_catalog(ctx.settings)
    except SpecError:
        catalog = {}
    file_spec = catalog.get(name)
    streamed_from_file = file_spec is not None and bool(file_spec.processing.topics)
    if streamed_from_file:
        raise DruidError(f"Datasource [{name}] is streamed from its spec file in {ctx.settings.datasources_dir}; "
                         "a supervisor cannot take it over", category="INVALID_INPUT")

    def store() -> None:
        records = load_supervisors(ctx.metadata)
        old = records.get(name)
        twin = case_twin(name, [*records, *catalog, *ctx.metadata.data_sources(used_only=False)])
        if twin is not None:
            raise DruidError(case_twin_message(name, twin), category="INVALID_INPUT")
        limit = ctx.settings.server.max_supervisors_per_user
        if user is not None and old is None and sum(r.owner == user.name for r in records.values()) >= limit:
            raise DruidError(f"User [{user.name}] owns {limit} supervisors already (server.max_supervisors_per_user): "
                             "terminate one first", category="CAPACITY_EXCEEDED")
        rec = SupervisorRecord(id=name, spec=dict(body), datasource=datasource,
                               owner=old.owner if old is not None else (user.name if user is not None else None))
        if old is not None:  # an update: the running query restarts with the new spec, offsets kept
            rec.generation, rec.reset_generation, rec.created = old.generation + 1, old.reset_generation, old.created
            rec.state = "SUSPENDED" if body.get("suspended") else "RUNNING"
        elif body.get("suspended"):
            rec.state = "SUSPENDED"
        save_supervisor(ctx.metadata, rec)

    await run_in_threadpool(store)
    return {"id": name}


@router.get("/supervisor")
async def list_supervisors(request: Request) -> Any:
    ctx = _ctx(request)
    full, states = "full" in request.query_params, request.query_params.get("state") == "true"

    may_read = datasource_reader(request)

    def listing() -> Any:
        records = sorted((r for r in load_supervisors(ctx.metadata).values() if may_read(r.id)), key=lambda r: r.id)
        if full:
            return [{"id": r.id, "spec": _spec_out(r), "statusPayload": status_payload(ctx, r)} for r in records]
        if states:
            return [_state_row(ctx, r) for r in records]
        return [r.id for r in records]

    return await run_in_threadpool(listing)


@router.get("/supervisor/{supervisor_id}")
async def get_supervisor(request: Request, supervisor_id: str) -> dict[str, Any]:
    rec = await run_in_threadpool(_record, _ctx(request), supervisor_id, request)
    return _spec_out(rec)


@router.get("/supervisor/{supervisor_id}/status")
async def supervisor_status(request: Request, supervisor_id: str) -> dict[str, Any]:
    ctx = _ctx(request)
    rec = await run_in_threadpool(_record, ctx, supervisor_id, request)
    payload = await run_in_threadpool(status_payload, ctx, rec)
    return {"id": rec.id, "generationTime": format_instant(now_millis()), "payload": payload}


async def _change(request: Request, supervisor_id: str, change: Any) -> SupervisorRecord:
    ctx = _ctx(request)

    def apply() -> SupervisorRecord:
        rec = _record(ctx, supervisor_id)
        _require_write(request, rec.id)
        change(rec)
        save_supervisor(ctx.metadata, rec)
        return rec

    return await run_in_threadpool(apply)


@router.post("/supervisor/{supervisor_id}/suspend")
async def suspend(request: Request, supervisor_id: str) -> dict[str, Any]:
    return _spec_out(await _change(request, supervisor_id, lambda r: setattr(r, "state", "SUSPENDED")))


@router.post("/supervisor/{supervisor_id}/resume")
async def resume(request: Request, supervisor_id: str) -> dict[str, Any]:
    return _spec_out(await _change(request, supervisor_id, lambda r: setattr(r, "state", "RUNNING")))


@router.post("/supervisor/{supervisor_id}/reset")
async def reset(request: Request, supervisor_id: str) -> dict[str, str]:
    await _change(request, supervisor_id, lambda r: setattr(r, "reset_generation", r.reset_generation + 1))
    return {"id": supervisor_id}


@router.post("/supervisor/{supervisor_id}/terminate")
async def terminate(request: Request, supervisor_id: str) -> dict[str, str]:
    ctx = _ctx(request)

    def drop() -> None:
        rec = _record(ctx, supervisor_id)
        _require_write(request, rec.id)
        delete_supervisor(ctx.metadata, rec.id)

    await run_in_threadpool(drop)
    return {"id": supervisor_id}
