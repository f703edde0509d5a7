"""``druid_config``, ``radstack_state`` and the stored subscriptions: small keyed values."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from radstack.storage.metadata.connection import MetadataConnection
from radstack.storage.metadata.tables import (
    SEQ_KEY,
    json_bytes,
    json_loads,
)
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant


class KeyValueTables(MetadataConnection):
    def get_config(self, name: str, default: Any = None) -> Any:
        t = self.t_config
        with self._tx() as conn:
            raw = conn.execute(sa.select(t.c.payload).where(t.c.name == name)).scalar()
        return default if raw is None else json_loads(raw)

    def set_config(self, name: str, value: Any) -> None:
        with self._tx(write=True) as conn:
            self._upsert(conn, self.t_config, {"name": name, "payload": json_bytes(value)}, ["name"])

    def insert_subscription(self, sub_id: str, payload: dict[str, Any]) -> str:
        """Store a new subscription; returns its created date."""
        created = format_instant(now_millis())
        with self._tx(write=True) as conn:
            conn.execute(
                sa.insert(self.t_subscriptions).values(
                    id=sub_id, created_date=created, payload=json_bytes(payload)
                )
            )
        return created

    def subscriptions(self) -> list[tuple[str, str, dict[str, Any]]]:
        """Every stored subscription: ``(id, created_date, payload)``, oldest first."""
        t = self.t_subscriptions
        with self._tx() as conn:
            rows = conn.execute(
                sa.select(t.c.id, t.c.created_date, t.c.payload).order_by(t.c.created_date, t.c.id)
            )
            return [(r.id, r.created_date, json_loads(r.payload)) for r in rows]

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
        if key == SEQ_KEY:
            raise ValueError(f"{key!r} is reserved")
        now = format_instant(now_millis())
        with self._tx(write=True) as conn:
            self._upsert(
                conn, self.t_state, {"key": key, "value": json.dumps(value), "updated": now}, ["key"]
            )
