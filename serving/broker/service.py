"""BrokerService: the broker's view of the cluster, kept in step with the metadata store.

It polls the metadata store (``coordinator.metadata_poll_seconds``; :meth:`BrokerService.refresh` syncs
at once), builds a :class:`VersionedIntervalTimeline` per datasource, loads every visible segment into
the :class:`SegmentCache` and then, in one DuckDB transaction, replaces each datasource's VIEW (named
after the datasource) with the UNION ALL of its visible segments, each clipped to its visible interval
(:mod:`serving.broker.store.views`), together with the views of its aggregate projections
(:mod:`serving.broker.store.projection_views`). Segments that stopped being visible are dropped afterwards; statements already running keep reading
their snapshot (DuckDB MVCC), so a query never sees two versions of one interval.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import duckdb
import pyarrow as pa

from radstack.config import CoordinatorSettings, ServerSettings, Settings
from radstack.duckdb_sandbox import default_memory_limit, parse_size
from radstack.sql_text import quote_identifier as quote_ident
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore
from radstack.storage.replicas import choose_replicas, realtime_replicas, serve_one_replica
from radstack.storage.segments import DataSegment
from radstack.storage.timeline import VersionedIntervalTimeline
from radstack.time.intervals import Interval, format_instant
from serving.broker.queries.memory_guard import MemoryGuard
from serving.broker.queries.query_manager import QueryManager
from serving.broker.store import udfs
from serving.broker.store.cache_database import close_cache_database, open_cache_database
from serving.broker.store.projection_views import (
    datasource_projections,
    projection_view_sql,
    store_sql,
)
from serving.broker.store.segment_cache import SegmentCache, SegmentLoadError
from serving.broker.store.state import BrokerState, DatasourceState
from serving.broker.store.views import (
    Chunk,
    union_columns,
    view_sql,
)
from serving.lookups import LookupChanges, LookupRegistry

log = logging.getLogger(__name__)

_GEN_TABLE = "__rs_generation"


class BrokerService:
    """Segment cache + timeline + per-datasource views, shared by the native and SQL engines."""

    def __init__(self, settings: Settings, metadata: MetadataStore = None, deep_storage: DeepStorage = None) -> None:
        self.settings = settings
        self.metadata = metadata
        self.deep_storage = deep_storage
        server = settings.server if settings is not None else ServerSettings()
        coordinator = settings.coordinator if settings is not None else CoordinatorSettings()
        home = settings.home if settings is not None else None
        cache_dir = (home / "segment-cache") if home is not None else None
        # Locked (radstack/duckdb_sandbox.py): segments, lookups and system tables arrive as Arrow, so
        # this connection opens no file but its own database and its spill files under the cache.
        self._database = open_cache_database(cache_dir, memory_limit=server.memory_limit,
                                             threads=server.duckdb_threads,
                                             query_memory_limit=server.query_memory_limit, max_spill=server.max_spill)
        self._db = self._database.connection
        # the segment cache takes over the tables a previous run left and drops everything else
        self.cache = SegmentCache(self._database, settings, deep_storage)
        #: projection store table → what it holds (kept by the cache across restarts: not built again)
        self._stores: dict[str, str] = dict(self.cache.derived_at_open)
        self.udf_key = object()  # names this database in udfs' registry (an id() could be reused)
        udfs.register(self._db, set(udfs.UDFS), db_key=self.udf_key)  # for native queries too (sketches)
        self._db.execute(f"CREATE TABLE {_GEN_TABLE} (generation BIGINT)")
        self._db.execute(f"INSERT INTO {_GEN_TABLE} VALUES (0)")
        self.queries = QueryManager(
            max_concurrent=server.max_concurrent_queries,
            default_timeout_ms=server.default_query_timeout_ms,
            max_queued=server.max_queued_queries,
            queue_timeout_ms=server.query_queue_timeout_ms,
            low_priority_percent=server.low_priority_percent,
            max_timeout_ms=server.max_query_timeout_ms,
            max_per_user=server.max_queries_per_user,
        )
        headroom = parse_size(server.memory_headroom) if server.memory_headroom else 0
        self.memory_guard = MemoryGuard(
            self.queries, parse_size(server.memory_limit or default_memory_limit()) + headroom if headroom else 0)
        self.poll_seconds = float(coordinator.metadata_poll_seconds)
        self._state = BrokerState(0, {}, (), frozenset())
        self._refresh_lock = threading.Lock()
        # Bumped before and after each commit of new views (odd while one is under way): a query that
        # ran outside a transaction checks it to know its snapshot matched the state it was planned on.
        self._commits = 0
        self._commit_lock = threading.Lock()
        self._token: Any = object()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listeners: list[Callable[[], None]] = []
        self._replicas: dict[str, int] = {}
        self.lookups = LookupRegistry(settings, metadata, deep_storage)
        #: True once a sync with the metadata store has completed (the timeline is loaded): /status/health
        self.loaded = metadata is None

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (on the refreshing thread; it must not block) after every swap of the views."""
        self._listeners.append(listener)

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        try:
            self.refresh()
        except Exception:  # noqa: BLE001 - keep serving; the poller retries
            log.exception("initial broker refresh failed")
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, name="broker-metadata-poll", daemon=True)
        self._thread.start()
        self.memory_guard.start()

    def stop(self) -> None:
        self._stop.set()
        self.memory_guard.stop()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.queries.cancel_all()
        with self._refresh_lock:
            self.cache.close()
            close_cache_database(self._database)

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            try:
                self.refresh()
            except Exception:  # noqa: BLE001
                log.exception("broker refresh failed")

    # ---- public API for the engines ---------------------------------------------------------------
    @property
    def state(self) -> BrokerState:
        return self._state

    def connection(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB cursor for the calling thread; every datasource is a view under its own name."""
        return self._db.cursor()

    def datasources(self) -> list[str]:
        return sorted(self._state.datasources)

    def datasource(self, name: str) -> DatasourceState | None:
        return self._state.datasources.get(name)

    def columns(self, ds: str) -> list[tuple[str, str, str]]:
        """``(name, druid type, kind)`` for each column of ``ds``; kind is time|dimension|metric."""
        st = self._state.datasources.get(ds)
        if st is None:
            return []
        return [(c.name, c.druid_type, c.kind) for c in st.columns]

    def timeline(self, ds: str) -> VersionedIntervalTimeline | None:
        st = self._state.datasources.get(ds)
        if st is not None:
            return st.timeline
        segs = [s for s in self._state.segments if s.data_source == ds]
        return VersionedIntervalTimeline.from_segments(segs, ds) if segs else None

    def segment_states(self) -> list[dict[str, Any]]:
        """Every used segment, for ``sys.segments``: published, overshadowed, available, rows, size."""
        state = self._state
        loaded = self.cache.loaded()
        out = []
        for seg in sorted(state.segments, key=lambda s: s.id.sort_key()):
            sid = seg.identifier
            ld = loaded.get(sid)
            spec = seg.shard_spec
            out.append(
                {
                    "segment_id": sid,
                    "datasource": seg.data_source,
                    "start": format_instant(seg.interval.start),
                    "end": format_instant(seg.interval.end),
                    "version": seg.version,
                    "partition_num": spec.partition_num,
                    "size": ld.size if ld is not None else seg.size,
                    "num_rows": ld.num_rows if ld is not None else seg.num_rows,
                    "num_replicas": 1 if ld is not None else 0,
                    "is_published": 1,
                    "is_overshadowed": 1 if sid in state.overshadowed else 0,
                    "is_available": 1 if (ld is not None or seg.is_tombstone) else 0,
                    # Real-time segments carry their interval start as version (the streaming job's
                    # convention); once overshadowed they are no longer served as real-time.
                    "is_realtime": 1
                    if seg.version == format_instant(seg.interval.start) and sid not in state.overshadowed
                    else 0,
                    "shard_spec": spec.to_json(),
                    "dimensions": list(seg.dimensions),
                    "metrics": list(seg.metrics),
                    "last_compaction_state": seg.last_compaction_state,
                    "segment": seg,
                }
            )
        return out

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[tuple[duckdb.DuckDBPyConnection, BrokerState]]:
        """A cursor inside a read transaction whose DuckDB snapshot matches the returned state."""
        cur = self._db.cursor()
        try:
            for _ in range(100):
                state = self._state
                # one round trip: each statement costs DuckDB's Python layer ≈ 0.1–0.2 ms
                gen = cur.execute(f"BEGIN TRANSACTION; SELECT generation FROM {_GEN_TABLE}").fetchone()[0]  # type: ignore[index]
                if gen == state.generation:
                    break
                cur.execute("ROLLBACK")
            else:  # pragma: no cover - only under a refresh storm
                cur.execute("BEGIN TRANSACTION")
                state = self._state
            yield cur, state
        finally:
            cur.close()  # ends the read-only transaction: closing the cursor rolls it back

    @contextlib.contextmanager
    def optimistic_snapshot(self) -> Iterator[tuple[duckdb.DuckDBPyConnection, BrokerState, Callable[[], bool]]]:
        """A cursor outside any transaction, the state, and ``unchanged()``: true when no view was
        committed since the state was taken. A single statement reads one DuckDB snapshot, taken when it
        starts; when ``unchanged()`` holds after it started, that snapshot is the state's. Else the
        caller runs it again under :meth:`snapshot`. Saves the transaction's statements (≈ 0.4 ms of
        DuckDB's Python layer) on every query."""
        commits = self._commits
        state = self._state
        cur = self._db.cursor()

        def unchanged() -> bool:
            return commits % 2 == 0 and self._commits == commits

        try:
            yield cur, state, unchanged
        finally:
            cur.close()

    # ---- syncing with the metadata store ------------------------------------------------------------
    def refresh(self, *, force: bool = False) -> bool:
        """Sync with the metadata store now; returns True when the served views changed."""
        if self.metadata is None:
            return False
        with self._refresh_lock:
            lookups_changed = self.apply_lookups(self.lookups.changes(self._state.lookups))
            token = None
            if hasattr(self.metadata, "change_token"):
                token = self.metadata.change_token()
                if not force and token == self._token:
                    self.loaded = True
                    return lookups_changed
            segments = [
                s if isinstance(s, DataSegment) else DataSegment.from_json(s)
                for s in self.metadata.segments(used=True)
            ]
            # real-time replicas: serve one copy per datasource, the one furthest ahead in Kafka
            self._replicas = choose_replicas(realtime_replicas(segments), self.metadata.get_state, self._replicas)
            changed = self.apply_segments(segments, replicas=self._replicas)
            self._token = token if token is not None else object()
            self.loaded = True
            return changed or lookups_changed

    def apply_lookups(self, changes: LookupChanges) -> bool:
        """(Re)create the tables of the lookups ``changes`` loaded and drop the removed ones, in one
        transaction that also moves the generation, so a query sees one version of every lookup."""
        if not changes:
            return False
        old = self._state
        lookups = {n: lk for n, lk in old.lookups.items() if n not in changes.removed}
        lookups.update({name: loaded for name, (loaded, _) in changes.loaded.items()})

        def write(cur: duckdb.DuckDBPyConnection) -> None:
            for name in changes.removed:
                cur.execute(f"DROP TABLE IF EXISTS {quote_ident(old.lookups[name].table)}")
                cur.execute(f"DROP TABLE IF EXISTS {quote_ident(old.lookups[name].ranges_table)}")
            for loaded, data in changes.loaded.values():
                _create_from_arrow(cur, loaded.table, pa.table({
                    "k": pa.array(list(data.pairs), pa.string()), "v": pa.array(list(data.pairs.values()), pa.string())}))
                if loaded.ranges:
                    lo, hi, v = zip(*data.ranges, strict=True) if data.ranges else ((), (), ())
                    _create_from_arrow(cur, loaded.ranges_table, pa.table({
                        "lo": pa.array(lo, pa.int64()), "hi": pa.array(hi, pa.int64()), "v": pa.array(v, pa.string())}))
                else:
                    cur.execute(f"DROP TABLE IF EXISTS {quote_ident(loaded.ranges_table)}")

        self._commit(write, BrokerState(old.generation + 1, old.datasources, old.segments, old.overshadowed, lookups))
        self._notify()
        return True

    def _commit(self, write: Callable[[duckdb.DuckDBPyConnection], None], state: BrokerState) -> None:
        """Run ``write`` and move the generation to ``state.generation`` in one DuckDB transaction, then
        serve ``state`` (queries that started before keep their snapshot); nothing changes when it raises."""
        cur = self._db.cursor()
        with self._commit_lock:
            self._commits += 1
            try:
                cur.execute("BEGIN TRANSACTION")
                write(cur)
                cur.execute(f"UPDATE {_GEN_TABLE} SET generation = ?", [state.generation])
                cur.execute("COMMIT")
                self._state = state
            except Exception:
                with contextlib.suppress(duckdb.Error):
                    cur.execute("ROLLBACK")
                raise
            finally:
                self._commits += 1
                cur.close()

    def _notify(self) -> None:
        for listener in self._listeners:
            listener()

    def apply_segments(self, segments: list[DataSegment], replicas: dict[str, int] | None = None) -> bool:
        """Serve exactly ``segments`` (the used set): load, swap views, drop what is no longer visible.
        ``replicas``: datasource → the real-time replica whose segments are served (the others' are not)."""
        by_ds: dict[str, list[DataSegment]] = {}
        for s in serve_one_replica(segments, replicas or {}):
            by_ds.setdefault(s.data_source, []).append(s)
        new_states: dict[str, DatasourceState] = {}
        overshadowed: set[str] = set()
        wanted: set[str] = set()
        oldest: dict[str, str] = {}  # case twins from before they were refused: the older one is served
        for ds in sorted(by_ds, key=lambda d: (min(s.version for s in by_ds[d]), d)):
            oldest.setdefault(ds.casefold(), ds)
        for ds, segs in sorted(by_ds.items()):
            if oldest[ds.casefold()] != ds:
                log.error("datasource %s is not served: it differs only in case from %s, and the query engine's "
                          "names ignore case (rename one)", ds, oldest[ds.casefold()])
                continue
            try:
                tl = VersionedIntervalTimeline.from_segments(segs, ds)
            except ValueError:
                log.exception("datasource %s: cannot build a timeline", ds)
                continue
            overshadowed |= tl.overshadowed()
            chunks: list[Chunk] = []
            for vis in tl.visible_segments(Interval.eternity()):
                try:
                    loaded = self.cache.load(vis.segment)
                except SegmentLoadError:
                    log.exception("segment %s is not available", vis.segment.identifier)
                    continue
                wanted.add(loaded.identifier)
                chunks.append(Chunk(loaded, vis.interval))
            if chunks:
                columns = union_columns(chunks)
                held = self.cache.members()  # after every load of ds: no row of its table is left out
                members = {t: held[t] for t in {c.table for c in chunks} if t in held}
                new_states[ds] = DatasourceState(ds, tuple(chunks), columns, tl,
                                                 datasource_projections(ds, chunks, columns), members)
        old = self._state
        if _same_views(old.datasources, new_states):
            self._state = BrokerState(old.generation, new_states, tuple(segments), frozenset(overshadowed), old.lookups)
            self._drop_unwanted(wanted)
            return False
        kept = {p.view_name for st in new_states.values() for p in st.projections}
        stores = dict(self._stores)

        def write(cur: duckdb.DuckDBPyConnection) -> None:
            for ds, st in old.datasources.items():
                if ds not in new_states:
                    cur.execute(f"DROP VIEW IF EXISTS {quote_ident(ds)}")
                    cur.execute(f"DROP VIEW IF EXISTS {quote_ident(st.sketch_view_name)}")
                for p in st.projections:
                    if p.view_name not in kept:
                        cur.execute(f"DROP VIEW IF EXISTS {p.view}")
                        cur.execute(f"DROP TABLE IF EXISTS {p.store}")
                        self.cache.record_derived(cur, p.store_table, None)
                        stores.pop(p.store_table, None)
            for ds, st in new_states.items():
                cur.execute(f"CREATE OR REPLACE VIEW {quote_ident(ds)} AS {view_sql(st.chunks, st.columns, st.members)}")
                sketch_view = st.sketch_view_sql()
                if sketch_view is None:
                    cur.execute(f"DROP VIEW IF EXISTS {quote_ident(st.sketch_view_name)}")
                else:
                    cur.execute(f"CREATE OR REPLACE VIEW {quote_ident(st.sketch_view_name)} AS {sketch_view}")
                for p in st.projections:
                    key = p.store_key_text
                    if stores.get(p.store_table) != key:  # its files changed: copy them again
                        cur.execute(f"CREATE OR REPLACE TABLE {p.store} AS {store_sql(p)}")
                        self.cache.record_derived(cur, p.store_table, key)
                        stores[p.store_table] = key
                    cur.execute(f"CREATE OR REPLACE VIEW {p.view} AS {projection_view_sql(p, st.columns)}")

        self._commit(write, BrokerState(old.generation + 1, new_states, tuple(segments), frozenset(overshadowed),
                                        old.lookups))
        self._stores = stores
        self._drop_unwanted(wanted)
        self._notify()
        return True

    def _drop_unwanted(self, wanted: set[str]) -> None:
        for sid in self.cache.loaded():
            if sid not in wanted:
                self.cache.drop(sid)


def _create_from_arrow(cur: duckdb.DuckDBPyConnection, table: str, rows: pa.Table) -> None:
    cur.register("__rows_in", rows)
    try:
        cur.execute(f"CREATE OR REPLACE TABLE {quote_ident(table)} AS SELECT * FROM __rows_in")
    finally:
        cur.unregister("__rows_in")


def _same_views(a: dict[str, DatasourceState], b: dict[str, DatasourceState]) -> bool:
    if a.keys() != b.keys():
        return False
    for k, st in a.items():
        other = b[k]
        if st.columns != other.columns:
            return False
        if [(c.segment_id, c.clip) for c in st.chunks] != [(c.segment_id, c.clip) for c in other.chunks]:
            return False
        if st.projections != other.projections:
            return False
    return True
