"""``scan``: raw rows, batched per segment.

Result: ``[{"segmentId","columns","events","rowSignature"}]`` with ``events`` as objects (``list``) or arrays
(``compactedList``), ``__time`` in epoch millis, ``batchSize`` rows per batch at most. ``order`` none
reads segment by segment; ``ascending``/``descending`` sort by ``__time`` across segments.

:func:`iter_scan` yields the batches as DuckDB produces the rows (``batchSize`` at a time), so a large
answer is streamed (the HTTP route writes each batch as it comes, serving/broker/native/__init__.py) and
never held whole; :func:`run_scan` is the list of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from serving.broker.native.query_context import QueryContext, q, sql_str
from serving.broker.native.results import render
from serving.broker.store.views import chunk_select_sql
from serving.errors import invalid_input

#: rows read from DuckDB at a time at most …
PIECE_ROWS = 512
#: … and about this many bytes of rendered JSON (wide rows are read a few at a time: a piece of 512 rows of
#: 90 KB each held ~250 MB more at once while it was turned into Python values and JSON)
PIECE_BYTES = 2 << 20
#: a streamed batch closes once its events' JSON passes this (Druid's batches only promise ≤ batchSize rows)
BATCH_BYTES = 8 << 20


def run_scan(ctx: QueryContext) -> list[dict[str, Any]]:
    return list(iter_scan(ctx))


@dataclass(frozen=True)
class ScanShape:
    """What a scan asks for, checked: its format, order, batch size, limit and offset."""

    fmt: str
    order: str
    batch: int
    limit: int | None
    offset: int

    @classmethod
    def of(cls, query: dict[str, Any]) -> ScanShape:
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
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise invalid_input(f"scan limit must be a non-negative integer, got {limit!r}")
        if query.get("orderBy"):
            ob = query["orderBy"]
            if len(ob) == 1 and ob[0].get("columnName") == "__time":
                order = str(ob[0].get("order", "ascending")).lower()
            else:
                raise invalid_input("scan orderBy is only supported on __time")
        return cls(fmt, order, batch, limit, int(query.get("offset") or 0))


def iter_scan(ctx: QueryContext) -> Iterator[dict[str, Any]]:
    """The scan's batches, one per ``batchSize`` rows of a segment, as they are read."""
    shape = ScanShape.of(ctx.query)
    if shape.limit == 0 or not ctx.exists:
        return
    chunks = ctx.chunks()
    if not chunks:
        return
    ctx.base()  # resolves virtual columns and column types
    yield from _Scan(ctx, shape, chunks).batches()


