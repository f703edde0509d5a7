"""The SQL a datasource is served through: visible chunks of loaded segments, the datasource's
column list, and the view over the chunks (each clipped to its visible interval): one scan of the
datasource table for the segments that share it, ``UNION ALL`` the segments that have a table of their own."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from radstack.druid_types import native_type_of_duckdb
from radstack.sql_text import quote_identifier as quote_ident
from radstack.time.intervals import ETERNITY_END, ETERNITY_START, Interval, format_instant
from serving.broker.store.segment_cache import SEGMENT_COLUMN, LoadedSegment, single_column


def ts_literal(ms: int) -> str:
    """A DuckDB TIMESTAMP literal for epoch millis (constant, so zone maps can prune)."""
    iso = format_instant(ms)
    return f"TIMESTAMP '{iso[:-1].replace('T', ' ')}'"


def time_range_sql(start: int, end: int, col: str = '"__time"') -> str:
    """``start <= col < end`` with eternity bounds left out; ``TRUE`` when unbounded."""
    parts = []
    if start > ETERNITY_START:
        parts.append(f"{col} >= {ts_literal(start)}")
    if end < ETERNITY_END:
        parts.append(f"{col} < {ts_literal(end)}")
    return " AND ".join(parts) if parts else "TRUE"


@dataclass(frozen=True)
class Chunk:
    """A visible piece of one loaded segment."""

    loaded: LoadedSegment
    clip: Interval

    @property
    def segment_id(self) -> str:
        return self.loaded.identifier

    @property
    def table(self) -> str:
        return self.loaded.table

    @property
    def needs_clip(self) -> bool:
        lo, hi = self.loaded.min_time, self.loaded.max_time
        if lo is None or hi is None:
            return False
        return lo < self.clip.start or hi >= self.clip.end

    def data_interval(self) -> Interval | None:
        """The clipped span that can hold rows: clip ∩ [minTime, maxTime]."""
        lo, hi = self.loaded.min_time, self.loaded.max_time
        if lo is None or hi is None:
            return None
        return self.clip.intersect(Interval(lo, hi + 1))


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    sql_type: str  # DuckDB type of the view column
    druid_type: str  # STRING | LONG | FLOAT | DOUBLE | COMPLEX<json>
    kind: str  # time | dimension | metric

    @property
    def multi_value(self) -> bool:
        """A multi-value string dimension: a list of strings in the view (``VARCHAR[]``) that is not an
        ARRAY<STRING> column."""
        return self.sql_type == MULTI_VALUE_TYPE and self.druid_type == "STRING"


_TYPE_RANK = {"BIGINT": 1, "FLOAT": 2, "DOUBLE": 3, "VARCHAR": 4}
MULTI_VALUE_TYPE = "VARCHAR[]"


def _merge_type(a: str | None, b: str) -> str:
    if a is None or a == b:
        return b
    lists = [t for t in (a, b) if t.endswith("[]")]
    if lists:  # single values of older segments read as one-value lists; numbers widen to DOUBLE
        if len(lists) == 2 and {a, b} == {"BIGINT[]", "DOUBLE[]"}:
            return "DOUBLE[]"
        return lists[0] if len(lists) == 1 else MULTI_VALUE_TYPE
    if a == "TIMESTAMP" or b == "TIMESTAMP":
        return "TIMESTAMP"
    ra, rb = _TYPE_RANK.get(a, 4), _TYPE_RANK.get(b, 4)
    if ra == 4 or rb == 4:
        return "VARCHAR"
    return a if ra >= rb else b


def union_columns(chunks: list[Chunk]) -> tuple[ColumnInfo, ...]:
    """The datasource schema: ``__time``, dimensions (newest segment's order first), metrics."""
    types: dict[str, str] = {}
    metrics: set[str] = set()
    dims_order: list[str] = []
    newest_first = sorted(chunks, key=lambda c: (c.loaded.segment.version, c.clip.start), reverse=True)
    for c in newest_first:
        seg = c.loaded.segment
        metrics.update(seg.metrics)
        for d in seg.dimensions:
            if d not in dims_order:
                dims_order.append(d)
        for name, t in c.loaded.columns:
            types[name] = _merge_type(types.get(name), norm_type(t))
    order = ["__time"] if "__time" in types else []
    order += [d for d in dims_order if d in types and d not in metrics]
    # columns not declared in the descriptor: file order, dimensions before metrics
    for c in newest_first:
        for name, _ in c.loaded.columns:
            if name not in order and name not in metrics:
                order.append(name)
    for c in newest_first:
        for name, _ in c.loaded.columns:
            if name not in order:
                order.append(name)
    marked = {name: typ for c in reversed(newest_first) for name, typ in c.loaded.marked_types().items()}
    out = []
    for name in order:
        kind = "time" if name == "__time" else ("metric" if name in metrics else "dimension")
        # a sketch (BLOB) or ARRAY<STRING> (VARCHAR[]) column is known by its mark, not its DuckDB type
        typ = marked.get(name) if types[name] in ("BLOB", MULTI_VALUE_TYPE) else None
        out.append(ColumnInfo(name, types[name], typ or native_type_of_duckdb(types[name]), kind))
    return tuple(out)


def norm_type(t: str) -> str:
    t = t.upper()
    if t in ("INTEGER", "SMALLINT", "TINYINT", "UINTEGER", "USMALLINT", "UTINYINT", "BOOLEAN", "HUGEINT"):
        return "BIGINT"
    if t.startswith("TIMESTAMP"):
        return "TIMESTAMP"
    if t.startswith("DECIMAL"):
        return "DOUBLE"
    if t in ("BIGINT", "FLOAT", "DOUBLE", "VARCHAR", "JSON", MULTI_VALUE_TYPE, "BIGINT[]", "DOUBLE[]", "BLOB"):
        return t
    return "VARCHAR"


def _select_items(have: dict[str, str], columns: tuple[ColumnInfo, ...]) -> str:
    """The datasource's column list over rows that have the columns ``have`` (NULLs for the others)."""
    items = []
    for c in columns:
        q = quote_ident(c.name)
        if c.name not in have:
            items.append(f"CAST(NULL AS {c.sql_type}) AS {q}")
        elif norm_type(have[c.name]) != c.sql_type:
            if c.sql_type.endswith("[]") and not norm_type(have[c.name]).endswith("[]"):
                items.append(f"CASE WHEN {q} IS NULL THEN NULL ELSE [CAST({q} AS {c.sql_type[:-2]})] END AS {q}")
            else:
                items.append(f"CAST({q} AS {c.sql_type}) AS {q}")
        else:
            items.append(q)
    return ", ".join(items)


def _stored(loaded: LoadedSegment) -> dict[str, str]:
    """The columns a loaded segment's rows have: its file's, and the integer columns beside its sketches."""
    return {**dict(loaded.columns), **{single_column(n): "BIGINT" for n in loaded.singles}}


def single_infos(sketch_columns: Iterable[str]) -> tuple[ColumnInfo, ...]:
    """The integer columns beside ``sketch_columns``, as extra columns of a select list."""
    return tuple(ColumnInfo(single_column(n), "BIGINT", "LONG", "metric") for n in sorted(sketch_columns))


def single_columns(chunks: Sequence[Chunk], columns: tuple[ColumnInfo, ...]) -> tuple[ColumnInfo, ...]:
    """The integer columns beside the datasource's sketch columns that some chunk's rows have (the sketch
    view's extra columns: :func:`singles_view_sql`)."""
    sketches = {c.name for c in columns if c.sql_type == "BLOB"}
    return single_infos({n for c in chunks for n in c.loaded.singles if n in sketches})


def chunk_select_sql(chunk: Chunk, columns: tuple[ColumnInfo, ...], extra: str = "") -> str:
    """``SELECT`` of one chunk with the datasource's column list (NULLs for columns it lacks)."""
    conds = [w for w in (chunk.loaded.rows_filter,) if w]
    if chunk.needs_clip:
        conds.append(time_range_sql(chunk.clip.start, chunk.clip.end))
    sql = f"SELECT {extra}{_select_items(_stored(chunk.loaded), columns)} FROM {chunk.table}"
    return sql + (f" WHERE {' AND '.join(conds)}" if conds else "")


def select_sqls(chunks: Sequence[Chunk], columns: tuple[ColumnInfo, ...],
                members: Mapping[str, Sequence[int]]) -> list[str]:
    """One ``SELECT`` per table the chunks read: the chunks that share a datasource table are read by one
    scan of it, their segments picked by ranges of segment numbers (``members``: the numbers the table
    held when the state was built; a segment loaded since has a higher one), so DuckDB scans one table
    in parallel and prunes it by its zone maps instead of binding a ``UNION ALL`` of every segment."""
    out: list[str] = []
    shared: dict[str, list[Chunk]] = {}
    held = {t: set(ns) for t, ns in members.items()}
    for c in chunks:
        if c.loaded.number not in held.get(c.table, ()):
            out.append(chunk_select_sql(c, columns))
        else:
            shared.setdefault(c.table, []).append(c)
    for table, group in shared.items():
        have: dict[str, str] = {}
        for c in group:
            have.update(_stored(c.loaded))
        whole = {c.loaded.number for c in group if not c.needs_clip}
        conds = [_between(a, b) for a, b in _runs(members[table], whole)]
        conds += [f"({c.loaded.rows_filter} AND {time_range_sql(c.clip.start, c.clip.end)})"
                  for c in group if c.needs_clip]
        out.append(f"SELECT {_select_items(have, columns)} FROM {table} WHERE {' OR '.join(conds)}")
    return out


def _runs(members: Sequence[int], wanted: set[int | None]) -> list[tuple[int, int]]:
    """The ranges of consecutive ``members`` that are all ``wanted``: (first, last) each."""
    runs: list[tuple[int, int]] = []
    start = prev = None
    for n in members:
        if n in wanted:
            start, prev = (n if start is None else start), n
        elif start is not None:
            runs.append((start, prev))  # type: ignore[arg-type]
            start = None
    if start is not None:
        runs.append((start, prev))  # type: ignore[arg-type]
    return runs


def _between(a: int, b: int) -> str:
    col = quote_ident(SEGMENT_COLUMN)
    return f"{col} = {a}" if a == b else f"{col} BETWEEN {a} AND {b}"


def view_sql(chunks: tuple[Chunk, ...], columns: tuple[ColumnInfo, ...],
             members: Mapping[str, Sequence[int]]) -> str:
    return " UNION ALL ".join(select_sqls(chunks, columns, members))


def singles_view_sql(chunks: tuple[Chunk, ...], columns: tuple[ColumnInfo, ...],
                     members: Mapping[str, Sequence[int]]) -> str | None:
    """The datasource's sketch view: its rows with the datasource's columns and then the integer columns
    beside its sketch columns (None when no chunk has one). Only SQL merges of those sketches read it
    (rules/sketch_singles.py); the datasource's own view, and every ``*``, never shows them."""
    extra = single_columns(chunks, columns)
    return view_sql(chunks, columns + extra, members) if extra else None
