"""THE INDEXER: one Arrow partition of input rows → rolled-up, sorted segment files in deep storage.

Every ingestion path calls :func:`index_partition` (native batch tasks, the Spark batch job per
partition, the streaming job per micro-batch). It holds no global state. Steps, as Druid does them:

1. parse the timestamp (``timestampSpec``); rows whose timestamp cannot be read are *unparseable*
   (counted, a few kept as samples with the reason);
2. apply ``transformSpec.transforms`` — each reads the parsed row, may overwrite an input column, and a
   transform named ``__time`` replaces the timestamp;
3. apply ``transformSpec.filter`` to the transformed row — rejected rows are *thrown away* (Druid's
   ``thrownAway``; radstack also reports them apart as ``filtered``);
4. drop rows outside ``granularitySpec.intervals`` (widened to whole segment-granularity buckets,
   as Druid's bucket lookup does) — *thrown away*;
5. truncate ``__time`` to ``queryGranularity``; roll up (group by ``__time`` + all dimensions, metrics
   combined by their aggregators, ``count`` counting input rows) when ``rollup`` is true;
6. sort by ``__time`` then dimensions, split by ``segmentGranularity`` and ``max_rows_per_segment``,
   write each piece as a segment file under ``segments/{segment_path(id)}/data.parquet``.

The returned segments are **not** published; :func:`radstack.storage.publish.publish` does that.
DuckDB over Arrow does the heavy lifting; bucketing uses numpy.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from radstack.duckdb_sandbox import sandboxed_connection
from radstack.expressions import Compiled, compile_expression, expression_to_sql
from radstack.filters import filter_to_sql
from radstack.projections import ProjectionSpec
from radstack.sketches import aggregate
from radstack.spec import TIME_COLUMN, DataSchema, DimensionSchema, MetricSpec
from radstack.sql_text import quote_identifier as _q
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.ingest_stats import DEFAULT_MAX_SAMPLES, IngestStats
from radstack.storage.projection_files import write_projection_files
from radstack.storage.segment_format import (
    projection_data_key,
    segment_data_key,
    segment_schema,
    write_segment_file,
)
from radstack.storage.segments import DataSegment, ShardSpec
from radstack.storage.type_discovery import discover_dimension_types
from radstack.time.floor import floor_millis
from radstack.time.granularity import Granularity
from radstack.time.intervals import Interval, condense
from radstack.time.timestamps import parse_timestamp_column, query_arrow
from radstack.value_sql import array_sql, json_text_sql, multi_value_sql, numeric_cast_sql, sql_type

__all__ = [
    "IngestStats",
    "IndexResult",
    "SegmentTable",
    "DEFAULT_MAX_ROWS_PER_SEGMENT",
    "DEFAULT_MAX_SAMPLES",
    "build_segment_tables",
    "index_partition",
    "renumber_core",
    "runs",
    "store_segment",
]

DEFAULT_MAX_ROWS_PER_SEGMENT = 5_000_000


class _DeepStorage(Protocol):  # the part of radstack.storage.deep_storage.DeepStorage the indexer uses
    def put_file(self, local_path: Path | str, key: str) -> dict[str, Any]: ...


# ---- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentTable:
    """One segment's rows before they are written."""

    interval: Interval
    index: int  # 0-based position within its interval
    count: int  # how many pieces its interval was split into
    table: pa.Table


@dataclass
class IndexResult:
    segments: list[DataSegment]
    stats: IngestStats
    dimensions: tuple[str, ...] = ()

    @property
    def num_rows(self) -> int:
        return sum(s.num_rows for s in self.segments)


# ---- helpers ----------------------------------------------------------------------------------


def _as_table(batches: Iterable[pa.RecordBatch] | pa.Table | pa.RecordBatch) -> pa.Table:
    if isinstance(batches, pa.Table):
        return batches
    if isinstance(batches, pa.RecordBatch):
        return pa.Table.from_batches([batches])
    bl = [b for b in batches if b.num_rows]
    if not bl:
        return pa.table({})
    schemas = {b.schema for b in bl}
    if len(schemas) == 1:
        return pa.Table.from_batches(bl)
    return pa.concat_tables([pa.Table.from_batches([b]) for b in bl], promote_options="permissive")


