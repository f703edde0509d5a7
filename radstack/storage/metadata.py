"""The metadata store: Druid's ``druid_segments``, ``druid_rules``, ``druid_tasks`` and ``druid_config``
tables plus ``radstack_state`` (watermarks), through SQLAlchemy Core.

SQLite by default (WAL mode, a busy timeout, write transactions taken with ``BEGIN IMMEDIATE`` so two
writers never deadlock on a lock upgrade), PostgreSQL (psycopg 3) when the URL says so. The schema
follows Druid's ``SQLMetadataConnector``: ISO strings for ``created_date``/``start``/``end``, the
DataSegment JSON as bytes in ``payload``, the same index names. Column names are emitted unquoted
like Druid's DDL (PostgreSQL folds ``dataSource`` to ``datasource``), except ``end``, which is reserved.

Publishing a set of segments is one transaction: readers see all of it or none of it. One
:class:`MetadataStore` (one Engine) is shared by every thread; each call takes its own connection.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import StaticPool

from radstack.config import Settings
from radstack.storage.segments import DataSegment
from radstack.time.clock import now_millis
from radstack.time.intervals import Interval, format_instant, parse_instant

DEFAULT_RULES: list[dict[str, Any]] = [{"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}]
"""Druid's default rule set, stored under ``_default`` when the tables are created."""

DEFAULT_RULES_DS = "_default"
TASK_STATES = ("RUNNING", "SUCCESS", "FAILED")
_CHUNK = 500  # ids per IN (...) list
_SEQ_KEY = "druid_segments.seq"  # radstack_state row bumped by every change of druid_segments


class MetadataError(RuntimeError):
    """A metadata store operation that cannot be done."""


class SegmentExistsError(MetadataError):
    """A publish included a segment id that already exists (or appears twice in the batch)."""

    def __init__(self, ids: Sequence[str], message: str | None = None) -> None:
        self.ids = list(ids)
        super().__init__(message or f"segment(s) already exist: {', '.join(self.ids[:5])}"
                         + (f" and {len(self.ids) - 5} more" if len(self.ids) > 5 else ""))


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


def _tables(md: sa.MetaData) -> dict[str, sa.Table]:
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
    subscriptions = sa.Table(  # radstack: live queries whose answers the server pushes (serving/subscriptions.py)
        "radstack_subscriptions",
        md,
        _col("id", sa.String(255), primary_key=True),
        _col("created_date", sa.String(255), nullable=False),
        _col("payload", sa.LargeBinary, nullable=False),
    )
    return {"segments": segments, "rules": rules, "tasks": tasks, "config": config, "state": state,
            "subscriptions": subscriptions}


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



def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _loads(raw: bytes | memoryview | str | None) -> Any:
    if raw is None:
        return None
    if isinstance(raw, memoryview):
        raw = raw.tobytes()
    return json.loads(raw)


def _chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i : i + _CHUNK]


