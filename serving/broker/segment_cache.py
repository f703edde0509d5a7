"""The segment cache: segments loaded once, like a Druid historical does.

When the broker learns that a segment is visible (announced), its files are fetched from deep storage
through the segment's ``loadSpec`` into ``{home}/segment-cache/{segment_path}``; the Parquet file is read
by Arrow and streamed into an in-memory DuckDB table (one table per segment, one per projection file), so
the broker's locked DuckDB never opens a file. Queries then read memory, never Parquet.
When the segment stops being visible (unused or overshadowed) the table and the local files are
dropped. DuckDB's MVCC keeps a dropped table readable by statements that started before the drop.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from radstack.config import Settings
from radstack.sql_text import quote_identifier as _q
from radstack.storage.deep_storage import fetch_load_spec
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.segment_format import ARRAY_KEY, COMPLEX_KEY
from radstack.storage.segments import DataSegment, segment_path

log = logging.getLogger(__name__)

#: the name a file's Arrow rows are registered under while they are copied into a table
_LOADING = "__rs_loading"
#: rows per Arrow batch while a file streams into DuckDB
_BATCH_ROWS = 131_072

# DuckDB type → Druid column type.
_DRUID_TYPES = {
    "VARCHAR": "STRING",
    "JSON": "COMPLEX<json>",  # a ``json`` dimension (Parquet's JSON logical type)
    "BIGINT": "LONG",
    "INTEGER": "LONG",
    "SMALLINT": "LONG",
    "TINYINT": "LONG",
    "UBIGINT": "LONG",
    "UINTEGER": "LONG",
    "HUGEINT": "LONG",
    "BOOLEAN": "LONG",
    "DOUBLE": "DOUBLE",
    "FLOAT": "FLOAT",
    "TIMESTAMP": "LONG",
    # ARRAY columns (a VARCHAR[] is a multi-value STRING dimension unless its field is marked ARRAY)
    "BIGINT[]": "ARRAY<LONG>",
    "DOUBLE[]": "ARRAY<DOUBLE>",
}


def druid_type(duckdb_type: str) -> str:
    """Druid's name for a DuckDB column type (``DECIMAL``s read as DOUBLE, anything else as STRING)."""
    t = duckdb_type.upper()
    if t in _DRUID_TYPES:
        return _DRUID_TYPES[t]
    if t.startswith("DECIMAL"):
        return "DOUBLE"
    if t.startswith("TIMESTAMP"):
        return "LONG"
    return "STRING"


@dataclass(frozen=True)
class LoadedProjection:
    """One projection file of a loaded segment, on local disk (the broker copies the files of all
    segments into one table per projection: :mod:`serving.broker.projections`)."""

    name: str
    spec: dict[str, Any]  # the projection's JSON, as the indexer recorded it
    granularity: Any  # its time granularity's JSON
    path: Path
    num_rows: int
    columns: tuple[tuple[str, str], ...]
    table: str = ""  # the DuckDB table its rows were loaded into (dropped with the segment)


@dataclass(frozen=True)
class LoadedSegment:
    """A segment held in memory: its DuckDB table and what a query planner needs to know about it."""

    segment: DataSegment
    table: str
    local_dir: Path | None
    num_rows: int
    min_time: int | None  # epoch millis of the first row (None when empty)
    max_time: int | None
    columns: tuple[tuple[str, str], ...]  # (name, DuckDB type) in file order
    size: int  # bytes of the Parquet file
    projections: tuple[LoadedProjection, ...] = ()
    #: sketch columns → their family (``HLLSketch``, ``thetaSketch``, ``quantilesDoublesSketch``)
    complex: tuple[tuple[str, str], ...] = ()
    #: ARRAY columns → their Druid type (``ARRAY<STRING>`` …), from the field marks of the file
    arrays: tuple[tuple[str, str], ...] = ()

    @property
    def identifier(self) -> str:
        return self.segment.identifier

    def marked_types(self) -> dict[str, str]:
        """The Druid types the file's field marks give: sketch columns ``COMPLEX<family>``, ARRAY
        columns ``ARRAY<…>`` (their DuckDB types, BLOB and VARCHAR[], do not say it)."""
        return {**{name: f"COMPLEX<{family}>" for name, family in self.complex}, **dict(self.arrays)}

    def druid_types(self) -> dict[str, str]:
        """Every column's Druid type, in file order: the marked type, else the DuckDB type's."""
        marked = self.marked_types()
        return {name: marked.get(name) or druid_type(t) for name, t in self.columns}


class SegmentLoadError(RuntimeError):
    """A segment's files could not be fetched or read."""


