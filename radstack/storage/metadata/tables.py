"""The metadata tables as Druid lays them out, their rows, errors and the SQLite connection setup."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from radstack.storage.segments import DataSegment

DEFAULT_RULES: list[dict[str, Any]] = [{"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}]
"""Druid's default rule set, stored under ``_default`` when the tables are created."""

DEFAULT_RULES_DS = "_default"
TASK_STATES = ("RUNNING", "SUCCESS", "FAILED")
CHUNK = 500  # ids per IN (...) list
SEQ_KEY = "druid_segments.seq"  # radstack_state row bumped by every change of druid_segments


class MetadataError(RuntimeError):
    """A metadata store operation that cannot be done."""


class DatasourceNameConflict(MetadataError, ValueError):
    """A publish names a datasource that differs from an existing one only in case (refused)."""


class SegmentExistsError(MetadataError):
    """A publish included a segment id that already exists (or appears twice in the batch)."""

    def __init__(self, ids: Sequence[str], message: str | None = None) -> None:
        self.ids = list(ids)
        super().__init__(
            message
            or f"segment(s) already exist: {', '.join(self.ids[:5])}"
            + (f" and {len(self.ids) - 5} more" if len(self.ids) > 5 else "")
        )


class TaskExistsError(MetadataError):
    """A task with that id was already inserted."""


@dataclass(frozen=True)
class SegmentRow:
    segment: DataSegment
    used: bool
    created_date: int  # epoch millis
    used_status_last_updated: int | None  # epoch millis

    @property
    def id(self) -> str:
        return self.segment.identifier


@dataclass(frozen=True)
class CorrectionRow:
    """What one batch publish changed in one time chunk whose real-time segments it overshadowed: the
    answer real time gave (``realtime_*``, from the segments it served at the swap) and the batch answer
    (``batch_*``), with the reasons they differ the batch job counted (``None`` where it cannot tell them
    apart: a spec with stream joins dedups before the writer sees the rows)."""

    datasource: str
    start: int  # epoch millis
    end: int
    version: str  # the batch version published
    realtime_version: str  # the real-time version it overshadowed ("" where real time had nothing)
    realtime_events: int
    batch_events: int
    realtime_metrics: dict[str, float]
    batch_metrics: dict[str, float]
    raw_events: int | None = None  # archived events of the chunk the batch job read
    duplicates_removed: int | None = None  # copies of an event the exact dedup dropped
    invalid_dropped: int | None = None  # archived events that were invalid or filtered out
    created: int = 0  # epoch millis of the publish
    id: int | None = None
    #: whose answers these are: "radstack" (its own real-time and batch segments) or "druid" (a Druid cluster's
    #: real-time answer before the re-index of the batch version, and its answer after; radstack/druid_cluster/)
    served_by: str = "radstack"

    @property
    def event_gap(self) -> int:
        """Batch minus real time: how many events the real-time answer was missing (negative: extra)."""
        return self.batch_events - self.realtime_events

    @property
    def late_recovered(self) -> int:
        """Events the batch counts that real time never did (later than the window period, or lost)."""
        return max(self.event_gap, 0)

    def payload(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "realtime_version", "realtime_events", "batch_events", "realtime_metrics", "batch_metrics",
            "raw_events", "duplicates_removed", "invalid_dropped", "served_by")}  # fmt: skip


@dataclass(frozen=True)
class TaskRow:
    id: str
    type: str
    datasource: str
    created_date: int  # epoch millis
    payload: dict[str, Any]
    status: str  # RUNNING | SUCCESS | FAILED
    active: bool
    duration_ms: int | None = None
    error_msg: str | None = None
    report: dict[str, Any] | None = None
    group_id: str | None = None

    def status_json(self) -> dict[str, Any]:
        """Druid's TaskStatus JSON (what ``/druid/indexer/v1/task/{id}/status`` wraps)."""
        return {
            "id": self.id,
            "status": self.status,
            "duration": -1 if self.duration_ms is None else self.duration_ms,
            "errorMsg": self.error_msg,
            "location": {"host": None, "port": -1, "tlsPort": -1},
        }


def _col(name: str, *args: Any, **kw: Any) -> sa.Column[Any]:
    # Unquoted like Druid's DDL; SQLAlchemy still quotes reserved words (``end``).
    reserved = name.lower() in ("end", "start", "type", "key", "value")
    return sa.Column(name, *args, quote=None if reserved else False, **kw)


