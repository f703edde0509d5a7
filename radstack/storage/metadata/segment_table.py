"""``druid_segments``: publish atomically, mark used/unused, delete, list, and the change token."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from radstack.datasources import case_twin_message
from radstack.storage.metadata.connection import MetadataConnection
from radstack.storage.metadata.tables import (
    SEQ_KEY,
    CorrectionRow,
    DatasourceNameConflict,
    SegmentExistsError,
    SegmentRow,
    chunks,
    json_bytes,
    json_loads,
)
from radstack.storage.segments import DataSegment
from radstack.time.clock import now_millis
from radstack.time.intervals import Interval, format_instant, parse_instant


class SegmentTable(MetadataConnection):
    def _bump_seq(self, conn: Connection, now: str) -> None:
        st = self.t_state
        res = conn.execute(
            sa.update(st)
            .where(st.c.key == SEQ_KEY)
            .values(value=sa.cast(sa.cast(st.c.value, sa.BigInteger) + 1, sa.Text), updated=now)
        )
        if res.rowcount == 0:
            self._upsert(conn, st, {"key": SEQ_KEY, "value": "1", "updated": now}, ["key"])

    def publish(
        self,
        segments: Sequence[DataSegment],
        *,
        mark_unused_ids: Iterable[str] = (),
        state: Mapping[str, Any] | None = None,
        corrections: Sequence[CorrectionRow] = (),
    ) -> None:
        """Insert ``segments`` as used and mark ``mark_unused_ids`` unused, in ONE transaction. An id
        that already exists (or twice in the batch) raises :class:`SegmentExistsError` and nothing of
        this publish becomes visible. ``state`` (key → JSON value) is written to ``radstack_state`` in
        the same transaction (e.g. the streaming job's "batch N is done" record), and so are
        ``corrections`` (what this publish changed against real time)."""
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
                for chunk in chunks(list(dict.fromkeys(ids))):
                    existing += conn.execute(sa.select(t.c.id).where(t.c.id.in_(chunk))).scalars().all()
                if existing:
                    raise SegmentExistsError(sorted(existing))
                self._refuse_case_twins(conn, {s.data_source for s in segments})
                if rows:
                    # A duplicate inside the batch fails here, mid-transaction: the rollback takes
                    # back every row of this publish.
                    conn.execute(sa.insert(t), rows)
                for chunk in chunks(drop):
                    conn.execute(
                        sa.update(t)
                        .where(t.c.id.in_(chunk), t.c.used == sa.true())
                        .values(used=False, used_status_last_updated=now)
                    )
                for key, value in (state or {}).items():
                    if key == SEQ_KEY:
                        raise ValueError(f"{key!r} is reserved")
                    self._upsert(
                        conn, self.t_state, {"key": key, "value": json.dumps(value), "updated": now}, ["key"]
                    )
                if corrections:
                    conn.execute(sa.insert(self.t_corrections), [
                        {"dataSource": c.datasource, "start": format_instant(c.start), "end": format_instant(c.end),
                         "version": c.version, "created_date": now, "payload": json_bytes(c.payload())}
                        for c in corrections])  # fmt: skip
                if rows or drop:
                    self._bump_seq(conn, now)
        except IntegrityError as e:
            raise SegmentExistsError(dupes or ids, f"publish failed, nothing was published: {e.orig}") from e

    def _refuse_case_twins(self, conn: Connection, names: set[str]) -> None:
        """In the publish's transaction: no datasource may differ from an existing one only in case."""
        if not names:
            return
        t = self.t_segments
        folded = {n.casefold() for n in names}
        for chunk in chunks(sorted(folded)):
            for existing in conn.execute(sa.select(t.c.dataSource).distinct().where(
                    sa.func.lower(t.c.dataSource).in_(chunk))).scalars():
                for name in names:
                    if name != existing and name.casefold() == existing.casefold():
                        raise DatasourceNameConflict(case_twin_message(name, existing))

    def _row(self, r: sa.Row[Any]) -> SegmentRow:
        last = r.used_status_last_updated
        return SegmentRow(
            segment=DataSegment.from_json(json_loads(r.payload)),
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
            for chunk in chunks(ids):
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
            for chunk in chunks(ids):
                n += conn.execute(sa.delete(t).where(t.c.id.in_(chunk))).rowcount
            if n:
                self._bump_seq(conn, format_instant(now_millis()))
        return n

    def delete_unused_segments(self, ids: Iterable[str]) -> list[str]:
        """Delete rows that are still unused (serving.coordinator.duties.kill): the ``used = false`` check is part of the
        DELETE itself (``RETURNING id``), so a segment marked used meanwhile is never deleted. Returns
        the ids actually deleted."""
        ids = list(dict.fromkeys(str(i) for i in ids))
        if not ids:
            return []
        t = self.t_segments
        deleted: list[str] = []
        with self._tx(write=True) as conn:
            for chunk in chunks(ids):
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
            seq = conn.execute(sa.select(st.c.value).where(st.c.key == SEQ_KEY)).scalar()
            count, created, updated = conn.execute(
                sa.select(
                    sa.func.count(), sa.func.max(t.c.created_date), sa.func.max(t.c.used_status_last_updated)
                ).where(t.c.used == sa.true())
            ).one()
        return (int(seq or 0), int(count or 0), created, updated)
