"""The segment cache: segments loaded once and kept on local disk, like a Druid historical's.

When the broker learns that a segment is visible (announced), its files are fetched from deep storage
through the segment's ``loadSpec`` into ``{home}/segment-cache/downloads/``; the Parquet file is read by
Arrow and streamed into a table of the broker's DuckDB database ``{home}/segment-cache/segments.duckdb``
(one table per segment, one per projection file), and the download is removed: the cache holds the rows
once, in DuckDB's compressed columnar format, and the broker's locked DuckDB never opens a Parquet file.
Queries read those tables through DuckDB's buffer pool, which ``server.memory_limit`` bounds, so a server
answers over many times its memory. What the cache holds is recorded in the same file (``__rs_segment_cache``,
written after the tables, so a crash leaves at most tables nobody lists, dropped at the next open): a
restarted broker serves the segments it already has at once and fetches only those it lacks.
When the segment stops being visible (unused or overshadowed) its tables are dropped. DuckDB's MVCC keeps
a dropped table readable by statements that started before the drop.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shutil
import threading
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from radstack.config import Settings
from radstack.druid_types import native_type_of_duckdb
from radstack.sketches.hll_merge import single_coupons
from radstack.sketches.theta_merge import single_hashes
from radstack.sql_text import quote_identifier as _q
from radstack.storage.deep_storage import fetch_load_spec
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.segment_format import ARRAY_KEY, COMPLEX_KEY
from radstack.storage.segments import DataSegment, segment_path
from serving.broker.store.cache_database import CacheDatabase

log = logging.getLogger(__name__)

#: the name a file's Arrow rows are registered under while they are copied into a table
_LOADING = "__rs_loading"
#: rows per Arrow batch while a file streams into DuckDB
_BATCH_ROWS = 131_072
#: what the cache holds: segment id → the JSON of its :class:`LoadedSegment`
_CATALOG = "__rs_segment_cache"
#: tables built from cached segments by the broker (projection stores) → what they were built from
_DERIVED = "__rs_derived_tables"
#: the layout of the catalog's JSON; a cache written with another is emptied at open
_FORMAT = 2
#: a table of its own (a segment whose column types differ from its datasource table's) or a projection's
_SEGMENT_TABLE = re.compile(r"__seg_(\d+)(__projection_\d+)?$")
#: the datasource tables: every segment of a datasource whose column types agree, one after another
_DATASOURCE_TABLE = re.compile(r"__ds_(\d+)$")
#: the column of a datasource table that says which segment a row belongs to (its number)
SEGMENT_COLUMN = "__rs_segment"
#: the integer column kept beside a sketch column: the one value of each per-row sketch (null for any other
#: sketch), which DuckDB collects many times faster than the images (rules/sketch_singles.py)
SINGLE_PREFIX = "__rs_single__"
#: sketch family → the reader of that value from a batch of images
_SINGLE_VALUES = {"HLLSketch": single_coupons, "thetaSketch": single_hashes}

@dataclass(frozen=True)
class LoadedProjection:
    """One projection file of a loaded segment, on local disk (the broker copies the files of all
    segments into one table per projection: :mod:`serving.broker.store.projection_views`)."""

    name: str
    spec: dict[str, Any]  # the projection's JSON, as the indexer recorded it
    granularity: Any  # its time granularity's JSON
    num_rows: int
    columns: tuple[tuple[str, str], ...]
    table: str = ""  # the DuckDB table its rows were loaded into (dropped with the segment)


@dataclass(frozen=True)
class LoadedSegment:
    """A segment in the cache: where its rows are and what a query planner needs to know about it.

    Its rows are the rows of ``table`` whose :data:`SEGMENT_COLUMN` is ``number`` (the datasource table
    its segments share), or all of ``table`` when ``number`` is None (a table of its own)."""

    segment: DataSegment
    table: str
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
    #: the segment's number in its datasource table (None: ``table`` is its own)
    number: int | None = None
    #: sketch columns with an integer column of their per-row values beside them (:func:`single_column`)
    singles: tuple[str, ...] = ()
    #: those of them whose every row has its value there (a merge needs none of their images)
    whole_singles: tuple[str, ...] = ()

    @property
    def identifier(self) -> str:
        return self.segment.identifier

    @property
    def rows_filter(self) -> str | None:
        """The condition that picks this segment's rows out of ``table`` (None: all of them)."""
        return None if self.number is None else f'"{SEGMENT_COLUMN}" = {self.number}'

    @property
    def source(self) -> str:
        """A relation of exactly this segment's rows (its table, or the filtered datasource table)."""
        where = self.rows_filter
        return self.table if where is None else f"(SELECT * FROM {self.table} WHERE {where})"

    def marked_types(self) -> dict[str, str]:
        """The Druid types the file's field marks give: sketch columns ``COMPLEX<family>``, ARRAY
        columns ``ARRAY<…>`` (their DuckDB types, BLOB and VARCHAR[], do not say it)."""
        return {**{name: f"COMPLEX<{family}>" for name, family in self.complex}, **dict(self.arrays)}

    def druid_types(self) -> dict[str, str]:
        """Every column's Druid type, in file order: the marked type, else the DuckDB type's."""
        marked = self.marked_types()
        return {name: marked.get(name) or native_type_of_duckdb(t) for name, t in self.columns}


