"""``druid_rules``: the retention rules of each datasource, with their history."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import sqlalchemy as sa

from radstack.storage.metadata.connection import MetadataConnection
from radstack.storage.metadata.tables import (
    json_bytes,
    json_loads,
)
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant, parse_instant


class RuleTable(MetadataConnection):
    def get_rules(self, data_source: str) -> list[dict[str, Any]] | None:
        """The latest rule list of ``data_source`` (``_default`` for the cluster default), or None."""
        t = self.t_rules
        with self._tx() as conn:
            raw = conn.execute(
                sa.select(t.c.payload)
                .where(t.c.dataSource == data_source)
                .order_by(t.c.version.desc())
                .limit(1)
            ).scalar()
        return None if raw is None else list(json_loads(raw))

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
                    id=f"{data_source}_{version}",
                    dataSource=data_source,
                    version=version,
                    payload=json_bytes(list(rules)),
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
            return {ds: list(json_loads(p)) for ds, p in conn.execute(q).all()}

    def rules_history(self, data_source: str) -> list[tuple[str, list[dict[str, Any]]]]:
        """(version, rules) newest first."""
        t = self.t_rules
        with self._tx() as conn:
            rows = conn.execute(
                sa.select(t.c.version, t.c.payload)
                .where(t.c.dataSource == data_source)
                .order_by(t.c.version.desc())
            ).all()
        return [(v, list(json_loads(p))) for v, p in rows]