class SegmentCache:
    """Loads segments into DuckDB tables and drops them again. Thread-safe."""

    def __init__(
        self,
        db: duckdb.DuckDBPyConnection,
        cache_dir: Path,
        settings: Settings | None = None,
        deep_storage: DeepStorage = None,
    ) -> None:
        self._db = db
        self.cache_dir = Path(cache_dir)
        self._settings = settings
        self._deep_storage = deep_storage
        self._lock = threading.Lock()
        self._loaded: dict[str, LoadedSegment] = {}
        self._counter = 0

    # ---- lookups ------------------------------------------------------------------------------
    def get(self, segment_id: str) -> LoadedSegment | None:
        with self._lock:
            return self._loaded.get(segment_id)

    def loaded(self) -> dict[str, LoadedSegment]:
        with self._lock:
            return dict(self._loaded)

    # ---- load / drop --------------------------------------------------------------------------
    def load(self, segment: DataSegment) -> LoadedSegment:
        """Fetch and load ``segment`` unless it is already in memory."""
        sid = segment.identifier
        existing = self.get(sid)
        if existing is not None:
            return existing
        parquet, local_dir = self._fetch(segment)
        table = self._table_name()
        cur = self._db.cursor()
        try:
            cols = _create_table(cur, table, parquet)
            if any(c[0] == "__time" for c in cols):
                n, lo, hi = cur.execute(
                    f'SELECT count(*), epoch_ms(min("__time")), epoch_ms(max("__time")) FROM {table}'
                ).fetchone()  # type: ignore[misc]
            else:
                n, lo, hi = cur.execute(f"SELECT count(*), NULL, NULL FROM {table}").fetchone()  # type: ignore[misc]
        except duckdb.Error as e:
            raise SegmentLoadError(f"cannot load segment {sid} from {parquet}: {e}") from e
        finally:
            cur.close()
        projections = tuple(p for p in (self._load_projection(segment, f, local_dir, table, i)
                                         for i, f in enumerate(segment.projections)) if p)
        loaded = LoadedSegment(
            segment=segment,
            table=table,
            local_dir=local_dir,
            num_rows=int(n),
            min_time=None if lo is None else int(lo),
            max_time=None if hi is None else int(hi),
            columns=cols,
            size=parquet.stat().st_size,
            projections=projections,
            complex=_marked_columns(parquet, COMPLEX_KEY),
            arrays=_marked_columns(parquet, ARRAY_KEY),
        )
        with self._lock:
            if sid in self._loaded:  # lost a race: keep the first
                for t in (table, *(p.table for p in projections)):
                    self._drop_table(t)
                return self._loaded[sid]
            self._loaded[sid] = loaded
        log.info("loaded segment %s (%d rows) into %s", sid, n, table)
        return loaded

    def drop(self, segment_id: str) -> None:
        """Forget a segment: drop its table (running statements keep their snapshot) and its files."""
        with self._lock:
            loaded = self._loaded.pop(segment_id, None)
        if loaded is None:
            return
        self._drop_table(loaded.table)
        for p in loaded.projections:
            self._drop_table(p.table)
        if loaded.local_dir is not None and loaded.local_dir.is_relative_to(self.cache_dir):
            shutil.rmtree(loaded.local_dir, ignore_errors=True)
        log.info("dropped segment %s", segment_id)

    def close(self) -> None:
        with self._lock:
            self._loaded.clear()

    # ---- internals ----------------------------------------------------------------------------
    def _table_name(self) -> str:
        with self._lock:
            self._counter += 1
            return f"__seg_{self._counter}"

    def _load_projection(self, segment: DataSegment, record: dict[str, Any], local_dir: Path | None,
                         segment_table: str, index: int) -> LoadedProjection | None:
        """Load one projection file; None (logged) when it cannot be read — the broker then
        aggregates that segment's base rows for the projection instead."""
        name, spec = record.get("name"), record.get("spec")
        if not isinstance(name, str) or not isinstance(spec, dict) or not isinstance(record.get("loadSpec"), dict):
            return None
        cur = self._db.cursor()
        table = f"{segment_table}__projection_{index}"
        try:
            path = self._fetch_file(record["loadSpec"], local_dir, f"projections/{name}.parquet")
            _copy_into(cur, table, path)
            cols = tuple((str(r[0]), str(r[1])) for r in cur.execute(f"DESCRIBE {table}").fetchall())
            (n,) = cur.execute(f"SELECT count(*) FROM {table}").fetchone()  # type: ignore[misc]
        except Exception:  # noqa: BLE001 - a projection is an optimisation; the base rows still answer
            log.warning("segment %s: projection %s not loaded", segment.identifier, name, exc_info=True)
            with contextlib.suppress(duckdb.Error):
                cur.execute(f"DROP TABLE IF EXISTS {table}")
            return None
        finally:
            cur.close()
        return LoadedProjection(name, spec, record.get("granularity"), path, int(n), cols, table)

    def _fetch_file(self, spec: dict[str, Any], local_dir: Path | None, rel: str) -> Path:
        """A file named by a ``loadSpec`` on local disk: fetched under ``local_dir`` or read in place."""
        if spec.get("type") == "parquet-file" or local_dir is None:
            path = Path(str(spec.get("path") or ""))
            if not path.is_file():
                raise SegmentLoadError(f"no file at {path}")
            return path
        dest = local_dir / rel
        if dest.is_file():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        result = fetch_load_spec(spec, dest, self._settings)
        found = Path(result) if isinstance(result, str | Path) and Path(result).is_file() else dest
        if not found.is_file():
            raise SegmentLoadError(f"nothing at {dest} after fetching {spec}")
        return found

    def _drop_table(self, table: str) -> None:
        cur = self._db.cursor()
        try:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
        finally:
            cur.close()

    def _fetch(self, segment: DataSegment) -> tuple[Path, Path | None]:
        """Bring the segment's ``data.parquet`` onto local disk; returns (file, cache dir or None)."""
        spec = segment.load_spec or {}
        local_dir = self.cache_dir / segment_path(segment.id)
        found = _find_parquet(local_dir)
        if found is not None:
            return found, local_dir
        if spec.get("type") != "parquet-file":
            local_dir.mkdir(parents=True, exist_ok=True)
            try:
                # a file spec lands at the given path; a folder spec is copied into it
                result = fetch_load_spec(spec, local_dir / "data.parquet", self._settings)
            except Exception as e:  # noqa: BLE001 - any storage failure is a load failure
                shutil.rmtree(local_dir, ignore_errors=True)
                raise SegmentLoadError(f"cannot fetch segment {segment.identifier}: {e}") from e
            found = _find_parquet(Path(result)) if isinstance(result, str | Path) else None
            found = found or _find_parquet(local_dir)
            if found is None:
                raise SegmentLoadError(f"segment {segment.identifier}: no data.parquet after fetching {spec}")
            return found, local_dir
        # Without a deep-storage module: a local loadSpec (or a direct file) is read in place.
        path = spec.get("path")
        if not path:
            raise SegmentLoadError(f"segment {segment.identifier} has no usable loadSpec: {spec}")
        found = _find_parquet(Path(path))
        if found is None:
            raise SegmentLoadError(f"segment {segment.identifier}: no data.parquet at {path}")
        return found, None


