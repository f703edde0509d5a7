"""``scan``: raw rows, batched per segment.

Result: ``[{"segmentId","columns","events","rowSignature"}]`` with ``events`` as objects (``list``) or arrays
(``compactedList``), ``__time`` in epoch millis, ``batchSize`` rows per batch at most. ``order`` none
reads segment by segment; ``ascending``/``descending`` sort by ``__time`` across segments.
"""

from __future__ import annotations

from typing import Any

import orjson

from serving.broker.native.context import QueryContext, q, sql_str
from serving.broker.native.results import render
from serving.broker.views import chunk_select_sql
from serving.errors import invalid_input


def run_scan(ctx: QueryContext) -> list[dict[str, Any]]:
    query = ctx.query
    fmt = query.get("resultFormat") or "list"
    if fmt not in ("list", "compactedList"):
        raise invalid_input(f"Unsupported scan resultFormat [{fmt}]")
    order = str(query.get("order") or "none").lower()
    if order not in ("none", "ascending", "descending"):
        raise invalid_input(f"Unsupported scan order [{order}]")
    batch = int(query.get("batchSize") or 20480)
    if batch <= 0:
        raise invalid_input("batchSize must be positive")
    limit = query.get("limit")
    offset = int(query.get("offset") or 0)
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise invalid_input(f"scan limit must be a non-negative integer, got {limit!r}")
    if limit == 0 or not ctx.exists:
        return []
    if query.get("orderBy"):
        ob = query["orderBy"]
        if len(ob) == 1 and ob[0].get("columnName") == "__time":
            order = str(ob[0].get("order", "ascending")).lower()
        else:
            raise invalid_input("scan orderBy is only supported on __time")
    chunks = ctx.chunks()
    if not chunks:
        return []
    ctx.base()  # resolves virtual columns and column types
    columns = list(query.get("columns") or [])
    if not columns:
        seen: list[str] = []
        for ds in ctx.datasources:
            for c in ds.columns:
                if c.name not in seen:
                    seen.append(c.name)
        seen += [v for v in ctx.virtual_names if v not in seen]
        columns = seen
    select = ", ".join(f"{ctx.col(c)} AS {q(c)}" for c in columns)
    types = [ctx.col_type(c) for c in columns]
    signature = [{"name": c, "type": t} for c, t in zip(columns, types, strict=True)]  # Druid 33 sends it
    where = ctx.where()
    ds_by_chunk = {id(c): ds for ds in ctx.datasources for c in ds.chunks}

    def chunk_rel(c: Any) -> str:
        return ctx.relation(f"({chunk_select_sql(c, ds_by_chunk[id(c)].columns)})")

    out: list[dict[str, Any]] = []
    remaining = None if limit is None else limit

    def emit(seg_id: str, rows: list[tuple[Any, ...]]) -> None:
        for i in range(0, len(rows), batch):
            ctx.rq.check()  # the answer is built in Python: a timeout or the memory guard stops it here too
            part = rows[i: i + batch]
            if fmt == "list":
                events: list[Any] = [
                    {c: render(v, t) for c, t, v in zip(columns, types, r, strict=False)} for r in part
                ]
            else:
                events = [[render(v, t) for t, v in zip(types, r, strict=False)] for r in part]
            if ctx.encoded:  # JSON now: this batch's objects are freed before the next is built
                events = orjson.Fragment(orjson.dumps(events, option=orjson.OPT_SERIALIZE_NUMPY))
            out.append({"segmentId": seg_id, "columns": columns, "events": events, "rowSignature": signature})

    if order == "none":
        skip = offset
        for c in sorted(chunks, key=lambda c: (c.clip.start, c.loaded.segment.id.sort_key())):
            if remaining is not None and remaining <= 0:
                break
            sql = f"SELECT {select} FROM {chunk_rel(c)} WHERE {where}"
            if remaining is not None:
                sql += f" LIMIT {remaining + skip}"
            rows = ctx.run(sql)
            if skip:
                dropped = min(skip, len(rows))
                rows, skip = rows[dropped:], skip - dropped
            if remaining is not None:
                rows = rows[:remaining]
                remaining -= len(rows)
            if rows:
                emit(c.segment_id, rows)
        return out
    direction = "DESC" if order == "descending" else "ASC"
    parts = [f"SELECT {sql_str(c.segment_id)} AS __segment, {select}, \"__time\" AS __t FROM {chunk_rel(c)} "
             f"WHERE {where}" for c in chunks]
    sql = " UNION ALL ".join(parts) + f" ORDER BY __t {direction}"
    if limit is not None:
        sql += f" LIMIT {limit}"
    if offset:
        sql += f" OFFSET {offset}"
    rows = ctx.run(sql)
    cur: str | None = None
    group: list[tuple[Any, ...]] = []
    for r in rows:
        if r[0] != cur and group:
            emit(cur, group)  # type: ignore[arg-type]
            group = []
        cur = r[0]
        group.append(r[1:-1])
    if group:
        emit(cur, group)  # type: ignore[arg-type]
    return out
