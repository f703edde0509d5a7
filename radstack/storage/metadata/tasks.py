"""``druid_tasks``: task rows and their status."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from radstack.storage.metadata.connection import MetadataConnection
from radstack.storage.metadata.tables import (
    TaskExistsError,
    TaskRow,
    check_status,
    json_bytes,
    json_loads,
)
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant, parse_instant


class TaskTable(MetadataConnection):
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
        check_status(status)
        now = now_millis()
        row = TaskRow(
            task_id, type, datasource, now, dict(payload), status, status == "RUNNING", group_id=group_id
        )
        try:
            with self._tx(write=True) as conn:
                conn.execute(
                    sa.insert(self.t_tasks).values(
                        id=task_id,
                        created_date=format_instant(now),
                        datasource=datasource,
                        payload=json_bytes(payload),
                        status_payload=json_bytes(row.status_json()),
                        active=row.active,
                        type=type,
                        group_id=group_id or task_id,
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
        check_status(status)
        status_payload = {
            "id": task_id,
            "status": status,
            "duration": -1 if duration_ms is None else duration_ms,
            "errorMsg": error_msg,
            "location": {"host": None, "port": -1, "tlsPort": -1},
        }
        values: dict[str, Any] = {"status_payload": json_bytes(status_payload), "active": status == "RUNNING"}
        if report is not None:
            values["report_payload"] = json_bytes(report)
        t = self.t_tasks
        with self._tx(write=True) as conn:
            if conn.execute(sa.update(t).where(t.c.id == task_id).values(**values)).rowcount == 0:
                raise KeyError(task_id)
        row = self.get_task(task_id)
        assert row is not None
        return row

    def _task(self, r: sa.Row[Any]) -> TaskRow:
        st = json_loads(r.status_payload) or {}
        dur = st.get("duration")
        return TaskRow(
            id=r.id,
            type=r.type or "",
            datasource=r.datasource,
            created_date=parse_instant(r.created_date),
            payload=json_loads(r.payload) or {},
            status=st.get("status") or st.get("statusCode") or "RUNNING",
            active=bool(r.active),
            duration_ms=None if dur is None or dur < 0 else int(dur),
            error_msg=st.get("errorMsg"),
            report=json_loads(r.report_payload),
            group_id=r.group_id,
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
                check_status(want)
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
