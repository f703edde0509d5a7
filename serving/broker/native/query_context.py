"""What every native query shares: datasource, intervals, granularity, filter, virtual columns.

:class:`QueryContext` turns those common fields into SQL over the datasource view: a base relation
``(SELECT *, <virtual columns>, <NULLs for missing columns> FROM "ds" WHERE <intervals>) AS __base``
and a ``WHERE`` for the filter. Columns a query names but the datasource lacks read as all-null, as in
Druid. Filters and expressions come from :mod:`radstack.filters` / :mod:`radstack.expressions`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import duckdb

from radstack.druid_types import native_type_of_duckdb
from radstack.expressions import Compiled, compile_expression, json_scalar_text, scalar_of_mapped
from radstack.filters import filter_to_sql
from radstack.time.granularity import Granularity, GranularityError
from radstack.time.intervals import Interval, TimeParseError, condense
from radstack.value_sql import values_or_null_sql
from serving.broker.native.granularity_sql import (
    bucket_sql,
    bucket_timestamp_sql,
    fill_buckets,
    format_bucket,
)
from serving.broker.native.projection_choice import choose_projection
from serving.broker.native.virtual_columns import parse_virtual_columns
from serving.broker.queries.query_manager import RunningQuery
from serving.broker.queries.relations import check_statement
from serving.broker.store.projection_views import ProjectionView
from serving.broker.store.state import BrokerState, DatasourceState
from serving.broker.store.views import Chunk, quote_ident, select_sqls, single_infos, time_range_sql
from serving.errors import DruidError, invalid_input, unsupported

SQL_TYPES = {"STRING": "VARCHAR", "LONG": "BIGINT", "FLOAT": "FLOAT", "DOUBLE": "DOUBLE"}

# Keys whose string values name input columns (used to add NULL columns for missing ones).
_COLUMN_KEYS = {"dimension", "column", "fieldName", "fieldNames", "fields", "searchDimensions", "columns"}


def q(name: str) -> str:
    return quote_ident(name)


def sql_str(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def parse_intervals(raw: Any) -> list[Interval]:
    if raw is None:
        raise invalid_input("Missing required field [intervals]")
    if isinstance(raw, str):
        raw = [raw]
    elif isinstance(raw, dict):  # {"type":"intervals","intervals":[…]} / segments spec
        raw = raw.get("intervals") or [s.get("itvl") for s in raw.get("segments", [])]
    try:
        ivs = [Interval.parse(str(x)) for x in raw]
    except (TimeParseError, ValueError) as e:
        raise invalid_input(f"Cannot parse intervals: {e}") from e
    return condense(ivs)


def data_source_names(raw: Any) -> list[str]:
    """The table names a ``dataSource`` names (string, table, or union of tables)."""
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, dict):
        typ = raw.get("type")
        if typ == "table":
            return [str(raw.get("name"))]
        if typ == "union":
            out: list[str] = []
            for d in raw.get("dataSources") or []:
                out += data_source_names(d)
            return out
        if typ in ("query", "join", "lookup", "inline"):
            raise unsupported(f"dataSource type [{typ}] is not supported by native queries here; use SQL")
    raise invalid_input(f"Cannot read dataSource {raw!r}")


def parse_granularity(raw: Any, default: str = "all") -> Granularity:
    try:
        return Granularity.parse(raw if raw is not None else default)
    except GranularityError as e:
        raise invalid_input(f"Invalid granularity: {e}") from e


def referenced_columns(node: Any) -> set[str]:
    out: set[str] = set()

    def walk(n: Any, key: str | None = None) -> None:
        if isinstance(n, dict):
            for k, v in n.items():
                walk(v, k)
        elif isinstance(n, list):
            for v in n:
                walk(v, key)
        elif isinstance(n, str) and key in _COLUMN_KEYS:
            out.add(n)

    walk(node)
    return out


@dataclass
class QueryContext:
    query: dict[str, Any]
    state: BrokerState
    cursor: duckdb.DuckDBPyConnection
    rq: RunningQuery
    datasources: list[DatasourceState] = field(default_factory=list)
    intervals: list[Interval] = field(default_factory=list)
    granularity: Granularity = field(default_factory=lambda: Granularity.parse("all"))
    column_types: dict[str, str] = field(default_factory=dict)  # name → Druid type, incl. virtual
    virtual_names: set[str] = field(default_factory=set)
    #: virtual columns whose type :meth:`relation` read from the data (not stored columns)
    _typed_virtual: set[str] = field(default_factory=set)
    #: the stored columns, as the first :meth:`relation` found them (before any virtual column was typed)
    _stored: frozenset[str] | None = None
    #: the answer goes straight to JSON (the HTTP route): large parts may be encoded as they are built
    #: (``orjson.Fragment``), so their Python objects never all live at once
    encoded: bool = False
    projection: ProjectionView | None = None  # the aggregate projection this query reads, if any
    multi_value: frozenset[str] = frozenset()  # multi-value string dimensions (lists of strings)
    #: sketch columns whose merges read the integer column beside them (set before :meth:`base`, by
    #: :meth:`read_singles`): sketch column → that column, which the base rows then carry
    singles: dict[str, str] = field(default_factory=dict)
    _base: str | None = None
    _missing: list[str] | None = None

    @classmethod
    def create(
        cls, query: dict[str, Any], state: BrokerState, cursor: duckdb.DuckDBPyConnection, rq: RunningQuery,
        *, needs_intervals: bool = True, default_granularity: str = "all",
    ) -> QueryContext:
        names = data_source_names(query.get("dataSource"))
        dss = [state.datasources[n] for n in names if n in state.datasources]
        if needs_intervals or query.get("intervals") is not None:
            ivs = parse_intervals(query.get("intervals"))
        else:
            ivs = [Interval.eternity()]
        ctx = cls(query, state, cursor, rq, dss, ivs, parse_granularity(query.get("granularity"), default_granularity))
        for ds in dss:
            for c in ds.columns:
                ctx.column_types.setdefault(c.name, c.druid_type)
        ctx.multi_value = frozenset(c.name for ds in dss for c in ds.columns if c.multi_value)
        if "__time" in ctx.column_types:
            ctx.column_types["__time"] = "TIMESTAMP"  # filters/expressions read it as epoch millis
        if len(dss) == 1 and len(names) == 1 and dss[0].projections:
            ctx.projection = choose_projection(query, dss[0].projections, ctx.granularity, ivs)
        return ctx

    @property
    def context(self) -> dict[str, Any]:
        return self.query.get("context") or {}

    @property
    def exists(self) -> bool:
        return bool(self.datasources)

    # ---- chunks -------------------------------------------------------------------------------
    def chunks(self) -> list[Chunk]:
        """Visible chunks overlapping the query intervals."""
        out = []
        for ds in self.datasources:
            for c in ds.chunks:
                if any(c.clip.overlaps(iv) for iv in self.intervals):
                    out.append(c)
        return out

    def data_ranges(self) -> list[Interval]:
        """query ∩ clip ∩ [minTime, maxTime] per chunk: where Druid's cursors walk buckets."""
        out = []
        for c in self.chunks():
            di = c.data_interval()
            if di is None:
                continue
            for iv in self.intervals:
                x = di.intersect(iv)
                if x is not None:
                    out.append(x)
        return out

    def all_timestamp(self) -> int | None:
        """The single bucket's timestamp under ``all`` granularity (earliest cursor start)."""
        ranges = self.data_ranges()
        return min(r.start for r in ranges) if ranges else None

    def first_segment_start(self) -> int | None:
        """Where the earliest visible segment with data in range starts (within the query's
        intervals): the timestamp Druid's search gives its single ``all`` bucket (per segment, the
        segment's start — not its first row's, as a cursor-based query does)."""
        starts = []
        for c in self.chunks():
            di = c.data_interval()
            for iv in self.intervals:
                x = c.clip.intersect(iv)
                if di is not None and x is not None and di.intersect(iv) is not None:
                    starts.append(x.start)
        return min(starts) if starts else None

    def fill(self) -> list[int] | None:
        return fill_buckets(self.granularity, self.data_ranges())

    def fmt_time(self, ms: int) -> str:
        return format_bucket(ms, self.granularity)

    # ---- SQL ----------------------------------------------------------------------------------
    def run(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement built for this query, after checking that it reads only this query's
        datasources (:func:`serving.broker.queries.relations.check_statement`)."""
        check_statement(sql, self.relations)
        return self.rq.execute(self.cursor, sql, params)

    def stream(self, sql: str, rows: Callable[[], int]) -> Iterator[list[tuple[Any, ...]]]:
        """:meth:`run`, its rows ``rows`` at a time as they are produced (a streamed scan)."""
        check_statement(sql, self.relations)
        return self.rq.stream(self.cursor, sql, rows)

    @cached_property
    def relations(self) -> frozenset[str]:
        """What this query's statements may read (computed once per query): its datasources' views,
        their projection views and segment tables, and the lookups' tables (registered lookup extractions)."""
        names: set[str] = {t for lk in self.state.lookups.values() for t in lk.tables}
        for ds in self.datasources:
            names.add(ds.name)
            names.update(p.view_name for p in ds.projections)
            names.update(c.loaded.table for c in ds.chunks)
        return frozenset(names)

    def bucket(self) -> str | None:
        return bucket_sql(self.granularity, self.cursor)

    def bucket_timestamp(self) -> str | None:
        """The bucket as a TIMESTAMP where DuckDB truncates to it (faster to group by: aggregation.py)."""
        return bucket_timestamp_sql(self.granularity)

    def time_predicate(self, col: str = '"__time"') -> str:
        parts = [time_range_sql(iv.start, iv.end, col) for iv in self.intervals]
        if any(p == "TRUE" for p in parts):
            return "TRUE"
        return "(" + " OR ".join(f"({p})" for p in parts) + ")" if parts else "FALSE"

    def base(self) -> str:
        """``(…) AS __base``: the rows of the datasource(s) in the query intervals, with virtual and
        missing columns added."""
        if self._base is not None:
            return self._base
        self._base = self.relation(self.source_sql())
        return self._base

    def read_singles(self, sketch_columns: set[str]) -> None:
        """Before :meth:`base`: the merges of ``sketch_columns`` read their integer columns wherever every
        visible row has its value there (one datasource, no projection; rules/sketch_singles.py does the
        same for SQL)."""
        if self._base is not None or len(self.datasources) != 1 or self.projection is not None:
            return
        ds = self.datasources[0]
        whole, beside = ds.whole_singles, ds.singles
        self.singles = {c: beside[c] for c in sorted(sketch_columns) if c in whole and c in beside}

    def source_sql(self) -> str:
        """Only the chunks overlapping the query intervals (cheaper than the whole view), each clipped
        to its visible interval; the datasource's own column list, NULLs where a segment lacks one."""
        cols = list(self.column_types)
        parts = []
        for ds in self.datasources:
            have = {c.name for c in ds.columns}
            pad = [f"NULL AS {q(c)}" for c in cols if c not in have]
            chunks = [c for c in ds.chunks if any(c.clip.overlaps(iv) for iv in self.intervals)]
            columns = ds.columns + single_infos(self.singles) if self.singles else ds.columns
            for sql in select_sqls(chunks, columns, ds.members):
                if pad and len(self.datasources) > 1:
                    sql = f"SELECT *, {', '.join(pad)} FROM ({sql})"
                parts.append(sql)
        if not parts:
            ds = self.datasources[0]
            return f"(SELECT * FROM {ds.view} WHERE FALSE)"
        if self.projection is not None:  # same rows re-aggregated: the chunk list above only decides emptiness
            return f"(SELECT * FROM {self.projection.view})"
        joiner = " UNION ALL BY NAME " if len(self.datasources) > 1 else " UNION ALL "
        return "(" + joiner.join(parts) + ")"

    def relation(self, source: str) -> str:
        sql = f"SELECT * FROM {source} WHERE {self.time_predicate()}"
        if self._stored is None:
            self._stored = frozenset(self.column_types)
        real = self._stored  # a later call sees the virtual columns typed too: they are not stored
        vcs = parse_virtual_columns(self.query.get("virtualColumns") or [], self)
        for vc in vcs:
            expr = f"CAST({vc.sql} AS {SQL_TYPES[vc.output_type]})" if vc.output_type else vc.sql
            if vc.multi_value:
                self.multi_value = self.multi_value | {vc.name}
            if vc.name in real:
                sql = f"SELECT * REPLACE ({expr} AS {q(vc.name)}) FROM ({sql})"
            else:
                sql = f"SELECT *, {expr} AS {q(vc.name)} FROM ({sql})"
            self.virtual_names.add(vc.name)
        if any(vc.output_type is None for vc in vcs):
            described = {r[0]: r[1] for r in self.run(f"DESCRIBE SELECT * FROM ({sql})")}
            for vc in vcs:
                if vc.output_type is None and vc.name in described and vc.name not in real and not vc.multi_value:
                    self.column_types[vc.name] = native_type_of_duckdb(str(described[vc.name]))
                    self._typed_virtual.add(vc.name)
        if self._missing is None:
            self._missing = sorted(
                c for c in referenced_columns(self.query) if c not in self.column_types and c != "__time"
            )
            for c in self._missing:
                self.column_types[c] = "STRING"
        if self._missing:
            nulls = ", ".join(f"CAST(NULL AS VARCHAR) AS {q(c)}" for c in self._missing)
            sql = f"SELECT *, {nulls} FROM ({sql})"
        return f"({sql}) AS __base"

    def exploded(self, columns: list[str], where: str, keep: dict[str, str] | None = None,
                 distinct: bool = False) -> str:
        """The base rows that pass ``where``, once per value of each multi-value column in ``columns``
        (a row without values once, with NULL): how Druid groups by a multi-value dimension. ``keep``
        maps a column to a lambda that keeps some of its values (a filtered dimension spec);
        ``distinct``: a value repeated in a row once (its NULL values dropped), as ``search`` counts rows."""
        sql = f"SELECT * FROM {self.base()} WHERE {where}"
        for c in columns:
            listed = f"list_filter({q(c)}, {keep[c]})" if keep and c in keep else q(c)
            if distinct:
                listed = f"list_distinct({listed})"
            values = values_or_null_sql(listed)
            sql = f"SELECT * REPLACE (UNNEST({values}) AS {q(c)}) FROM ({sql})"
        return f"({sql}) AS __base"

    def where(self, extra_filter: Any = None) -> str:
        """The filter (plus an optional extra filter) as a SQL predicate; ``TRUE`` when none."""
        self.base()  # virtual/missing columns must be known first
        parts = []
        for f in (self.query.get("filter"), extra_filter):
            if f:
                parts.append(self.filter_sql(f))
        return " AND ".join(f"({p})" for p in parts) if parts else "TRUE"

    def filter_sql(self, f: Any, column_types: dict[str, str] | None = None) -> str:
        try:
            return filter_to_sql(f, dialect="duckdb", column_types=column_types or self.column_types,
                                 multi_value_columns=self.multi_value)
        except DruidError:
            raise
        except (ValueError, KeyError, TypeError) as e:
            raise invalid_input(f"Invalid filter: {e}") from e

    def expression(self, text: str, column_types: dict[str, str] | None = None) -> Compiled:
        """A native expression compiled against this query's columns (one reading a multi-value column
        as a scalar is applied to each value: ``mapped``); a JSON scalar it yields (``json_value``
        without a type) as the value Druid gives for it (``"x"`` → ``x``, ``true`` → ``1``).
        ``column_types`` given (post-aggregators): the names are not the datasource's columns."""
        try:
            compiled = compile_expression(text, dialect="duckdb", column_types=column_types or self.column_types,
                                          multi_value_columns=frozenset() if column_types else self.multi_value)
        except DruidError:
            raise
        except (ValueError, KeyError, TypeError) as e:
            raise invalid_input(f"Invalid expression [{text}]: {e}") from e
        if compiled.type == "JSON" and not compiled.mapped:
            return Compiled(json_scalar_text(compiled.sql), "STRING")
        return compiled

    def expression_sql(self, text: str, column_types: dict[str, str] | None = None) -> str:
        """:meth:`expression` as one value's SQL (a mapped result with several values is NULL)."""
        return scalar_of_mapped(self.expression(text, column_types))

    # ---- column access --------------------------------------------------------------------------
    def col(self, name: str) -> str:
        """SQL reading column ``name`` of the base relation (``__time`` as epoch millis)."""
        if name == "__time":
            return 'epoch_ms("__time")'
        if name not in self.column_types:
            return "CAST(NULL AS VARCHAR)"
        return q(name)

    def col_type(self, name: str) -> str:
        if name == "__time":
            return "LONG"
        return self.column_types.get(name, "STRING")
