"""Druid's ``sys`` schema (segments, servers, server_segments, tasks, supervisors) built per query
from the broker's state and the metadata store, as Arrow tables DuckDB reads directly."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from radstack.storage.metadata import MetadataStore
from radstack.storage.supervisors import load_supervisors
from radstack.time.intervals import format_instant
from serving.broker.store.state import QueryableBroker

S, L = pa.string(), pa.int64()

SEGMENTS = pa.schema([
    ("segment_id", S), ("datasource", S), ("start", S), ("end", S), ("size", L), ("version", S),
    ("partition_num", L), ("num_replicas", L), ("num_rows", L), ("is_active", L), ("is_published", L),
    ("is_available", L), ("is_realtime", L), ("is_overshadowed", L), ("shard_spec", S),
    ("dimensions", S), ("metrics", S), ("last_compaction_state", S), ("replication_factor", L),
])
SERVERS = pa.schema([
    ("server", S), ("host", S), ("plaintext_port", L), ("tls_port", L), ("server_type", S), ("tier", S),
    ("curr_size", L), ("max_size", L), ("is_leader", L), ("start_time", S),
])
SERVER_SEGMENTS = pa.schema([("server", S), ("segment_id", S)])
TASKS = pa.schema([
    ("task_id", S), ("group_id", S), ("type", S), ("datasource", S), ("created_time", S),
    ("queue_insertion_time", S), ("status", S), ("runner_status", S), ("duration", L), ("location", S),
    ("host", S), ("plaintext_port", L), ("tls_port", L), ("error_msg", S),
])
SUPERVISORS = pa.schema([
    ("supervisor_id", S), ("state", S), ("detailed_state", S), ("healthy", L), ("type", S),
    ("source", S), ("suspended", L), ("spec", S),
])

CORRECTIONS = pa.schema([  # radstack: what each batch publish changed against real time (storage/corrections.py)
    ("datasource", S), ("start", S), ("end", S), ("version", S), ("realtime_version", S), ("published", S),
    ("realtime_events", L), ("batch_events", L), ("event_gap", L), ("late_recovered", L),
    ("duplicates_removed", L), ("invalid_dropped", L), ("raw_events", L), ("realtime_metrics", S),
    ("batch_metrics", S), ("served_by", S),
])

SCHEMAS: dict[str, pa.Schema] = {
    "segments": SEGMENTS, "servers": SERVERS, "server_segments": SERVER_SEGMENTS, "tasks": TASKS,
    "supervisors": SUPERVISORS, "corrections": CORRECTIONS,
}


def _json(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return orjson.dumps(v).decode()


def _flag(v: Any) -> int:
    return 1 if v else 0


def segment_rows(states: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``BrokerService.segment_states()`` → sys.segments rows, with Druid's ``is_active`` rule."""
    rows = []
    for st in states:
        published, realtime = _flag(st.get("is_published", 1)), _flag(st.get("is_realtime"))
        overshadowed = _flag(st.get("is_overshadowed"))
        rows.append({
            "segment_id": st["segment_id"],
            "datasource": st["datasource"],
            "start": st["start"],
            "end": st["end"],
            "size": int(st.get("size") or 0),
            "version": st["version"],
            "partition_num": int(st.get("partition_num") or 0),
            "num_replicas": int(st.get("num_replicas") or 0),
            "num_rows": None if st.get("num_rows") is None else int(st["num_rows"]),
            "is_active": _flag((published and not overshadowed) or realtime),
            "is_published": published,
            "is_available": _flag(st.get("is_available")),
            "is_realtime": realtime,
            "is_overshadowed": overshadowed,
            "shard_spec": _json(st.get("shard_spec")),
            "dimensions": _json(st.get("dimensions")),
            "metrics": _json(st.get("metrics")),
            "last_compaction_state": _json(st.get("last_compaction_state")),
            "replication_factor": int(st.get("replication_factor", 1 if published else 0)),
        })
    return rows


