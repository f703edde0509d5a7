"""Projection files: one pre-aggregated Parquet file per projection beside a segment's ``data.parquet``.

:func:`projection_sql` is the one definition of a projection's rows — the indexer runs it over a new
segment file (:func:`write_projection_files`), and the broker runs it over a loaded segment that has no
file for a projection (real-time segments, segments written before the projection was declared). Its
columns: ``__time`` floored to the projection's granularity, the grouping dimensions, one column per
aggregator *named after the metric it reads* (so a query over the base columns reads the same names),
and ``__rows``, the number of base rows behind each projection row.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import pyarrow.parquet as pq

from radstack.duckdb_sandbox import sandboxed_connection
from radstack.projections import ROWS_COLUMN, ProjectionSpec, projection_floor_sql
from radstack.spec import TIME_COLUMN
from radstack.sql_text import quote_identifier as _q
from radstack.storage.segment_format import write_segment_file
from radstack.time.timestamps import query_arrow

__all__ = ["projection_sql", "projection_columns", "write_projection_files"]

_SUM_TYPES = {"long": "BIGINT", "double": "DOUBLE"}
#: the name a segment file's rows are registered under while its projections are built
_SEGMENT_ROWS = "__segment_rows"


def projection_columns(spec: ProjectionSpec) -> list[str]:
    """The columns of a projection's rows, in order."""
    return [TIME_COLUMN, *spec.dimensions, *spec.metrics, ROWS_COLUMN]


def projection_sql(source: str, spec: ProjectionSpec, present: Collection[str]) -> str:
    """``SELECT`` of the projection rows of the base rows in ``source`` (a relation with a TIMESTAMP
    ``__time``); columns not in ``present`` read as NULL."""
    floor = projection_floor_sql(spec.granularity, _q(TIME_COLUMN))
    if floor is None:  # parse_projection refuses such granularities
        raise ValueError(f"projection {spec.name}: no time floor for {spec.granularity}")
    keys = [f"{floor} AS {_q(TIME_COLUMN)}"]
    keys += [_q(d) if d in present else f"CAST(NULL AS VARCHAR) AS {_q(d)}" for d in spec.dimensions]
    aggs = []
    for a in spec.aggregators:
        if a.field_name is None:  # count: every projection carries __rows
            continue
        col = _q(a.field_name) if a.field_name in present else "NULL"
        expr = f"{a.kind}({col})"
        if a.kind == "sum":
            expr = f"CAST({expr} AS {_SUM_TYPES[a.type[:-3]]})"
        aggs.append(f"{expr} AS {_q(a.field_name)}")
    aggs.append(f"CAST(count(*) AS BIGINT) AS {_q(ROWS_COLUMN)}")
    order = ", ".join(f"{i} ASC NULLS FIRST" for i in range(1, len(keys) + 1))
    return f"SELECT {', '.join(keys + aggs)} FROM {source} GROUP BY ALL ORDER BY {order}"


def write_projection_files(segment_file: Path, projections: Sequence[ProjectionSpec]) -> list[tuple[str, Path, int]]:
    """Build every projection of the segment file ``segment_file``, each written beside it in the
    segment file format; returns ``(name, file, rows)`` per projection."""
    out: list[tuple[str, Path, int]] = []
    if not projections:
        return out
    con = sandboxed_connection(time_zone="UTC")  # the projections' SQL comes from a spec
    try:
        rows = pq.read_table(segment_file)  # as Arrow: the locked connection opens no file
        con.register(_SEGMENT_ROWS, rows)
        present = set(rows.column_names)
        # Arrow's timestamp[ms] is DuckDB's TIMESTAMP_MS; the time floors take TIMESTAMP (what read_parquet gave)
        source = (f'(SELECT * REPLACE (CAST("{TIME_COLUMN}" AS TIMESTAMP) AS "{TIME_COLUMN}") FROM {_SEGMENT_ROWS})'
                  if TIME_COLUMN in present else _SEGMENT_ROWS)
        for spec in projections:
            table = query_arrow(con, projection_sql(source, spec, present))
            dest = segment_file.with_name(f"{segment_file.stem}.projection.{spec.name}.parquet")
            write_segment_file(table, dest)
            out.append((spec.name, dest, table.num_rows))
    finally:
        con.close()
    return out