def _druid_type(t: pa.DataType) -> str:
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_timestamp(t) or pa.types.is_date(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
        return "string"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "array"
    return "complex"


def _column_types(schema: pa.Schema) -> dict[str, str]:
    return {f.name: _druid_type(f.type) for f in schema}


def _in_intervals(ts: np.ndarray, allowed: Sequence[Interval]) -> np.ndarray:
    starts = np.asarray([iv.start for iv in allowed], dtype=np.int64)
    ends = np.asarray([iv.end for iv in allowed], dtype=np.int64)
    idx = np.searchsorted(starts, ts, side="right") - 1
    ok = idx >= 0
    safe = np.where(ok, idx, 0)
    return ok & (ts < ends[safe])


def allowed_intervals(schema: DataSchema) -> list[Interval]:
    """``granularitySpec.intervals`` widened to whole segment buckets (Druid's bucket intervals)."""
    seg = schema.segment_granularity
    return condense([b for iv in schema.intervals for b in seg.iterate(iv)])


def _rows(table: pa.Table, mask: pa.Array | np.ndarray, limit: int) -> list[dict[str, Any]]:
    if limit <= 0:
        return []
    idx = np.flatnonzero(np.asarray(mask))[:limit]
    if idx.size == 0:
        return []
    return table.take(pa.array(idx)).to_pylist()


def _jsonable(row: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if k.startswith("__row"):
            continue
        out[k] = v if v is None or isinstance(v, str | int | float | bool) else str(v)
    return out


def _translate_expression(expr: str, column_types: Mapping[str, str]) -> str:

    return expression_to_sql(expr, dialect="duckdb", column_types=dict(column_types))


def _compile_expression(expr: str, column_types: Mapping[str, str]) -> Compiled:
    return compile_expression(expr, dialect="duckdb", column_types=dict(column_types))


def _translate_filter(flt: Mapping[str, Any], column_types: Mapping[str, str]) -> str:

    return filter_to_sql(dict(flt), dialect="duckdb", column_types=dict(column_types))


# ---- the pipeline -------------------------------------------------------------------------------


def _connect() -> duckdb.DuckDBPyConnection:
    """A locked connection (transforms and filters come from a spec): rows arrive as Arrow."""
    return sandboxed_connection(time_zone="UTC")


def _time_to_millis(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A ``__time`` produced by a transform (millis, timestamp, number or string) → int64 millis."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_integer(arr.type):
        return arr.cast(pa.int64())
    return parse_timestamp_column(arr, "auto")


def build_segment_tables(
    data: Iterable[pa.RecordBatch] | pa.Table,
    schema: DataSchema,
    *,
    max_rows_per_segment: int = DEFAULT_MAX_ROWS_PER_SEGMENT,
    input_bytes: int | None = None,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    arrays_in_text: bool = False,
) -> tuple[list[SegmentTable], tuple[DimensionSchema, ...], IngestStats]:
    """Run the indexing pipeline in memory: returns the segment pieces (in segment layout, sorted),
    the dimensions used, and the row stats. :func:`index_partition` writes what this returns.
    ``arrays_in_text``: the rows' text holds their nested values (a JSON input's arrays, as the JSON
    reader hands them over), so a plain string dimension given one is multi-value, as in Druid."""
    if max_rows_per_segment < 1:
        raise ValueError("max_rows_per_segment must be at least 1")
    table = _as_table(data)
    stats = IngestStats(max_samples=max_samples)
    stats.processed_bytes = table.nbytes if input_bytes is None else int(input_bytes)
    n = table.num_rows
    if n == 0:
        return [], schema.resolve_dimensions(table.column_names), stats

    ts_spec = schema.timestamp_spec
    # 1. timestamps
    if ts_spec.column in table.column_names:
        raw_ts = table.column(ts_spec.column)
        ts = parse_timestamp_column(raw_ts, ts_spec.format, ts_spec.missing_value)
    elif ts_spec.missing_value is not None:
        raw_ts = pa.nulls(n)
        ts = pa.array(np.full(n, ts_spec.missing_value, dtype=np.int64))
    else:
        raw_ts = pa.nulls(n)
        ts = pa.nulls(n, pa.int64())
    bad = pc.is_null(ts)
    n_bad = pc.sum(bad).as_py() or 0
    if n_bad:
        stats.unparseable += n_bad
        for row in _rows(table, bad.to_numpy(zero_copy_only=False), max_samples):
            raw = row.get(ts_spec.column)
            stats.add_sample(_jsonable(row), f"Timestamp[{'null' if raw is None else raw}] is unparseable!")
        table = table.filter(pc.invert(bad))
        ts = ts.filter(pc.invert(bad))
    if TIME_COLUMN in table.column_names:
        table = table.drop_columns([TIME_COLUMN])
    table = table.append_column(TIME_COLUMN, ts)
    del raw_ts

    con = _connect()
    try:
        # 2-3. transforms and filter
        json_columns: set[str] = set()
        if schema.transforms or schema.transform_filter is not None:
            table, json_columns = _transform_and_filter(con, table, schema, stats)
        if table.num_rows == 0:
            return [], schema.resolve_dimensions([c for c in table.column_names if c != TIME_COLUMN]), stats

        times = table.column(TIME_COLUMN).to_numpy()
        # 4. intervals
        if schema.intervals:
            keep = _in_intervals(times, allowed_intervals(schema))
            dropped = int((~keep).sum())
            if dropped:
                stats.thrown_away += dropped
                table = table.filter(pa.array(keep))
                times = times[keep]
        if table.num_rows == 0:
            return [], schema.resolve_dimensions([c for c in table.column_names if c != TIME_COLUMN]), stats

        # 5. queryGranularity
        truncated = floor_millis(times, schema.query_granularity)
        table = table.set_column(table.schema.get_field_index(TIME_COLUMN), TIME_COLUMN, pa.array(truncated))
        dims = schema.resolve_dimensions([c for c in table.column_names if c != TIME_COLUMN])
        # `auto` without castToType: typed from the rows; JSON transform outputs as Druid stores them
        dims, table = discover_dimension_types(table, dims, json_columns, arrays_in_text=arrays_in_text)
        stats.processed += table.num_rows
        out = _rollup_and_sort(con, table, schema, dims, stats)
    finally:
        con.close()

    out = out.cast(segment_schema(schema, dims))
    # 6. split by segmentGranularity, then by max rows
    return _split(out, schema.segment_granularity, max_rows_per_segment), dims, stats


def _transform_and_filter(
    con: duckdb.DuckDBPyConnection, table: pa.Table, schema: DataSchema, stats: IngestStats
) -> tuple[pa.Table, set[str]]:
    """The transformed, filtered rows, and the names of the transforms whose values are JSON text."""
    types = _column_types(table.schema)
    types[TIME_COLUMN] = "long"
    con.register("__idx_in", table)
    compiled = {t.name: _compile_expression(t.expression, types) for t in schema.transforms}
    json_columns = {name for name, c in compiled.items() if c.type == "JSON"}
    select = []
    for c in table.column_names:
        if c in compiled:
            select.append(f"({compiled[c].sql}) AS {_q(c)}")
        else:
            select.append(_q(c))
    for t in schema.transforms:
        if t.name not in table.column_names:
            select.append(f"({compiled[t.name].sql}) AS {_q(t.name)}")
    select.append("row_number() OVER () AS __row")
    out = query_arrow(con, f"SELECT {', '.join(select)} FROM __idx_in")
    con.unregister("__idx_in")
    if TIME_COLUMN in compiled:
        t_ms = _time_to_millis(out.column(TIME_COLUMN))
        out = out.set_column(out.schema.get_field_index(TIME_COLUMN), TIME_COLUMN, t_ms)
        bad = pc.is_null(t_ms)
        n_bad = pc.sum(bad).as_py() or 0
        if n_bad:
            stats.unparseable += n_bad
            for row in _rows(out, bad.to_numpy(zero_copy_only=False), stats.max_samples):
                stats.add_sample(_jsonable(row), "Could not transform value for __time.")
            out = out.filter(pc.invert(bad))
    if schema.transform_filter is not None:
        ftypes = _column_types(out.schema)
        ftypes[TIME_COLUMN] = "long"
        where = _translate_filter(schema.transform_filter, ftypes)
        con.register("__idx_tf", out)
        before = out.num_rows
        out = query_arrow(con, f"SELECT * FROM __idx_tf WHERE ({where}) ORDER BY __row")
        con.unregister("__idx_tf")
        rejected = before - out.num_rows
        stats.filtered += rejected
        stats.thrown_away += rejected
    return out.drop_columns(["__row"]), json_columns


def _rollup_and_sort(
    con: duckdb.DuckDBPyConnection,
    table: pa.Table,
    schema: DataSchema,
    dims: Sequence[DimensionSchema],
    stats: IngestStats,
) -> pa.Table:
    """Cast the rows to the schema's types (counting the values that do not cast), roll them up when the
    schema does, sort them by time and dimensions, and build the sketch metrics."""
    types = _column_types(table.schema)
    types[TIME_COLUMN] = "long"
    present = set(table.column_names)
    con.register("__idx_rows", table)
    dim_cols, errors = _dimension_casts(dims, types, present)
    metric_cols, metric_inputs, sketch_inputs, metric_errors = _metric_casts(schema, types, present)
    errors += metric_errors
    err = " OR ".join(errors) if errors else "FALSE"
    cols = [f"{_q(TIME_COLUMN)} AS {_q(TIME_COLUMN)}", *dim_cols, *metric_cols, f"({err}) AS __err"]
    con.execute(f"CREATE OR REPLACE TEMP TABLE __idx_cast AS SELECT {', '.join(cols)} FROM __idx_rows")
    con.unregister("__idx_rows")
    if errors:
        [(n_err,)] = con.execute("SELECT count(*) FROM __idx_cast WHERE __err").fetchall()
        stats.processed_with_error += int(n_err)

    keys = [_q(TIME_COLUMN)] + [_q(d.name) for d in dims]
    out_cols = keys + _rolled_up(schema, dict((m.name, a) for m, a in metric_inputs))
    order = ", ".join(f"{k} ASC NULLS FIRST" for k in keys)
    group = f" GROUP BY {', '.join(keys)}" if schema.rollup else ""
    out = query_arrow(con, f"SELECT {', '.join(out_cols)} FROM __idx_cast{group} ORDER BY {order}")
    con.execute("DROP TABLE __idx_cast")
    for m in schema.metrics:
        if m.sketch is not None:
            params, merge = m.sketch, sketch_inputs[m.name]
            built = [aggregate(params, vals or (), sketches=merge) for vals in out.column(m.name).to_pylist()]
            out = out.set_column(out.schema.get_field_index(m.name), m.name, pa.array(built, pa.binary()))
    return out


def _dimension_casts(dims: Sequence[DimensionSchema], types: dict[str, str],
                     present: set[str]) -> tuple[list[str], list[str]]:
    """(each dimension cast to its type, the conditions under which a numeric value did not cast)."""
    cols: list[str] = []
    errors: list[str] = []
    for d in dims:
        name = _q(d.name)
        if d.name not in present:
            cols.append(f"CAST(NULL AS {sql_type(d.value_type)}) AS {name}")
        elif d.multi_value_handling:
            cols.append(f"{multi_value_sql(name, types[d.name], d.multi_value_handling)} AS {name}")
        elif d.is_array:
            cols.append(f"{array_sql(name, types[d.name], d.type)} AS {name}")
        elif d.type == "json":
            cols.append(f"{json_text_sql(name, types[d.name])} AS {name}")
        elif d.type == "string":
            expr = f"array_to_string({name}, ',')" if types[d.name] == "array" else name
            cols.append(f"CAST({expr} AS VARCHAR) AS {name}")
        else:
            cast = numeric_cast_sql(name, types[d.name], d.type)
            cols.append(f"{cast} AS {name}")
            errors.append(f"({name} IS NOT NULL AND {cast} IS NULL)")
    return cols, errors


def _metric_casts(schema: DataSchema, types: dict[str, str], present: set[str]
                  ) -> tuple[list[str], list[tuple[MetricSpec, str]], dict[str, bool], list[str]]:
    """(each metric's input as a column ``__m<i>``, (metric, its column), sketch metric → whether its input
    is sketches (merged) rather than values (built), the conditions under which a value did not cast)."""
    cols: list[str] = []
    metric_inputs: list[tuple[MetricSpec, str]] = []
    sketch_inputs: dict[str, bool] = {}
    errors: list[str] = []
    for i, m in enumerate(schema.metrics):
        if m.type == "count":
            continue
        alias = f"__m{i}"
        field = _q(m.field_name or "")
        if m.sketch is not None:
            sketch_inputs[m.name] = m.merges_sketches or types.get(m.field_name or "", "") == "complex"
            if m.field_name not in present:
                cast = "CAST(NULL AS VARCHAR)"
            elif sketch_inputs[m.name]:
                cast = field
            elif m.sketch.family == "quantilesDoublesSketch":
                cast = f"TRY_CAST({field} AS DOUBLE)"
            else:
                cast = f"CAST({field} AS VARCHAR)"
        elif m.expression is not None:
            cast = f"TRY_CAST(({_translate_expression(m.expression, types)}) AS {sql_type(m.value_type)})"
        elif m.field_name in present:
            cast = numeric_cast_sql(field, types[m.field_name or ""], m.value_type)
            errors.append(f"({field} IS NOT NULL AND {cast} IS NULL)")
        else:
            cast = f"CAST(NULL AS {sql_type(m.value_type)})"
        cols.append(f"{cast} AS {alias}")
        metric_inputs.append((m, alias))
    return cols, metric_inputs, sketch_inputs, errors


def _rolled_up(schema: DataSchema, aliases: dict[str, str]) -> list[str]:
    """Each metric's output column: aggregated per key when the schema rolls up, else the row's value (a
    sketch metric: the list of its values or sketches, turned into one sketch afterwards)."""
    out: list[str] = []
    for m in schema.metrics:
        if m.sketch is not None:
            a = aliases[m.name]
            val = f"list({a}) FILTER (WHERE {a} IS NOT NULL)" if schema.rollup else \
                f"CASE WHEN {a} IS NULL THEN [] ELSE [{a}] END"
        elif not schema.rollup:
            val = "CAST(1 AS BIGINT)" if m.type == "count" else aliases[m.name]
        elif m.type == "count":
            val = "CAST(count(*) AS BIGINT)"
        else:
            fn = {"sum": "sum", "min": "min", "max": "max"}[m.kind]
            val = f"CAST({fn}({aliases[m.name]}) AS {sql_type(m.value_type)})"
        out.append(f"{val} AS {_q(m.name)}")
    return out


def runs(values: np.ndarray) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of equal adjacent values (rows already in bucket order)."""
    cuts = np.concatenate(([0], np.flatnonzero(np.diff(values)) + 1, [len(values)])).tolist()
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def store_segment(deep_storage: _DeepStorage, segment: DataSegment, local: Path, size: int,
                  projections: Sequence[ProjectionSpec] = ()) -> DataSegment:
    """Build ``projections`` from a written segment file, move the files to the deep-storage keys of
    ``segment``; the segment with its ``loadSpec``, size and projection files."""
    specs = {p.name: p for p in projections}
    files = []
    for name, path, rows in write_projection_files(local, projections):
        spec = deep_storage.put_file(path, projection_data_key(segment.id, name))
        path.unlink()
        files.append({"name": name, "spec": specs[name].to_json(), "granularity": specs[name].granularity.to_json(),
                      "loadSpec": dict(spec), "numRows": rows})
    load_spec = deep_storage.put_file(local, segment_data_key(segment.id))
    local.unlink()
    return replace(segment, load_spec=dict(load_spec), size=size, projections=tuple(files))


def _split(table: pa.Table, seg_gran: Granularity, max_rows: int) -> list[SegmentTable]:
    if table.num_rows == 0:
        return []
    times = table.column(TIME_COLUMN).cast(pa.int64()).to_numpy()
    starts = floor_millis(times, seg_gran)
    out: list[SegmentTable] = []
    for a, b in runs(starts):
        start = int(starts[a])
        interval = Interval.eternity() if seg_gran.is_all else seg_gran.bucket(start)
        rows = b - a
        pieces = -(-rows // max_rows)
        for i in range(pieces):
            lo = a + i * max_rows
            hi = min(b, lo + max_rows)
            out.append(SegmentTable(interval, i, pieces, table.slice(lo, hi - lo)))
    return out


def index_partition(
    batches: Iterable[pa.RecordBatch] | pa.Table,
    schema: DataSchema,
    *,
    version: str,
    deep_storage: _DeepStorage,
    shard: Literal["core", "append"] = "core",
    partition_offset: Mapping[Interval, int] | None = None,
    max_rows_per_segment: int = DEFAULT_MAX_ROWS_PER_SEGMENT,
    input_bytes: int | None = None,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    work_dir: str | Path | None = None,
    arrays_in_text: bool = False,
) -> IndexResult:
    """Index one Arrow partition into segment files in deep storage (not published).

    ``shard="core"``: every interval gets a complete core set, ``numbered`` partitions 0..N−1 with
    ``partitions = N``. ``shard="append"``: ``numbered`` with ``partitions = 0``, partition numbers
    starting at ``partition_offset[interval]`` (0 when absent) — the caller reads the next free number
    from the metadata store. A job that indexes several Arrow partitions into one core set passes
    disjoint ``partition_offset`` ranges with ``shard="core"`` and then calls :func:`renumber_core`.
    """
    if shard not in ("core", "append"):
        raise ValueError(f"shard must be 'core' or 'append', not {shard!r}")
    pieces, dims, stats = build_segment_tables(
        batches,
        schema,
        max_rows_per_segment=max_rows_per_segment,
        input_bytes=input_bytes,
        max_samples=max_samples,
        arrays_in_text=arrays_in_text,
    )
    offsets = partition_offset or {}
    dim_names = tuple(d.name for d in dims)
    metric_names = schema.metric_names
    segments: list[DataSegment] = []
    with tempfile.TemporaryDirectory(prefix="radstack-index-", dir=work_dir) as tmp:
        for n, piece in enumerate(pieces):
            pnum = offsets.get(piece.interval, 0) + piece.index
            spec = ShardSpec("numbered", pnum, piece.count if shard == "core" else 0)
            seg = DataSegment(
                data_source=schema.data_source,
                interval=piece.interval,
                version=version,
                dimensions=dim_names,
                metrics=metric_names,
                shard_spec=spec,
                num_rows=piece.table.num_rows,
            )
            local = Path(tmp) / f"{n}.parquet"
            size = write_segment_file(piece.table, local)
            segments.append(store_segment(deep_storage, seg, local, size, schema.projections))
    return IndexResult(segments, stats, dim_names)


def renumber_core(segments: Sequence[DataSegment], deep_storage: DeepStorage | None = None) -> list[DataSegment]:
    """Make one core set per (dataSource, interval, version): partitions renumbered 0..N−1 in the
    order of their current numbers, each with ``partitions = N``.

    The data stays where it was written (``loadSpec`` is authoritative). Pass ``deep_storage`` to
    also move each renumbered segment's file to the key its new id implies (ascending, so no move
    overwrites a file still to be moved)."""
    groups: dict[tuple[str, Interval, str], list[DataSegment]] = {}
    for s in segments:
        groups.setdefault((s.data_source, s.interval, s.version), []).append(s)
    out: list[DataSegment] = []
    for key in sorted(groups, key=lambda k: (k[0], k[1].start, k[1].end, k[2])):
        group = sorted(groups[key], key=lambda s: s.partition_num)
        nums = [s.partition_num for s in group]
        if len(set(nums)) != len(nums):
            raise ValueError(
                f"duplicate partition numbers for {key[0]} {key[1]} {key[2]}: index each Arrow partition "
                "with a distinct partition_offset before renumbering"
            )
        total = len(group)
        for i, s in enumerate(group):
            new = replace(s, shard_spec=ShardSpec("numbered", i, total, s.shard_spec.extra))
            if deep_storage is not None and s.partition_num != i:
                load_spec = _move(deep_storage, segment_data_key(s.id), segment_data_key(new.id))
                files = tuple(
                    {**f, "loadSpec": _move(deep_storage, projection_data_key(s.id, f["name"]),
                                            projection_data_key(new.id, f["name"]))}
                    for f in s.projections
                )
                new = replace(new.with_load_spec(load_spec), projections=files)
            out.append(new)
    return out


def _move(deep_storage: DeepStorage, old_key: str, new_key: str) -> dict[str, Any]:
    """Move one deep-storage file; its new ``loadSpec``."""
    if hasattr(deep_storage, "rename"):
        deep_storage.rename(old_key, new_key)
        return dict(deep_storage.load_spec(new_key))
    with tempfile.TemporaryDirectory(prefix="radstack-renumber-") as tmp:
        local = Path(tmp) / "data.parquet"
        deep_storage.download(old_key, local)
        load_spec = deep_storage.put_file(local, new_key)
    deep_storage.delete(old_key)
    return dict(load_spec)

