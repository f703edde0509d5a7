"""``radstack_corrections``: what each batch publish changed against real time, per time chunk
(written by :meth:`SegmentTable.publish` in the publish's own transaction; read here)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from radstack.storage.metadata.connection import MetadataConnection
from radstack.storage.metadata.tables import CorrectionRow, json_bytes, json_loads
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant, parse_instant


class CorrectionTable(MetadataConnection):
    def corrections(self, datasource: str | None = None, *, after_id: int = 0,
                    limit: int | None = None) -> list[CorrectionRow]:  # fmt: skip
        """The recorded corrections, oldest publish first (``after_id``: only those recorded later)."""
        t = self.t_corrections
        q = sa.select(t).where(t.c.id > after_id).order_by(t.c.id)
        if datasource is not None:
            q = q.where(t.c.dataSource == datasource)
        if limit is not None:
            q = q.limit(limit)
        with self._tx() as conn:
            rows = conn.execute(q).all()
        out = []
        for r in rows:
            p = json_loads(r.payload)
            out.append(CorrectionRow(
                datasource=r.dataSource, start=parse_instant(r.start), end=parse_instant(r.end), version=r.version,
                realtime_version=str(p["realtime_version"]), realtime_events=int(p["realtime_events"]),
                batch_events=int(p["batch_events"]), realtime_metrics=dict(p.get("realtime_metrics") or {}),
                batch_metrics=dict(p.get("batch_metrics") or {}), raw_events=p.get("raw_events"),
                duplicates_removed=p.get("duplicates_removed"), invalid_dropped=p.get("invalid_dropped"),
                created=parse_instant(r.created_date), id=int(r.id), served_by=str(p.get("served_by") or "radstack"),
            ))  # fmt: skip
        return out

    def record_corrections(self, rows: Sequence[CorrectionRow]) -> None:
        """Add corrections measured outside a radstack publish (a Druid cluster's re-index of a batch version)."""
        if not rows:
            return
        now = format_instant(now_millis())
        with self._tx() as conn:
            conn.execute(sa.insert(self.t_corrections), [
                {"dataSource": c.datasource, "start": format_instant(c.start), "end": format_instant(c.end),
                 "version": c.version, "created_date": now, "payload": json_bytes(c.payload())}
                for c in rows])  # fmt: skip