def _marked_columns(parquet: Path, key: bytes) -> tuple[tuple[str, str], ...]:
    """The columns of a segment file whose Arrow field metadata has ``key``, with its value (a sketch
    column's family, an ARRAY column's type)."""
    out = []
    for f in pq.read_schema(parquet):
        mark = (f.metadata or {}).get(key)
        if mark:
            out.append((f.name, mark.decode()))
    return tuple(out)


def _stream(path: Path) -> tuple[list[str], pa.RecordBatchReader]:
    """A Parquet file's column names and its rows as a stream of Arrow batches (read by Arrow, so the
    locked DuckDB opens no file; streamed, so a segment is never in memory twice)."""
    f = pq.ParquetFile(path)
    return f.schema_arrow.names, pa.RecordBatchReader.from_batches(f.schema_arrow, f.iter_batches(batch_size=_BATCH_ROWS))


def _copy_into(cur: duckdb.DuckDBPyConnection, table: str, path: Path) -> None:
    """``CREATE TABLE table`` from the rows of ``path``, ``__time`` as TIMESTAMP (Arrow's ``timestamp[ms]``
    would be DuckDB's TIMESTAMP_MS, which the time functions do not take)."""
    names, reader = _stream(path)
    select = ", ".join('CAST("__time" AS TIMESTAMP) AS "__time"' if n == "__time" else _q(n) for n in names)
    cur.register(_LOADING, reader)
    try:
        cur.execute(f"CREATE TABLE {table} AS SELECT {select} FROM {_LOADING}")
    finally:
        cur.unregister(_LOADING)


def _create_table(cur: duckdb.DuckDBPyConnection, table: str, parquet: Path) -> tuple[tuple[str, str], ...]:
    """Load a segment-format Parquet file into ``table`` (``__time`` as TIMESTAMP); its columns."""
    _copy_into(cur, table, parquet)
    return tuple(
        (r[0], str(r[1]))
        for r in cur.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index", [table],
        ).fetchall()
    )


def _find_parquet(path: Path) -> Path | None:
    if path.is_file() and path.suffix == ".parquet":
        return path
    if path.is_dir():
        direct = path / "data.parquet"
        if direct.is_file():
            return direct
        found = sorted(p for p in path.rglob("*.parquet") if p.is_file() and "projections" not in p.relative_to(path).parts)
        return found[0] if found else None
    return None