class _Scan:
    """One scan over the visible chunks: SQL per chunk (or one ordered UNION), rendered in pieces."""

    def __init__(self, ctx: QueryContext, shape: ScanShape, chunks: list[Any]) -> None:
        self.ctx, self.shape, self.chunks = ctx, shape, chunks
        self.columns = list(ctx.query.get("columns") or []) or self._all_columns()
        self.select = ", ".join(f"{ctx.col(c)} AS {q(c)}" for c in self.columns)
        self.types = [ctx.col_type(c) for c in self.columns]
        self.signature = [{"name": c, "type": t} for c, t in zip(self.columns, self.types, strict=True)]  # as Druid 33
        self.where = ctx.where()
        self.ds_by_chunk = {id(c): ds for ds in ctx.datasources for c in ds.chunks}
        self.piece = PieceSize(min(shape.batch, PIECE_ROWS))

    def _all_columns(self) -> list[str]:
        seen: list[str] = []
        for ds in self.ctx.datasources:
            for c in ds.columns:
                if c.name not in seen:
                    seen.append(c.name)
        return seen + [v for v in self.ctx.virtual_names if v not in seen]

    def _relation(self, c: Any) -> str:
        return self.ctx.relation(f"({chunk_select_sql(c, self.ds_by_chunk[id(c)].columns)})")

    def _render(self, part: list[tuple[Any, ...]]) -> Any:
        self.ctx.rq.check()  # the answer is built in Python: a timeout or the memory guard stops it here too
        columns, types = self.columns, self.types
        if self.shape.fmt == "list":
            events: list[Any] = [{c: render(v, t) for c, t, v in zip(columns, types, r, strict=False)} for r in part]
        else:
            events = [[render(v, t) for t, v in zip(types, r, strict=False)] for r in part]
        if self.ctx.encoded:  # JSON now (without its brackets): these objects are freed before the next are built
            return orjson.dumps(events, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]
        return events

    def batches(self) -> Iterator[dict[str, Any]]:
        """Rows of one segment at a time into batches of at most ``batchSize`` rows and, encoded, about
        :data:`BATCH_BYTES` (a row of megabytes is not held ``batchSize`` times over)."""
        batch, encoded = self.shape.batch, self.ctx.encoded
        seg: str | None = None
        held: list[Any] = []
        rows = size = 0

        def flush() -> dict[str, Any]:
            events: Any = (orjson.Fragment(b"[" + b",".join(held) + b"]") if encoded
                           else [e for part in held for e in part])
            return {"segmentId": seg, "columns": self.columns, "events": events, "rowSignature": self.signature}

        for seg_id, part in self._unordered() if self.shape.order == "none" else self._ordered():
            while part:
                if held and (seg_id != seg or rows >= batch or size >= BATCH_BYTES):
                    yield flush()
                    held, rows, size = [], 0, 0
                seg = seg_id
                take, part = part[:batch - rows], part[batch - rows:]
                rendered = self._render(take)
                held.append(rendered)
                rows += len(take)
                if encoded:
                    size += len(rendered)
                    self.piece.saw(len(take), len(rendered))
        if held:
            yield flush()

    def _unordered(self) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
        remaining, skip = self.shape.limit, self.shape.offset
        for c in sorted(self.chunks, key=lambda c: (c.clip.start, c.loaded.segment.id.sort_key())):
            if remaining is not None and remaining <= 0:
                break
            sql = f"SELECT {self.select} FROM {self._relation(c)} WHERE {self.where}"
            if remaining is not None:
                sql += f" LIMIT {remaining + skip}"
            for rows in self.ctx.stream(sql, self.piece.rows):
                if skip:
                    dropped = min(skip, len(rows))
                    rows, skip = rows[dropped:], skip - dropped
                if remaining is not None:
                    rows = rows[:remaining]
                    remaining -= len(rows)
                if rows:
                    yield c.segment_id, rows

    def _ordered(self) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
        direction = "DESC" if self.shape.order == "descending" else "ASC"
        parts = [f"SELECT {sql_str(c.segment_id)} AS __segment, {self.select}, \"__time\" AS __t "
                 f"FROM {self._relation(c)} WHERE {self.where}" for c in self.chunks]
        sql = " UNION ALL ".join(parts) + f" ORDER BY __t {direction}"
        if self.shape.limit is not None:
            sql += f" LIMIT {self.shape.limit}"
        if self.shape.offset:
            sql += f" OFFSET {self.shape.offset}"
        for rows in self.ctx.stream(sql, self.piece.rows):
            run: list[tuple[Any, ...]] = []
            seg = ""
            for r in rows:
                if run and r[0] != seg:
                    yield seg, run
                    run = []
                seg = r[0]
                run.append(r[1:-1])
            if run:
                yield seg, run


#: the first fetch, before any row's width is known
FIRST_PIECE_ROWS = 32


class PieceSize:
    """How many rows the next fetch takes: about :data:`PIECE_BYTES` of JSON at the width of the rows last
    rendered, between 1 and ``most`` (the first fetch takes :data:`FIRST_PIECE_ROWS`)."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.now = min(most, FIRST_PIECE_ROWS)

    def saw(self, rows: int, nbytes: int) -> None:
        if rows and nbytes:
            self.now = max(1, min(self.most, PIECE_BYTES * rows // nbytes))

    def rows(self) -> int:
        return self.now
