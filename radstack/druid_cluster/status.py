"""Druid's side of each datasource it serves, for ``radctl status``, the console (``GET
/radstack/v1/druid``) and scripts: the supervisor's state and lag, how much of the datasource Druid's
historicals have loaded, the re-indexes still to do, the last one, and the last correction measured against
Druid's real-time answer. Each question asked of Druid that fails is an ``error`` in the answer, never raised:
a Druid that is down is something status reports."""

from __future__ import annotations

from typing import Any

from radstack.config import Settings
from radstack.druid_cluster.reindex import TASK_TYPE, pending_reindexes
from radstack.druid_cluster.submit import DruidApiError, druid_client
from radstack.storage.metadata import MetadataStore
from radstack.time.intervals import format_instant

__all__ = ["druid_overview"]


def _supervisor(client: Any, name: str) -> dict[str, Any]:
    try:
        body = client.supervisor_status(name)
    except DruidApiError as e:
        return {"state": "MISSING" if e.status_code == 404 else "UNKNOWN", "error": str(e)}
    p = dict((body or {}).get("payload") or {})
    return {"state": p.get("state"), "detailedState": p.get("detailedState"), "healthy": p.get("healthy"),
            "suspended": p.get("suspended"), "aggregateLag": p.get("aggregateLag")}


def druid_overview(settings: Settings, md: MetadataStore) -> dict[str, Any]:
    """``{"configured": False}`` without a ``druid:`` target; else the cluster's URLs and, per datasource,
    what :mod:`radstack.druid_cluster.status` lists."""
    druid = settings.druid
    if not druid.overlord_url or not druid.datasources:
        return {"configured": False}
    pending = pending_reindexes(md)
    out: dict[str, Any] = {"configured": True, "overlord": druid.overlord_url, "broker": druid.broker,
                           "input": "parquet" if druid.parquet_input else "json.gz", "datasources": {}}
    with druid_client(druid) as client:
        try:
            load, load_error = client.load_status(), None
        except DruidApiError as e:
            load, load_error = {}, str(e)
        for name in druid.datasources:
            tasks = [t for t in md.list_tasks(datasource=name, limit=50) if t.type == TASK_TYPE]
            last = tasks[0] if tasks else None
            fix = next((c for c in reversed(md.corrections(name)) if c.served_by == "druid"), None)
            out["datasources"][name] = {
                "supervisor": _supervisor(client, name),
                "loadPercent": load.get(name), **({"loadError": load_error} if load_error else {}),
                "pendingReindex": [iv.iso() for iv in pending.get(name, [])],
                "lastReindex": None if last is None else {
                    "task": last.id, "status": last.status, "created": format_instant(last.created_date),
                    "interval": last.payload.get("interval"), "error": last.error_msg},
                "lastCorrection": None if fix is None else {
                    "interval": f"{format_instant(fix.start)}/{format_instant(fix.end)}",
                    "realtimeEvents": fix.realtime_events, "batchEvents": fix.batch_events,
                    "gap": fix.event_gap, "version": fix.version},
            }
    return out