class MetadataStore:
    """Druid's metadata tables behind a small API. Thread-safe; every method is its own transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self.metadata = sa.MetaData()
        t = _tables(self.metadata)
        self.t_segments, self.t_rules, self.t_tasks = t["segments"], t["rules"], t["tasks"]
        self.t_config, self.t_state = t["config"], t["state"]
        self.t_subscriptions = t["subscriptions"]
        # An in-memory SQLite database is one shared connection: serialize its use.
        self._lock: threading.Lock | None = (
            threading.Lock() if isinstance(engine.pool, StaticPool) else None
        )

    # ---- lifecycle ------------------------------------------------------------------------------

    @classmethod
    def from_url(cls, url: str, **engine_kw: Any) -> MetadataStore:
        url = normalize_url(url)
        sa_url = sa.make_url(url)
        if sa_url.get_backend_name() == "sqlite":
            db = sa_url.database or ""
            memory = db in ("", ":memory:") or db.startswith("file::memory:")
            if not memory:
                Path(db).expanduser().parent.mkdir(parents=True, exist_ok=True)
            kw: dict[str, Any] = {"connect_args": {"timeout": 30, "check_same_thread": False}}
            if memory:
                kw["poolclass"] = StaticPool
            kw.update(engine_kw)
            engine = sa.create_engine(sa_url, **kw)
            _configure_sqlite(engine, wal=not memory)
        else:
            kw = {"pool_pre_ping": True, "pool_size": 5, "max_overflow": 10}
            kw.update(engine_kw)
            engine = sa.create_engine(sa_url, **kw)
        return cls(engine)

    @classmethod
    def from_settings(cls, settings: Settings, *, create: bool = True) -> MetadataStore:
        store = cls.from_url(settings.metadata_url)
        if create:
            store.create_tables()
        return store

    def create_tables(self) -> None:
        """Create the tables and indexes that are missing (idempotent) and Druid's default rules."""
        with self._tx(write=True) as conn:
            self.metadata.create_all(conn, checkfirst=True)
        if self.get_rules(DEFAULT_RULES_DS) is None:
            with suppress(IntegrityError):  # another process created them at the same time
                self.set_rules(DEFAULT_RULES_DS, DEFAULT_RULES)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self, *, write: bool = False) -> Iterator[Connection]:
        """One transaction. SQLite writers start with BEGIN IMMEDIATE (see _configure_sqlite)."""
        if self._lock is not None:
            self._lock.acquire()
        try:
            with self.engine.connect() as conn:
                if write:
                    conn.execution_options(radstack_write=True)
                with conn.begin():
                    yield conn
        finally:
            if self._lock is not None:
                self._lock.release()

    # ---- segments -------------------------------------------------------------------------------

    def _bump_seq(self, conn: Connection, now: str) -> None:
        st = self.t_state
        res = conn.execute(
            sa.update(st)
            .where(st.c.key == _SEQ_KEY)
            .values(value=sa.cast(sa.cast(st.c.value, sa.BigInteger) + 1, sa.Text), updated=now)
        )
        if res.rowcount == 0:
            self._upsert(conn, st, {"key": _SEQ_KEY, "value": "1", "updated": now}, ["key"])

    def publish(
        self,
        segments: Sequence[DataSegment],
        *,
        mark_unused_ids: Iterable[str] = (),
        state: Mapping[str, Any] | None = None,
    ) -> None:
        """Insert ``segments`` as used and mark ``mark_unused_ids`` unused, in ONE transaction. An id
        that already exists (or twice in the batch) raises :class:`SegmentExistsError` and nothing of
        this publish becomes visible. ``state`` (key → JSON value) is written to ``radstack_state`` in
        the same transaction (e.g. the streaming job's "batch N is done" record)."""
        segments = list(segments)
        drop = list(dict.fromkeys(str(i) for i in mark_unused_ids))
        ids = [s.identifier for s in segments]
        dupes = sorted({i for i in ids if ids.count(i) > 1}) if len(set(ids)) != len(ids) else []
        now = format_instant(now_millis())
        rows = [
            {
                "id": s.identifier,
                "dataSource": s.data_source,
                "created_date": now,
                "start": format_instant(s.interval.start),
                "end": format_instant(s.interval.end),
                "partitioned": s.shard_spec.type != "none",
                "version": s.version,
                "used": True,
                "payload": s.to_payload().encode(),
                "used_status_last_updated": now,
            }
            for s in segments
        ]
        t = self.t_segments
        try:
            with self._tx(write=True) as conn:
                existing: list[str] = []
                for chunk in _chunks(list(dict.fromkeys(ids))):
                    existing += conn.execute(sa.select(t.c.id).where(t.c.id.in_(chunk))).scalars().all()
                if existing:
                    raise SegmentExistsError(sorted(existing))
                if rows:
                    # A duplicate inside the batch fails here, mid-transaction: the rollback takes
                    # back every row of this publish.
                    conn.execute(sa.insert(t), rows)
                for chunk in _chunks(drop):
                    conn.execute(
                        sa.update(t).where(t.c.id.in_(chunk), t.c.used == sa.true())
                        .values(used=False, used_status_last_updated=now)
                    )
                for key, value in (state or {}).items():
                    if key == _SEQ_KEY:
                        raise ValueError(f"{key!r} is reserved")
                    self._upsert(
                        conn, self.t_state, {"key": key, "value": json.dumps(value), "updated": now}, ["key"]
                    )
                if rows or drop:
                    self._bump_seq(conn, now)
        except IntegrityError as e:
            raise SegmentExistsError(dupes or ids, f"publish failed, nothing was published: {e.orig}") from e

    def _row(self, r: sa.Row[Any]) -> SegmentRow:
        last = r.used_status_last_updated
        return SegmentRow(
            segment=DataSegment.from_json(_loads(r.payload)),
            used=bool(r.used),
            created_date=parse_instant(r.created_date),
            used_status_last_updated=parse_instant(last) if last else None,
        )

    def _segment_query(
        self, data_source: str | None, used: bool | None, interval: Interval | None
    ) -> sa.Select[Any]:
        t = self.t_segments
        q = sa.select(t.c.payload, t.c.used, t.c.created_date, t.c.used_status_last_updated)
        if data_source is not None:
            q = q.where(t.c.dataSource == data_source)
        if used is not None:
            q = q.where(t.c.used == (sa.true() if used else sa.false()))
        if interval is not None:
            # ISO strings of the same (24-char) shape compare like instants, as Druid relies on;
            # other shapes (eternity, far years) pass through to the exact check in Python.
            lo, hi = format_instant(interval.start), format_instant(interval.end)
            if len(hi) == 24:
                q = q.where(sa.or_(sa.func.length(t.c.start) != 24, t.c.start < hi))
            if len(lo) == 24:
                q = q.where(sa.or_(sa.func.length(t.c.end) != 24, t.c.end > lo))
        return q

    def segment_rows(
        self, data_source: str | None = None, *, used: bool | None = True, interval: Interval | None = None
    ) -> list[SegmentRow]:
        """Rows with their used flag and timestamps, in Druid's segment order."""
        with self._tx() as conn:
            raw = conn.execute(self._segment_query(data_source, used, interval)).all()
        rows = [self._row(r) for r in raw]
        if interval is not None:
            rows = [r for r in rows if r.segment.interval.overlaps(interval)]
        rows.sort(key=lambda r: r.segment.id.sort_key())
        return rows

    def segments(
        self, data_source: str | None = None, *, used: bool | None = True, interval: Interval | None = None
    ) -> list[DataSegment]:
        """Segments (used ones by default), ``interval``: those overlapping it."""
        return [r.segment for r in self.segment_rows(data_source, used=used, interval=interval)]

    def get_segment(self, segment_id: str) -> SegmentRow | None:
        t = self.t_segments
        with self._tx() as conn:
            r = conn.execute(
                sa.select(t.c.payload, t.c.used, t.c.created_date, t.c.used_status_last_updated).where(
                    t.c.id == str(segment_id)
                )
            ).first()
        return None if r is None else self._row(r)

    def _set_used(self, ids: Iterable[str], used: bool) -> int:
        ids = list(dict.fromkeys(str(i) for i in ids))
        if not ids:
            return 0
        t = self.t_segments
        now = format_instant(now_millis())
        n = 0
        with self._tx(write=True) as conn:
            for chunk in _chunks(ids):
                res = conn.execute(
                    sa.update(t)
                    .where(t.c.id.in_(chunk), t.c.used == (sa.false() if used else sa.true()))
                    .values(used=used, used_status_last_updated=now)
                )
                n += res.rowcount
            if n:
                self._bump_seq(conn, now)
        return n

    def mark_unused(self, ids: Iterable[str]) -> int:
        """Mark used segments unused; returns how many changed."""
        return self._set_used(ids, False)

    def mark_used(self, ids: Iterable[str]) -> int:
        """Mark unused segments used again; returns how many changed."""
        return self._set_used(ids, True)

    def delete_segments(self, ids: Iterable[str]) -> int:
        """Delete rows (a kill task's metadata part); returns how many were deleted."""
        ids = list(dict.fromkeys(str(i) for i in ids))
        if not ids:
            return 0
        t = self.t_segments
        n = 0
        with self._tx(write=True) as conn:
            for chunk in _chunks(ids):
                n += conn.execute(sa.delete(t).where(t.c.id.in_(chunk))).rowcount
            if n:
                self._bump_seq(conn, format_instant(now_millis()))
        return n

    def delete_unused_segments(self, ids: Iterable[str]) -> list[str]:
        """Delete rows that are still unused (serving.kill): the ``used = false`` check is part of the
        DELETE itself (``RETURNING id``), so a segment marked used meanwhile is never deleted. Returns
        the ids actually deleted."""
        ids = list(dict.fromkeys(str(i) for i in ids))
        if not ids:
            return []
        t = self.t_segments
        deleted: list[str] = []
        with self._tx(write=True) as conn:
            for chunk in _chunks(ids):
                stmt = sa.delete(t).where(t.c.id.in_(chunk), t.c.used == sa.false()).returning(t.c.id)
                deleted += [str(i) for i in conn.execute(stmt).scalars().all()]
            if deleted:
                self._bump_seq(conn, format_instant(now_millis()))
        return deleted

    def data_sources(self, *, used_only: bool = True) -> list[str]:
        t = self.t_segments
        q = sa.select(t.c.dataSource).distinct()
        if used_only:
            q = q.where(t.c.used == sa.true())
        with self._tx() as conn:
            return sorted(conn.execute(q).scalars().all())

    def ping(self) -> None:
        """Raise when the store cannot be reached (``SELECT 1`` in a transaction of its own)."""
        with self._tx() as conn:
            conn.execute(sa.text("SELECT 1"))

    def change_token(self) -> tuple[Any, ...]:
        """Cheap token that changes whenever ``druid_segments`` changes: radstack's change counter
        plus the used-row count and the newest timestamps (the latter catch outside writers)."""
        t, st = self.t_segments, self.t_state
        with self._tx() as conn:
            seq = conn.execute(sa.select(st.c.value).where(st.c.key == _SEQ_KEY)).scalar()
            count, created, updated = conn.execute(
                sa.select(sa.func.count(), sa.func.max(t.c.created_date), sa.func.max(t.c.used_status_last_updated))
                .where(t.c.used == sa.true())
            ).one()
        return (int(seq or 0), int(count or 0), created, updated)

    # ---- rules ----------------------------------------------------------------------------------

    def get_rules(self, data_source: str) -> list[dict[str, Any]] | None:
        """The latest rule list of ``data_source`` (``_default`` for the cluster default), or None."""
        t = self.t_rules
        with self._tx() as conn:
            raw = conn.execute(
                sa.select(t.c.payload).where(t.c.dataSource == data_source).order_by(t.c.version.desc()).limit(1)
            ).scalar()
        return None if raw is None else list(_loads(raw))

    def set_rules(self, data_source: str, rules: list[dict[str, Any]]) -> None:
        """Store a new version of the rules (Druid keeps the history; the latest wins)."""
        t = self.t_rules
        with self._tx(write=True) as conn:
            latest = conn.execute(
                sa.select(sa.func.max(t.c.version)).where(t.c.dataSource == data_source)
            ).scalar()
            now = now_millis()
            if latest:
                with suppress(ValueError):
                    now = max(now, parse_instant(latest) + 1)
            version = format_instant(now)
            conn.execute(
                sa.insert(t).values(
                    id=f"{data_source}_{version}", dataSource=data_source, version=version,
                    payload=_json_bytes(list(rules)),
                )
            )

    def all_rules(self) -> dict[str, list[dict[str, Any]]]:
        t = self.t_rules
        latest = (
            sa.select(t.c.dataSource, sa.func.max(t.c.version).label("v")).group_by(t.c.dataSource).subquery()
        )
        q = sa.select(t.c.dataSource, t.c.payload).join(
            latest, sa.and_(t.c.dataSource == latest.c.dataSource, t.c.version == latest.c.v)
        )
        with self._tx() as conn:
            return {ds: list(_loads(p)) for ds, p in conn.execute(q).all()}

    def rules_history(self, data_source: str) -> list[tuple[str, list[dict[str, Any]]]]:
        """(version, rules) newest first."""
        t = self.t_rules
        with self._tx() as conn:
            rows = conn.execute(
                sa.select(t.c.version, t.c.payload).where(t.c.dataSource == data_source).order_by(t.c.version.desc())
            ).all()
        return [(v, list(_loads(p))) for v, p in rows]

    # ---- tasks ----------------------------------------------------------------------------------

    def insert_task(
        self,
        task_id: str,
        *,
        type: str,
        datasource: str,
        payload: dict[str, Any],
        status: str = "RUNNING",
        group_id: str | None = None,
    ) -> TaskRow:
        _check_status(status)
        now = now_millis()
        row = TaskRow(task_id, type, datasource, now, dict(payload), status, status == "RUNNING", group_id=group_id)
        try:
            with self._tx(write=True) as conn:
                conn.execute(
                    sa.insert(self.t_tasks).values(
                        id=task_id, created_date=format_instant(now), datasource=datasource,
                        payload=_json_bytes(payload), status_payload=_json_bytes(row.status_json()),
                        active=row.active, type=type, group_id=group_id or task_id,
                    )
                )
        except IntegrityError as e:
            raise TaskExistsError(f"task {task_id} already exists") from e
        return row

    def update_task(
        self,
        task_id: str,
        *,
        status: str,
        duration_ms: int | None = None,
        error_msg: str | None = None,
        report: dict[str, Any] | None = None,
    ) -> TaskRow:
        """Set a task's status (SUCCESS/FAILED make it inactive); raises KeyError for unknown ids."""
        _check_status(status)
        status_payload = {
            "id": task_id, "status": status, "duration": -1 if duration_ms is None else duration_ms,
            "errorMsg": error_msg, "location": {"host": None, "port": -1, "tlsPort": -1},
        }
        values: dict[str, Any] = {"status_payload": _json_bytes(status_payload), "active": status == "RUNNING"}
        if report is not None:
            values["report_payload"] = _json_bytes(report)
        t = self.t_tasks
        with self._tx(write=True) as conn:
            if conn.execute(sa.update(t).where(t.c.id == task_id).values(**values)).rowcount == 0:
                raise KeyError(task_id)
        row = self.get_task(task_id)
        assert row is not None
        return row

    def _task(self, r: sa.Row[Any]) -> TaskRow:
        st = _loads(r.status_payload) or {}
        dur = st.get("duration")
        return TaskRow(
            id=r.id, type=r.type or "", datasource=r.datasource, created_date=parse_instant(r.created_date),
            payload=_loads(r.payload) or {}, status=st.get("status") or st.get("statusCode") or "RUNNING",
            active=bool(r.active), duration_ms=None if dur is None or dur < 0 else int(dur),
            error_msg=st.get("errorMsg"), report=_loads(r.report_payload), group_id=r.group_id,
        )

    def get_task(self, task_id: str) -> TaskRow | None:
        with self._tx() as conn:
            r = conn.execute(sa.select(self.t_tasks).where(self.t_tasks.c.id == task_id)).first()
        return None if r is None else self._task(r)

    def list_tasks(
        self, *, datasource: str | None = None, state: str | None = None, limit: int | None = None
    ) -> list[TaskRow]:
        """Newest first. ``state``: RUNNING | SUCCESS | FAILED, or Druid's ``running``/``complete``."""
        t = self.t_tasks
        q = sa.select(t).order_by(t.c.created_date.desc(), t.c.id.desc())
        if datasource is not None:
            q = q.where(t.c.datasource == datasource)
        want: str | None = None
        if state is not None:
            s = state.lower()
            if s in ("running", "active", "pending", "waiting"):
                q = q.where(t.c.active == sa.true())
            elif s == "complete":
                q = q.where(t.c.active == sa.false())
            else:
                want = state.upper()
                _check_status(want)
                q = q.where(t.c.active == (sa.true() if want == "RUNNING" else sa.false()))
        if limit is not None and want is None:
            q = q.limit(limit)
        with self._tx() as conn:
            rows = [self._task(r) for r in conn.execute(q).all()]
        if want is not None:
            rows = [r for r in rows if r.status == want]
            if limit is not None:
                rows = rows[:limit]
        return rows

    # ---- config and state -----------------------------------------------------------------------

    def _upsert(self, conn: Connection, table: sa.Table, values: dict[str, Any], keys: list[str]) -> None:
        if self.dialect in ("postgresql", "sqlite"):
            dialect_insert = postgresql_insert if self.dialect == "postgresql" else sqlite_insert
        else:  # pragma: no cover - other backends: update, then insert
            if conn.execute(
                sa.update(table).where(*(table.c[k] == values[k] for k in keys)).values(**values)
            ).rowcount == 0:
                conn.execute(sa.insert(table).values(**values))
            return
        stmt = dialect_insert(table).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=[table.c[k] for k in keys],
            set_={k: v for k, v in values.items() if k not in keys},
        )
        conn.execute(stmt)

    def get_config(self, name: str, default: Any = None) -> Any:
        t = self.t_config
        with self._tx() as conn:
            raw = conn.execute(sa.select(t.c.payload).where(t.c.name == name)).scalar()
        return default if raw is None else _loads(raw)

    def set_config(self, name: str, value: Any) -> None:
        with self._tx(write=True) as conn:
            self._upsert(conn, self.t_config, {"name": name, "payload": _json_bytes(value)}, ["name"])

    # ---- subscriptions --------------------------------------------------------------------------

    def insert_subscription(self, sub_id: str, payload: dict[str, Any]) -> str:
        """Store a new subscription; returns its created date."""
        created = format_instant(now_millis())
        with self._tx(write=True) as conn:
            conn.execute(sa.insert(self.t_subscriptions).values(id=sub_id, created_date=created,
                                                                payload=_json_bytes(payload)))
        return created

    def subscriptions(self) -> list[tuple[str, str, dict[str, Any]]]:
        """Every stored subscription: ``(id, created_date, payload)``, oldest first."""
        t = self.t_subscriptions
        with self._tx() as conn:
            rows = conn.execute(sa.select(t.c.id, t.c.created_date, t.c.payload).order_by(t.c.created_date, t.c.id))
            return [(r.id, r.created_date, _loads(r.payload)) for r in rows]

    def delete_subscription(self, sub_id: str) -> bool:
        t = self.t_subscriptions
        with self._tx(write=True) as conn:
            return conn.execute(sa.delete(t).where(t.c.id == sub_id)).rowcount > 0

    def get_state(self, key: str, default: Any = None) -> Any:
        t = self.t_state
        with self._tx() as conn:
            raw = conn.execute(sa.select(t.c.value).where(t.c.key == key)).scalar()
        return default if raw is None else json.loads(raw)

    def put_state(self, key: str, value: Any) -> None:
        if key == _SEQ_KEY:
            raise ValueError(f"{key!r} is reserved")
        now = format_instant(now_millis())
        with self._tx(write=True) as conn:
            self._upsert(
                conn, self.t_state, {"key": key, "value": json.dumps(value), "updated": now}, ["key"]
            )


def _check_status(status: str) -> None:
    if status not in TASK_STATES:
        raise ValueError(f"task status must be one of {', '.join(TASK_STATES)}, not {status!r}")


def _configure_sqlite(engine: Engine, *, wal: bool) -> None:
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