def define_tables(md: sa.MetaData) -> dict[str, sa.Table]:
    segments = sa.Table(
        "druid_segments",
        md,
        _col("id", sa.String(255), primary_key=True),
        _col("dataSource", sa.String(255), nullable=False),
        _col("created_date", sa.String(255), nullable=False),
        _col("start", sa.String(255), nullable=False),
        _col("end", sa.String(255), nullable=False),
        _col("partitioned", sa.Boolean, nullable=False),
        _col("version", sa.String(255), nullable=False),
        _col("used", sa.Boolean, nullable=False),
        _col("payload", sa.LargeBinary, nullable=False),
        _col("used_status_last_updated", sa.String(255), nullable=False),
    )
    sa.Index("idx_druid_segments_used", segments.c.used)
    sa.Index(
        "idx_druid_segments_datasource_used_end_start",
        segments.c.dataSource,
        segments.c.used,
        segments.c.end,
        segments.c.start,
    )
    rules = sa.Table(
        "druid_rules",
        md,
        _col("id", sa.String(255), primary_key=True),
        _col("dataSource", sa.String(255), nullable=False),
        _col("version", sa.String(255), nullable=False),
        _col("payload", sa.LargeBinary, nullable=False),
    )
    sa.Index("idx_druid_rules_datasource", rules.c.dataSource)
    tasks = sa.Table(
        "druid_tasks",
        md,
        _col("id", sa.String(255), primary_key=True),
        _col("created_date", sa.String(255), nullable=False),
        _col("datasource", sa.String(255), nullable=False),
        _col("payload", sa.LargeBinary, nullable=False),
        _col("status_payload", sa.LargeBinary, nullable=False),
        _col("active", sa.Boolean, nullable=False, server_default=sa.false()),
        _col("type", sa.String(255)),
        _col("group_id", sa.String(255)),
        # radstack: the task report (Druid keeps reports in task logs, not in the database)
        _col("report_payload", sa.LargeBinary),
    )
    sa.Index("idx_druid_tasks_active_created_date", tasks.c.active, tasks.c.created_date)
    config = sa.Table(
        "druid_config",
        md,
        _col("name", sa.String(255), primary_key=True),
        _col("payload", sa.LargeBinary, nullable=False),
    )
    state = sa.Table(
        "radstack_state",
        md,
        _col("key", sa.String(255), primary_key=True),
        _col("value", sa.Text, nullable=False),
        _col("updated", sa.String(255), nullable=False),
    )
    subscriptions = (
        sa.Table(  # radstack: live queries whose answers the server pushes (serving/subscriptions/hub.py)
            "radstack_subscriptions",
            md,
            _col("id", sa.String(255), primary_key=True),
            _col("created_date", sa.String(255), nullable=False),
            _col("payload", sa.LargeBinary, nullable=False),
        )
    )
    corrections = sa.Table(  # radstack: what each batch publish changed against real time (storage/corrections.py)
        "radstack_corrections",
        md,
        _col("id", sa.Integer, primary_key=True, autoincrement=True),
        _col("dataSource", sa.String(255), nullable=False),
        _col("start", sa.String(255), nullable=False),
        _col("end", sa.String(255), nullable=False),
        _col("version", sa.String(255), nullable=False),
        _col("created_date", sa.String(255), nullable=False),
        _col("payload", sa.LargeBinary, nullable=False),
    )
    sa.Index("idx_radstack_corrections_datasource_start", corrections.c.dataSource, corrections.c.start)
    return {
        "corrections": corrections,
        "segments": segments,
        "rules": rules,
        "tasks": tasks,
        "config": config,
        "state": state,
        "subscriptions": subscriptions,
    }


def normalize_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` → ``postgresql+psycopg://`` (psycopg 3); a bare path →
    ``sqlite:///path``."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://") :]
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser()}"
    return url


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def json_loads(raw: bytes | memoryview | str | None) -> Any:
    if raw is None:
        return None
    if isinstance(raw, memoryview):
        raw = raw.tobytes()
    return json.loads(raw)


def chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for i in range(0, len(ids), CHUNK):
        yield ids[i : i + CHUNK]


def check_status(status: str) -> None:
    if status not in TASK_STATES:
        raise ValueError(f"task status must be one of {', '.join(TASK_STATES)}, not {status!r}")


def configure_sqlite(engine: Engine, *, wal: bool) -> None:
    """WAL + busy timeout, and take transactions ourselves: readers ``BEGIN`` (deferred), writers
    ``BEGIN IMMEDIATE`` so the write lock is held from the start (no upgrade deadlocks)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # the driver must not emit its own BEGIN
        cur = dbapi_conn.cursor()
        if wal:
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("radstack_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