def segments_table(broker: QueryableBroker) -> pa.Table:
    return pa.Table.from_pylist(segment_rows(broker.segment_states()), schema=SEGMENTS)


def _server_rows(host: str, port: int, started_ms: int | None, curr_size: int) -> list[dict[str, Any]]:
    start = format_instant(started_ms) if started_ms is not None else None
    rows = []
    for role, tier, leader in (("coordinator", None, 1), ("overlord", None, 1), ("broker", None, None),
                               ("historical", "_default_tier", None)):
        rows.append({
            "server": f"{host}:{port}", "host": host, "plaintext_port": port, "tls_port": -1,
            "server_type": role, "tier": tier, "curr_size": curr_size if role == "historical" else 0,
            "max_size": 0, "is_leader": leader, "start_time": start,
        })
    return rows


def servers_table(broker: QueryableBroker | None, host: str, port: int, started_ms: int | None) -> pa.Table:
    states = broker.segment_states() if broker is not None else []
    size = sum(int(s.get("size") or 0) for s in states if s.get("is_available"))
    return pa.Table.from_pylist(_server_rows(host, port, started_ms, size), schema=SERVERS)


def server_segments_table(broker: QueryableBroker | None, host: str, port: int) -> pa.Table:
    states = broker.segment_states() if broker is not None else []
    rows = [{"server": f"{host}:{port}", "segment_id": s["segment_id"]} for s in states if s.get("is_available")]
    return pa.Table.from_pylist(rows, schema=SERVER_SEGMENTS)


def tasks_table(metadata: MetadataStore) -> pa.Table:
    rows = []
    tasks = metadata.list_tasks() if metadata is not None and hasattr(metadata, "list_tasks") else []
    for t in tasks:
        created = format_instant(int(t.created_date)) if t.created_date is not None else None
        rows.append({
            "task_id": t.id, "group_id": t.group_id or t.id, "type": t.type, "datasource": t.datasource,
            "created_time": created, "queue_insertion_time": created, "status": t.status,
            "runner_status": "RUNNING" if t.active else "NONE",
            "duration": -1 if t.duration_ms is None else int(t.duration_ms), "location": None,
            "host": None, "plaintext_port": -1, "tls_port": -1, "error_msg": t.error_msg,
        })
    return pa.Table.from_pylist(rows, schema=TASKS)


def supervisors_table(metadata: MetadataStore | None) -> pa.Table:
    """The Kafka supervisors posted to the supervisor API (each runs as a Spark streaming query)."""
    records = load_supervisors(metadata) if metadata is not None else {}
    rows = [{"supervisor_id": r.id, "state": r.state, "detailed_state": r.state, "healthy": 1, "type": "kafka",
             "source": r.topic, "suspended": int(r.suspended), "spec": orjson.dumps(r.shown_spec()).decode()}
            for r in sorted(records.values(), key=lambda r: r.id)]
    return pa.Table.from_pylist(rows, schema=SUPERVISORS)


def corrections_table(metadata: MetadataStore | None) -> pa.Table:
    """One row per time chunk a batch publish took over from real time: both answers and why they differ."""
    rows = [{
        "datasource": c.datasource, "start": format_instant(c.start), "end": format_instant(c.end),
        "version": c.version, "realtime_version": c.realtime_version, "published": format_instant(c.created),
        "realtime_events": c.realtime_events, "batch_events": c.batch_events, "event_gap": c.event_gap,
        "late_recovered": c.late_recovered, "duplicates_removed": c.duplicates_removed,
        "invalid_dropped": c.invalid_dropped, "raw_events": c.raw_events,
        "realtime_metrics": orjson.dumps(c.realtime_metrics).decode(),
        "batch_metrics": orjson.dumps(c.batch_metrics).decode(), "served_by": c.served_by,
    } for c in (metadata.corrections() if metadata is not None else [])]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=CORRECTIONS)
