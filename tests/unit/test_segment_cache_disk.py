"""The broker's segment cache on local disk (serving/broker/store/segment_cache.py): segments are held once, in
DuckDB's format under ``{home}/segment-cache``, and a restarted broker serves them without fetching."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from radstack.config import Settings
from radstack.storage.metadata import MetadataStore
from serving.broker.service import BrokerService
from serving.broker.store.cache_database import CACHE_FILE, close_cache_database, open_cache_database
from serving.broker.store.segment_cache import SEGMENT_COLUMN
from tests.fixtures.broker import WIKI_SCHEMA, index_and_publish, open_test_deep_storage, wiki_table

COUNT = 'SELECT COUNT(*), SUM("added") FROM wiki'


@pytest.fixture
def home(settings: Settings) -> Iterator[tuple[Settings, Any, Any]]:
    settings.home.mkdir(parents=True, exist_ok=True)
    metadata = MetadataStore.from_url(settings.metadata_url)
    metadata.create_tables()
    deep = open_test_deep_storage(settings)
    try:
        yield settings, metadata, deep
    finally:
        metadata.close()


def _broker(settings: Settings, metadata: Any, deep: Any) -> BrokerService:
    svc = BrokerService(settings, metadata, deep)
    svc.refresh(force=True)
    return svc


def _answer(svc: BrokerService) -> tuple[Any, ...]:
    with svc.snapshot() as (cur, _):
        return cur.execute(COUNT).fetchone()  # type: ignore[return-value]


def test_a_restart_serves_the_cache_without_fetching(home: tuple[Settings, Any, Any]) -> None:
    settings, metadata, deep = home
    index_and_publish(metadata, deep, wiki_table(), WIKI_SCHEMA)
    svc = _broker(settings, metadata, deep)
    before = _answer(svc)
    assert before[0] == 7
    cache = settings.home / "segment-cache"
    assert (cache / CACHE_FILE).is_file()
    assert not list(cache.rglob("*.parquet")), "the download is removed once its rows are in the cache"
    svc.stop()

    # deep storage gone: only the cache can answer
    shutil.rmtree(settings.home / "deep-storage")
    again = _broker(settings, metadata, deep)
    try:
        assert _answer(again) == before
        assert set(again.cache.loaded()) == {s.identifier for s in metadata.segments(used=True)}
    finally:
        again.stop()


def test_an_overshadowed_segment_leaves_the_cache_for_good(home: tuple[Settings, Any, Any]) -> None:
    settings, metadata, deep = home
    old = index_and_publish(metadata, deep, wiki_table(), WIKI_SCHEMA, version="v1")
    svc = _broker(settings, metadata, deep)
    new = index_and_publish(metadata, deep, wiki_table(), WIKI_SCHEMA, version="v2")
    svc.refresh(force=True)
    assert _answer(svc)[0] == 7
    assert set(svc.cache.loaded()) == {s.identifier for s in new}
    svc.stop()
    with duckdb.connect(str(settings.home / "segment-cache" / CACHE_FILE), read_only=True) as con:
        listed = {r[0] for r in con.execute("SELECT segment_id FROM __rs_segment_cache").fetchall()}
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        (table,) = [t for t in tables if t.startswith("__ds_")]  # the datasource's one table
        held = con.execute(f"SELECT count(DISTINCT {SEGMENT_COLUMN}), count(*) FROM {table}").fetchone()
    assert listed == {s.identifier for s in new} and not listed & {s.identifier for s in old}
    assert held == (len(new), 7), "the old version's rows are deleted"


def test_what_a_crash_left_is_dropped_at_open(home: tuple[Settings, Any, Any]) -> None:
    settings, metadata, deep = home
    index_and_publish(metadata, deep, wiki_table(), WIKI_SCHEMA)
    svc = _broker(settings, metadata, deep)
    before = _answer(svc)
    svc.stop()
    path = settings.home / "segment-cache" / CACHE_FILE
    with duckdb.connect(str(path)) as con:  # a load cut off before its catalog row, a listed table lost
        con.execute("CREATE TABLE __seg_99 AS SELECT 1 AS x")
        con.execute("CREATE VIEW stale AS SELECT * FROM __seg_99")
        info = con.execute("SELECT info FROM __rs_segment_cache LIMIT 1").fetchone()[0]  # type: ignore[index]
        record = json.loads(info)
        record["table"] = "__seg_77"
        con.execute("INSERT INTO __rs_segment_cache VALUES (?, ?)", [record["segment"]["identifier"] + "x",
                                                                   json.dumps(record)])
        con.execute("INSERT INTO __rs_segment_cache VALUES (?, ?)", [record["segment"]["identifier"], info])
        con.execute("INSERT INTO __rs_segment_cache VALUES ('bad', 'not json')")
    again = _broker(settings, metadata, deep)
    try:
        assert _answer(again) == before
        with again.snapshot() as (cur, _):
            tables = {r[0] for r in cur.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
            views = {r[0] for r in cur.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
            listed = cur.execute("SELECT count(*) FROM __rs_segment_cache").fetchone()[0]  # type: ignore[index]
        assert "__seg_99" not in tables and "stale" not in views
        assert listed == len(metadata.segments(used=True)) == len(again.cache.loaded())
    finally:
        again.stop()


def test_an_unreadable_cache_file_starts_empty(home: tuple[Settings, Any, Any]) -> None:
    settings, metadata, deep = home
    index_and_publish(metadata, deep, wiki_table(), WIKI_SCHEMA)
    cache = settings.home / "segment-cache"
    cache.mkdir(parents=True)
    (cache / CACHE_FILE).write_bytes(b"this is not a DuckDB file" * 1000)
    svc = _broker(settings, metadata, deep)
    try:
        assert _answer(svc)[0] == 7
    finally:
        svc.stop()


def test_a_second_broker_on_one_home_gets_a_private_cache(home: tuple[Settings, Any, Any]) -> None:
    settings, metadata, deep = home
    index_and_publish(metadata, deep, wiki_table(), WIKI_SCHEMA)
    first = _broker(settings, metadata, deep)
    second = _broker(settings, metadata, deep)
    cache = settings.home / "segment-cache"
    try:
        assert _answer(first) == _answer(second)
        private = second._database.path
        assert private is not None and private.name != CACHE_FILE and private.is_file()
    finally:
        second.stop()
        first.stop()
    assert not private.exists()
    assert [p.name for p in cache.glob("*.duckdb")] == [CACHE_FILE]


def test_a_dead_brokers_private_cache_is_swept(settings: Settings) -> None:
    cache = settings.home / "segment-cache"
    cache.mkdir(parents=True)
    dead = cache / "segments-999999999-0123456789ab.duckdb"
    dead.write_bytes(b"x")
    (cache / "segments-999999999-0123456789ab.downloads").mkdir()
    db = open_cache_database(cache, memory_limit="256MiB")
    try:
        assert db.shared and not dead.exists()
        assert not (cache / "segments-999999999-0123456789ab.downloads").exists()
    finally:
        close_cache_database(db)


def test_the_cache_database_stays_locked(settings: Settings) -> None:
    cache = settings.home / "segment-cache"
    db = open_cache_database(cache, memory_limit="256MiB")
    try:
        for stmt in (f"ATTACH '{cache / 'other.duckdb'}' AS other", "SET memory_limit = '64GiB'",
                     f"COPY (SELECT 1) TO '{cache / 'out.csv'}'", "SELECT * FROM read_csv('/etc/passwd')"):
            with pytest.raises(duckdb.Error):
                db.connection.execute(stmt)
    finally:
        close_cache_database(db)


def test_segments_share_their_datasource_table_unless_a_type_differs(home: tuple[Settings, Any, Any]) -> None:
    settings, metadata, deep = home
    table = wiki_table()
    day1, day2 = table.slice(0, 4), table.slice(4)
    index_and_publish(metadata, deep, day1, WIKI_SCHEMA)
    # day 2 indexed with ns as a string dimension: its column type differs from the datasource table's
    as_string = {**WIKI_SCHEMA, "dimensionsSpec": {"dimensions": ["page", "user", "country", "ns"]}}
    day2 = day2.set_column(day2.schema.get_field_index("ns"), "ns", day2.column("ns").cast("string"))
    index_and_publish(metadata, deep, day2, as_string)
    svc = _broker(settings, metadata, deep)
    try:
        loaded = sorted(svc.cache.loaded().values(), key=lambda ls: ls.segment.interval.start)
        assert loaded[0].number is not None and loaded[0].table.startswith("__ds_")
        assert loaded[1].number is None and loaded[1].table.startswith("__seg_"), "a table of its own"
        with svc.snapshot() as (cur, _):
            assert cur.execute(COUNT).fetchone() == (7, 56)
            rows = cur.execute('SELECT "ns", COUNT(*) FROM wiki GROUP BY 1 ORDER BY 1').fetchall()
        assert rows == [("0", 4), ("1", 2), ("4", 1)]
        # a third segment of the first kind joins the datasource table
        later = day1.set_column(0, "ts", pa.array(["2024-01-03T00:10:00Z"] * 4))
        index_and_publish(metadata, deep, later, WIKI_SCHEMA)
        svc.refresh(force=True)
        third = [ls for ls in svc.cache.loaded().values() if ls.segment.interval.start > loaded[1].segment.interval.start]
        assert third[0].table == loaded[0].table and third[0].number > loaded[0].number  # type: ignore[operator]
        assert _answer(svc)[0] == 10  # day 3: its 4 events roll up into 3 rows at one hour
    finally:
        svc.stop()


def test_segment_ranges_never_cover_a_segment_that_is_not_wanted() -> None:
    from serving.broker.store.views import _runs

    # 4 is held (overshadowed, not dropped yet) but not visible: it splits the ranges
    assert _runs((1, 2, 3, 4, 5, 9), {1, 2, 3, 5, 9}) == [(1, 3), (5, 9)]
    assert _runs((2, 7), {2, 7}) == [(2, 7)]  # 3…6 belong to other tables
    assert _runs((1, 2, 3), {2}) == [(2, 2)]
    assert _runs((1, 2), set()) == []


def test_a_segment_beyond_the_cache_budget_stays_unavailable(home: tuple[Settings, Any, Any]) -> None:
    settings, metadata, deep = home
    segs = index_and_publish(metadata, deep, wiki_table(), WIKI_SCHEMA)
    budget = max(s.size for s in segs) + 1  # room for one segment, not two
    small = settings.model_copy(update={"server": settings.server.model_copy(update={"segment_cache_bytes": budget})})
    svc = _broker(small, metadata, deep)
    try:
        assert len(svc.cache.loaded()) == 1 < len(segs)
        states = {r["segment_id"]: r["is_available"] for r in svc.segment_states()}
        assert sorted(states.values()) == [0, 1]
    finally:
        svc.stop()