class SegmentLoadError(RuntimeError):
    """A segment's files could not be fetched or read."""


class SegmentCache:
    """Loads segments into tables of the cache database and drops them again. Thread-safe.

    A datasource's segments share one table (``__ds_N``, a row's segment in :data:`SEGMENT_COLUMN`), so
    a query over many segments reads one table whose zone maps on ``__time`` do the pruning; a segment
    whose column types differ from that table's gets a table of its own. Loading a segment's rows and
    listing it in the catalog is one transaction, and so is unlisting it and deleting its rows."""

    def __init__(self, database: CacheDatabase, settings: Settings | None = None,
                 deep_storage: DeepStorage = None) -> None:
        self._db = database.connection
        self.database = database
        self.downloads = database.downloads
        self._settings = settings
        self._deep_storage = deep_storage
        self._lock = threading.Lock()
        self._loaded: dict[str, LoadedSegment] = {}
        self._counter = 0
        self._ds_tables: dict[str, str] = {}  # datasource → its table
        self._table_types: dict[str, dict[str, str]] = {}  # datasource table → its columns' types
        #: the derived tables the database held when it was opened → their keys (:meth:`record_derived`)
        self.derived_at_open: dict[str, str] = {}
        self._recover()

    # ---- lookups ------------------------------------------------------------------------------
    def get(self, segment_id: str) -> LoadedSegment | None:
        with self._lock:
            return self._loaded.get(segment_id)

    def loaded(self) -> dict[str, LoadedSegment]:
        with self._lock:
            return dict(self._loaded)

    def held_bytes(self) -> int:
        """The size of the segments held (their descriptors' ``size``, as Druid counts a cache's use)."""
        with self._lock:
            return sum(ls.segment.size for ls in self._loaded.values())

    def members(self) -> dict[str, tuple[int, ...]]:
        """Datasource table → the numbers of the segments whose rows it holds now, ascending. A segment
        loaded later gets a higher number than all of them."""
        out: dict[str, list[int]] = {}
        with self._lock:
            for ls in self._loaded.values():
                if ls.number is not None:
                    out.setdefault(ls.table, []).append(ls.number)
        return {t: tuple(sorted(ns)) for t, ns in out.items()}

    def record_derived(self, cur: duckdb.DuckDBPyConnection, table: str, key: str | None) -> None:
        """In the caller's transaction: ``table``, built from cached segments, holds what ``key`` names
        (None: it is dropped). A restart keeps the table and offers the key in :attr:`derived_at_open`, so
        the broker need not build it again."""
        cur.execute(f"DELETE FROM {_DERIVED} WHERE name = ?", [table])
        if key is not None:
            cur.execute(f"INSERT INTO {_DERIVED} VALUES (?, ?)", [table, key])

    # ---- load / drop --------------------------------------------------------------------------
    def load(self, segment: DataSegment) -> LoadedSegment:
        """Fetch and load ``segment`` unless the cache already holds it."""
        sid = segment.identifier
        existing = self.get(sid)
        if existing is not None:
            return existing
        budget = self._settings.server.segment_cache_bytes if self._settings is not None else 0
        held = self.held_bytes()
        if budget and held + segment.size > budget:  # as a full Druid historical: the segment stays unavailable
            raise SegmentLoadError(f"segment {sid} ({segment.size:,} bytes) does not fit in the segment cache: "
                                   f"{held:,} of server.segment_cache_bytes={budget:,} used")
        parquet, download = self._fetch(segment)
        try:
            loaded = self._load_file(segment, parquet, download)
        finally:
            if download is not None:
                shutil.rmtree(download, ignore_errors=True)
        with self._lock:
            if sid in self._loaded:  # lost a race: keep the first
                lost, loaded = loaded, self._loaded[sid]
            else:
                lost, self._loaded[sid] = None, loaded
        if lost is not None:
            self._drop_tables(lost)
            return loaded
        log.info("loaded segment %s (%d rows) into %s", sid, loaded.num_rows, loaded.table)
        return loaded

    def drop(self, segment_id: str) -> None:
        """Forget a segment: delete its rows (running statements keep their snapshot)."""
        with self._lock:
            loaded = self._loaded.pop(segment_id, None)
        if loaded is None:
            return
        self._drop_tables(loaded)
        log.info("dropped segment %s", segment_id)

    def close(self) -> None:
        with self._lock:
            self._loaded.clear()

    # ---- internals ----------------------------------------------------------------------------
    def _load_file(self, segment: DataSegment, parquet: Path, download: Path | None) -> LoadedSegment:
        """Load the projection files (each a table of its own), then, in one transaction, the rows and
        the catalog row."""
        sid = segment.identifier
        number = self._next_number()
        projections = tuple(p for p in (self._load_projection(segment, f, download, number, i)
                                         for i, f in enumerate(segment.projections)) if p)
        complex_columns = _marked_columns(parquet, COMPLEX_KEY)
        names, reader = _stream(parquet, {n: fam for n, fam in complex_columns if fam in _SINGLE_VALUES})
        select = _select_list(names)
        cur = self._db.cursor()
        cur.register(_LOADING, reader)
        try:
            stored = tuple((str(r[0]), str(r[1])) for r in cur.execute(
                f"DESCRIBE SELECT {select} FROM {_LOADING}").fetchall())
            cols = tuple((n, t) for n, t in stored if not n.startswith(SINGLE_PREFIX))
            table, new_table = self._table_for(segment.data_source, stored, number)
            own = table == f"__seg_{number}"
            where = "TRUE" if own else f'"{SEGMENT_COLUMN}" = {number}'
            cur.execute("BEGIN TRANSACTION")
            if own:
                cur.execute(f"CREATE TABLE {table} AS SELECT {select} FROM {_LOADING}")
            elif new_table:
                cur.execute(f'CREATE TABLE {table} AS SELECT {number} AS "{SEGMENT_COLUMN}", {select} FROM {_LOADING}')
            else:
                have = self._table_types[table]
                for name, typ in stored:
                    if name not in have:
                        cur.execute(f"ALTER TABLE {table} ADD COLUMN {_q(name)} {typ}")
                cur.execute(f'INSERT INTO {table} ("{SEGMENT_COLUMN}", {", ".join(_q(n) for n in names)}) '
                            f"SELECT {number}, {select} FROM {_LOADING}")
            time_stats = 'epoch_ms(min("__time")), epoch_ms(max("__time"))' if "__time" in names else "NULL, NULL"
            singles = [n for n, _ in stored if n.startswith(SINGLE_PREFIX)]
            counts = "".join(f", count({_q(n)})" for n in singles)
            n, lo, hi, *present = cur.execute(  # type: ignore[misc]
                f"SELECT count(*), {time_stats}{counts} FROM {table} WHERE {where}").fetchone()
            loaded = LoadedSegment(
                segment=segment,
                table=table,
                num_rows=int(n),
                min_time=None if lo is None else int(lo),
                max_time=None if hi is None else int(hi),
                columns=cols,
                size=parquet.stat().st_size,
                projections=projections,
                complex=complex_columns,
                arrays=_marked_columns(parquet, ARRAY_KEY),
                number=None if own else number,
                singles=tuple(n[len(SINGLE_PREFIX):] for n in singles),
                whole_singles=tuple(c[len(SINGLE_PREFIX):] for c, k in zip(singles, present, strict=True) if k == n),
            )
            cur.execute(f"INSERT INTO {_CATALOG} VALUES (?, ?)", [sid, _to_record(loaded)])
            cur.execute("COMMIT")
        except duckdb.Error as e:
            with contextlib.suppress(duckdb.Error):
                cur.execute("ROLLBACK")
            for p in projections:
                self._drop_table(p.table)
            raise SegmentLoadError(f"cannot load segment {sid} from {parquet}: {e}") from e
        finally:
            cur.unregister(_LOADING)
            cur.close()
        if not own:
            with self._lock:
                self._ds_tables[segment.data_source] = table
                self._table_types.setdefault(table, {}).update(dict(stored))
        return loaded

    def _table_for(self, datasource: str, cols: tuple[tuple[str, str], ...], number: int) -> tuple[str, bool]:
        """Where a segment's rows go: (its datasource table, whether it must be created), or its own
        table when a column's type differs from the datasource table's."""
        with self._lock:
            table = self._ds_tables.get(datasource)
            have = dict(self._table_types.get(table, {})) if table else {}
        if any(name == SEGMENT_COLUMN for name, _ in cols):
            return f"__seg_{number}", True
        if table is None:
            return f"__ds_{number}", True
        if any(name in have and have[name] != typ for name, typ in cols):
            return f"__seg_{number}", True
        return table, False

    def _recover(self) -> None:
        """Take over what the database already holds: the segments its catalog lists (whose tables are
        all there) are loaded; every other table and view a previous process left is dropped, and so are
        the rows of a datasource table that no listed segment owns."""
        cur = self._db.cursor()
        try:
            cur.execute(f"CREATE TABLE IF NOT EXISTS {_CATALOG} (segment_id VARCHAR, info VARCHAR)")
            cur.execute(f"CREATE TABLE IF NOT EXISTS {_DERIVED} (name VARCHAR, key VARCHAR)")
            tables = {r[0] for r in cur.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall()}
            views = [r[0] for r in cur.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal AND database_name = current_database()"
            ).fetchall()]
            own: set[str] = set()
            shared: set[str] = set()
            unlisted = False
            for rowid, sid, info in cur.execute(f"SELECT rowid, segment_id, info FROM {_CATALOG}").fetchall():
                loaded = _from_record(info)
                mine = set() if loaded is None else {*(p.table for p in loaded.projections)}
                if loaded is not None and loaded.number is None:
                    mine.add(loaded.table)
                if (loaded is None or loaded.identifier != sid or sid in self._loaded or loaded.table not in tables
                        or not mine <= tables - own):
                    cur.execute(f"DELETE FROM {_CATALOG} WHERE rowid = ?", [rowid])
                    unlisted = True
                    continue
                self._loaded[sid] = loaded
                own |= mine
                if loaded.number is not None:
                    shared.add(loaded.table)
                    self._ds_tables[loaded.segment.data_source] = max(
                        loaded.table, self._ds_tables.get(loaded.segment.data_source, loaded.table), key=_number_of)
            for name, key in cur.execute(f"SELECT name, key FROM {_DERIVED}").fetchall():
                if name in tables and not unlisted:  # built from segments still held as they were
                    self.derived_at_open[name] = key
            cur.execute(f"DELETE FROM {_DERIVED} WHERE NOT list_contains(?, name)", [list(self.derived_at_open)])
            for view in views:
                cur.execute(f"DROP VIEW IF EXISTS {_q(view)}")
            for table in tables - own - shared - set(self.derived_at_open) - {_CATALOG, _DERIVED}:
                cur.execute(f"DROP TABLE IF EXISTS {_q(table)}")
            for table in shared:
                self._table_types[table] = {
                    str(r[0]): str(r[1]) for r in cur.execute(
                        "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
                        "AND database_name = current_database()", [table]).fetchall()
                    if r[0] != SEGMENT_COLUMN}
                if unlisted:  # rows of segments whose catalog row was not usable
                    numbers = [ls.number for ls in self._loaded.values() if ls.table == table]
                    cur.execute(f'DELETE FROM {table} WHERE "{SEGMENT_COLUMN}" NOT IN ({", ".join(map(str, numbers))})')
            # the next number is above every kept table's and every held segment's (a datasource table is
            # named after its first segment, so its later segments' numbers are only in the catalog)
            self._counter = max([*(_number_of(t) for t in own), *(ls.number or 0 for ls in self._loaded.values())],
                                default=0)
        finally:
            cur.close()
        if self.downloads is not None:  # fetched files of a load that did not finish
            shutil.rmtree(self.downloads, ignore_errors=True)
        if self._loaded:
            log.info("segment cache: %d segments already held (%d rows)", len(self._loaded),
                     sum(ls.num_rows for ls in self._loaded.values()))

    def _drop_tables(self, loaded: LoadedSegment) -> None:
        """Unlist a segment and delete its rows and tables, in one transaction (a datasource table that
        no segment uses any more is dropped)."""
        with self._lock:
            last = loaded.number is not None and not any(
                ls.table == loaded.table for ls in self._loaded.values())
            if last:
                self._table_types.pop(loaded.table, None)
                if self._ds_tables.get(loaded.segment.data_source) == loaded.table:
                    del self._ds_tables[loaded.segment.data_source]
        cur = self._db.cursor()
        try:
            cur.execute("BEGIN TRANSACTION")
            cur.execute(f"DELETE FROM {_CATALOG} WHERE segment_id = ?", [loaded.identifier])
            if loaded.number is None or last:
                cur.execute(f"DROP TABLE IF EXISTS {loaded.table}")
            else:
                cur.execute(f"DELETE FROM {loaded.table} WHERE {loaded.rows_filter}")
            for p in loaded.projections:
                cur.execute(f"DROP TABLE IF EXISTS {p.table}")
            cur.execute("COMMIT")
        except duckdb.Error:
            with contextlib.suppress(duckdb.Error):
                cur.execute("ROLLBACK")
            log.warning("segment %s: rows not deleted (the next open does it)", loaded.identifier, exc_info=True)
        finally:
            cur.close()

    def _drop_table(self, table: str) -> None:
        cur = self._db.cursor()
        try:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
        except duckdb.Error:
            log.warning("table %s not dropped (the next open does it)", table, exc_info=True)
        finally:
            cur.close()

    def _next_number(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter

    def _load_projection(self, segment: DataSegment, record: dict[str, Any], download: Path | None,
                         number: int, index: int) -> LoadedProjection | None:
        """Load one projection file; None (logged) when it cannot be read — the broker then
        aggregates that segment's base rows for the projection instead."""
        name, spec = record.get("name"), record.get("spec")
        if not isinstance(name, str) or not isinstance(spec, dict) or not isinstance(record.get("loadSpec"), dict):
            return None
        cur = self._db.cursor()
        table = f"__seg_{number}__projection_{index}"
        try:
            path = self._fetch_file(record["loadSpec"], download, f"projections/{name}.parquet")
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
        return LoadedProjection(name, spec, record.get("granularity"), int(n), cols, table)

    def _fetch_file(self, spec: dict[str, Any], download: Path | None, rel: str) -> Path:
        """A file named by a ``loadSpec`` on local disk: fetched under ``download`` or read in place."""
        if spec.get("type") == "parquet-file" or download is None:
            path = Path(str(spec.get("path") or ""))
            if not path.is_file():
                raise SegmentLoadError(f"no file at {path}")
            return path
        dest = download / rel
        if dest.is_file():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        result = fetch_load_spec(spec, dest, self._settings)
        found = Path(result) if isinstance(result, str | Path) and Path(result).is_file() else dest
        if not found.is_file():
            raise SegmentLoadError(f"nothing at {dest} after fetching {spec}")
        return found

    def _fetch(self, segment: DataSegment) -> tuple[Path, Path | None]:
        """Bring the segment's ``data.parquet`` onto local disk; returns (file, its download dir, or None
        when the file is read in place)."""
        spec = segment.load_spec or {}
        if spec.get("type") != "parquet-file" and self.downloads is not None:
            # a unique dir: two loads of one segment (a lost race) never share files
            download = self.downloads / segment_path(segment.id) / uuid.uuid4().hex[:8]
            download.mkdir(parents=True, exist_ok=True)
            try:
                # a file spec lands at the given path; a folder spec is copied into it
                result = fetch_load_spec(spec, download / "data.parquet", self._settings)
            except Exception as e:  # noqa: BLE001 - any storage failure is a load failure
                shutil.rmtree(download, ignore_errors=True)
                raise SegmentLoadError(f"cannot fetch segment {segment.identifier}: {e}") from e
            found = _find_parquet(Path(result)) if isinstance(result, str | Path) else None
            found = found or _find_parquet(download)
            if found is None:
                shutil.rmtree(download, ignore_errors=True)
                raise SegmentLoadError(f"segment {segment.identifier}: no data.parquet after fetching {spec}")
            return found, download
        # Without a deep-storage module: a local loadSpec (or a direct file) is read in place.
        path = spec.get("path")
        if not path:
            raise SegmentLoadError(f"segment {segment.identifier} has no usable loadSpec: {spec}")
        found = _find_parquet(Path(path))
        if found is None:
            raise SegmentLoadError(f"segment {segment.identifier}: no data.parquet at {path}")
        return found, None


def _to_record(loaded: LoadedSegment) -> str:
    """The catalog's JSON of a loaded segment (its descriptor and what loading it found)."""
    d = asdict(loaded)
    d["segment"] = loaded.segment.to_json()
    return json.dumps({"format": _FORMAT, **d})


def _from_record(info: str) -> LoadedSegment | None:
    """A :class:`LoadedSegment` from its catalog JSON; None when it is not one this version wrote."""
    try:
        d = json.loads(info)
        if d.pop("format", None) != _FORMAT:
            return None
        pairs = lambda v: tuple((str(a), str(b)) for a, b in v)  # noqa: E731
        return LoadedSegment(
            segment=DataSegment.from_json(d["segment"]),
            table=str(d["table"]),
            num_rows=int(d["num_rows"]),
            min_time=d["min_time"],
            max_time=d["max_time"],
            columns=pairs(d["columns"]),
            size=int(d["size"]),
            projections=tuple(LoadedProjection(str(p["name"]), p["spec"], p["granularity"], int(p["num_rows"]),
                                               pairs(p["columns"]), str(p["table"])) for p in d["projections"]),
            complex=pairs(d["complex"]),
            arrays=pairs(d["arrays"]),
            number=None if d.get("number") is None else int(d["number"]),
            singles=tuple(str(n) for n in d.get("singles", ())),  # none in a cache an older version wrote
            whole_singles=tuple(str(n) for n in d.get("whole_singles", ())),
        )
    except (ValueError, KeyError, TypeError):
        return None


def _marked_columns(parquet: Path, key: bytes) -> tuple[tuple[str, str], ...]:
    """The columns of a segment file whose Arrow field metadata has ``key``, with its value (a sketch
    column's family, an ARRAY column's type)."""
    out = []
    for f in pq.read_schema(parquet):
        mark = (f.metadata or {}).get(key)
        if mark:
            out.append((f.name, mark.decode()))
    return tuple(out)


def single_column(sketch_column: str) -> str:
    """The name of the integer column kept beside a sketch column (:data:`SINGLE_PREFIX`)."""
    return SINGLE_PREFIX + sketch_column


def _stream(path: Path, sketches: dict[str, str] | None = None) -> tuple[list[str], pa.RecordBatchReader]:
    """A Parquet file's column names and its rows as a stream of Arrow batches (read by Arrow, so the
    locked DuckDB opens no file; streamed, so a segment is never in memory twice). Each of ``sketches``
    (column → family) gets its :func:`single_column` after the file's columns."""
    f = pq.ParquetFile(path)
    schema = f.schema_arrow
    batches = f.iter_batches(batch_size=_BATCH_ROWS)
    added = [(name, _SINGLE_VALUES[family]) for name, family in (sketches or {}).items()
             if schema.get_field_index(name) >= 0 and pa.types.is_binary(schema.field(name).type)]
    if added:
        schema = pa.schema([*schema, *(pa.field(single_column(name), pa.int64()) for name, _ in added)])
        batches = (pa.RecordBatch.from_arrays([*b.columns, *(read(b.column(name)) for name, read in added)],
                                              schema=schema) for b in batches)
    return schema.names, pa.RecordBatchReader.from_batches(schema, batches)


def _select_list(names: list[str]) -> str:
    """The columns of a segment file as they are stored: ``__time`` as TIMESTAMP (Arrow's ``timestamp[ms]``
    would be DuckDB's TIMESTAMP_MS, which the time functions do not take)."""
    return ", ".join('CAST("__time" AS TIMESTAMP) AS "__time"' if n == "__time" else _q(n) for n in names)


def _copy_into(cur: duckdb.DuckDBPyConnection, table: str, path: Path) -> None:
    """``CREATE TABLE table`` from the rows of ``path``."""
    names, reader = _stream(path)
    cur.register(_LOADING, reader)
    try:
        cur.execute(f"CREATE TABLE {table} AS SELECT {_select_list(names)} FROM {_LOADING}")
    finally:
        cur.unregister(_LOADING)


def _number_of(table: str) -> int:
    """The number in a cache table's name (``__ds_7`` → 7, ``__seg_3__projection_0`` → 3; 0 otherwise)."""
    m = _DATASOURCE_TABLE.match(table) or _SEGMENT_TABLE.match(table)
    return int(m.group(1)) if m else 0


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

