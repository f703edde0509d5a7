"""MetadataStore against both backends: SQLite (fast) and a real PostgreSQL server (slow)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from radstack.storage.metadata import (
    DEFAULT_RULES,
    MetadataStore,
    SegmentExistsError,
    TaskExistsError,
    normalize_url,
)
from radstack.storage.segments import DataSegment, ShardSpec
from radstack.time.intervals import Interval, format_instant, parse_instant

REPO = Path(__file__).resolve().parents[2]


def seg(iv: str, version: str, pn: int = 0, parts: int = 1, ds: str = "wiki", typ: str = "numbered") -> DataSegment:
    return DataSegment(
        ds, Interval.parse(iv), version, load_spec={"type": "local", "path": f"/x/{pn}"},
        dimensions=("page", "user"), metrics=("count",), shard_spec=ShardSpec(typ, pn, parts), size=10 + pn,
        num_rows=3,
    )


def ids(segments: list[DataSegment]) -> list[str]:
    return [s.identifier for s in segments]


def test_schema_is_druids(metadata_store: MetadataStore) -> None:
    metadata_store.create_tables()  # idempotent
    insp = sa.inspect(metadata_store.engine)
    cols = [c["name"].lower() for c in insp.get_columns("druid_segments")]
    assert cols == [
        "id", "datasource", "created_date", "start", "end", "partitioned", "version", "used", "payload",
        "used_status_last_updated",
    ]
    assert insp.get_pk_constraint("druid_segments")["constrained_columns"] == ["id"]
    idx = {i["name"]: [c.lower() for c in i["column_names"]] for i in insp.get_indexes("druid_segments")}
    assert idx["idx_druid_segments_used"] == ["used"]
    assert idx["idx_druid_segments_datasource_used_end_start"] == ["datasource", "used", "end", "start"]
    for table, expected in {
        "druid_rules": {"id", "datasource", "version", "payload"},
        "druid_tasks": {"id", "created_date", "datasource", "payload", "status_payload", "active", "type"},
        "druid_config": {"name", "payload"},
        "radstack_state": {"key", "value", "updated"},
    }.items():
        assert expected <= {c["name"].lower() for c in insp.get_columns(table)}, table
    # Druid stores ISO strings and the payload as bytes
    s = seg("2024-01-01/2024-01-02", "v1")
    metadata_store.publish([s])
    with metadata_store.engine.connect() as conn:
        row = conn.execute(sa.text("SELECT start, payload, created_date FROM druid_segments")).one()
    assert row[0] == "2024-01-01T00:00:00.000Z"
    assert bytes(row[1]) == s.to_payload().encode()
    assert row[2].endswith("Z") and len(row[2]) == 24


def test_publish_and_read(metadata_store: MetadataStore) -> None:
    a = [seg("2024-01-01/2024-01-02", "v1", p, 2) for p in range(2)]
    b = [seg("2024-01-02/2024-01-03", "v1"), seg("2024-01-01/2024-01-02", "v1", ds="other")]
    before = int(time.time() * 1000) - 1
    metadata_store.publish(a)
    metadata_store.publish(b)
    assert ids(metadata_store.segments("wiki")) == ids(a) + ids(b[:1])
    assert sorted(ids(metadata_store.segments())) == sorted(ids(a + b))
    assert metadata_store.segments("wiki")[1] == a[1]
    assert metadata_store.segments("wiki")[1].load_spec == {"type": "local", "path": "/x/1"}
    assert metadata_store.data_sources() == ["other", "wiki"]
    row = metadata_store.get_segment(a[0].identifier)
    assert row is not None and row.used and row.segment == a[0]
    assert before <= row.created_date <= int(time.time() * 1000) + 1
    assert metadata_store.get_segment("nope") is None
    # interval: overlapping, not touching
    got = metadata_store.segments("wiki", interval=Interval.parse("2024-01-02T05:00Z/2024-01-02T06:00Z"))
    assert ids(got) == ids(b[:1])
    got = metadata_store.segments("wiki", interval=Interval.parse("2023-12-31/2024-01-01"))
    assert got == []
    got = metadata_store.segments("wiki", interval=Interval.parse("2023-12-31/2024-01-01T00:00:00.001Z"))
    assert ids(got) == ids(a)


def test_eternity_segments_match_interval_filter(metadata_store: MetadataStore) -> None:
    eternal = DataSegment("wiki", Interval.eternity(), "v1", shard_spec=ShardSpec("numbered", 0, 1))
    metadata_store.publish([eternal])
    assert ids(metadata_store.segments("wiki", interval=Interval.parse("2024-01-01/2024-01-02"))) == [
        eternal.identifier
    ]
    assert ids(metadata_store.segments("wiki", interval=Interval.eternity())) == [eternal.identifier]


def test_publish_existing_id_raises_and_publishes_nothing(metadata_store: MetadataStore) -> None:
    old = seg("2024-01-01/2024-01-02", "v1")
    metadata_store.publish([old])
    token = metadata_store.change_token()
    new = seg("2024-01-02/2024-01-03", "v1")
    with pytest.raises(SegmentExistsError) as ei:
        metadata_store.publish([new, old], mark_unused_ids=[old.identifier])
    assert ei.value.ids == [old.identifier]
    assert ids(metadata_store.segments(used=None)) == [old.identifier]
    assert metadata_store.get_segment(old.identifier).used  # type: ignore[union-attr]
    assert metadata_store.change_token() == token


def test_publish_failing_mid_transaction_leaves_nothing(metadata_store: MetadataStore) -> None:
    keep = seg("2024-01-01/2024-01-02", "v0")
    metadata_store.publish([keep])
    batch = [seg("2024-01-01/2024-01-02", "v1", p, 3) for p in range(3)]
    # the duplicate is only found by the database, after the first rows were inserted
    with pytest.raises(SegmentExistsError):
        metadata_store.publish([*batch, batch[1]], mark_unused_ids=[keep.identifier])
    assert ids(metadata_store.segments(used=None)) == [keep.identifier]
    assert metadata_store.get_segment(keep.identifier).used  # type: ignore[union-attr]
    metadata_store.publish(batch)  # the store is fine afterwards
    assert len(metadata_store.segments()) == 4


_CRASHER = textwrap.dedent(
    """
    import sys, time
    from radstack.time.intervals import Interval
    from radstack.storage.metadata import MetadataStore
    from radstack.storage.segments import DataSegment, ShardSpec

    class Crashing(MetadataStore):
        def _bump_seq(self, conn, now):  # runs inside publish's transaction, after the inserts
            super()._bump_seq(conn, now)
            print("inside", flush=True)
            time.sleep(600)

    store = Crashing.from_url(sys.argv[1])
    segs = [DataSegment("wiki", Interval.parse("2024-02-01/2024-02-02"), "v9",
                        shard_spec=ShardSpec("numbered", p, 4)) for p in range(4)]
    store.publish(segs, mark_unused_ids=[sys.argv[2]])
    """
)


def test_process_killed_mid_publish_leaves_nothing(metadata_store: MetadataStore, metadata_url: str) -> None:
    keep = seg("2024-02-01/2024-02-02", "v1")
    metadata_store.publish([keep])
    token = metadata_store.change_token()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CRASHER, metadata_url, keep.identifier],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == b"inside", line + proc.stdout.read()
        # while the transaction is open, readers see none of it
        assert ids(metadata_store.segments(used=None)) == [keep.identifier]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert ids(metadata_store.segments(used=None)) == [keep.identifier]
    assert metadata_store.get_segment(keep.identifier).used  # type: ignore[union-attr]
    assert metadata_store.change_token() == token
    # the dead writer's lock is gone: writing works
    metadata_store.publish([seg("2024-02-01/2024-02-02", "v2")])
    assert len(metadata_store.segments()) == 2


def test_publish_marks_unused_atomically_and_used_flags(metadata_store: MetadataStore) -> None:
    rt = [seg("2024-01-01/2024-01-02", "v0", p, 0) for p in range(3)]
    metadata_store.publish(rt)
    t0 = metadata_store.change_token()
    batch = [seg("2024-01-01/2024-01-02", "v1")]
    metadata_store.publish(batch, mark_unused_ids=ids(rt[:2]) + ["missing"])
    t1 = metadata_store.change_token()
    assert t1 != t0
    assert ids(metadata_store.segments()) == ids(rt[2:]) + ids(batch)
    assert ids(metadata_store.segments(used=False)) == ids(rt[:2])
    rows = {r.id: r for r in metadata_store.segment_rows(used=None)}
    assert not rows[rt[0].identifier].used
    assert rows[rt[0].identifier].used_status_last_updated >= rows[rt[0].identifier].created_date  # type: ignore[operator]

    assert metadata_store.mark_used([rt[0].identifier, rt[2].identifier]) == 1  # rt[2] already used
    t2 = metadata_store.change_token()
    assert t2 != t1
    assert metadata_store.mark_unused(ids(rt)) == 2
    assert metadata_store.mark_unused(ids(rt)) == 0
    t3 = metadata_store.change_token()
    assert t3 != t2
    assert metadata_store.change_token() == t3  # reading does not change it
    assert metadata_store.data_sources() == ["wiki"]
    assert metadata_store.delete_segments(ids(rt) + ["missing"]) == 3
    assert metadata_store.change_token() != t3
    assert ids(metadata_store.segments(used=None)) == ids(batch)
    metadata_store.mark_unused(ids(batch))
    assert metadata_store.data_sources() == []
    assert metadata_store.data_sources(used_only=False) == ["wiki"]


def test_rules(metadata_store: MetadataStore) -> None:
    assert metadata_store.get_rules("_default") == DEFAULT_RULES
    assert metadata_store.get_rules("wiki") is None
    r1 = [{"type": "loadByPeriod", "period": "P1M"}, {"type": "dropForever"}]
    r2 = [{"type": "loadForever"}]
    metadata_store.set_rules("wiki", r1)
    metadata_store.set_rules("wiki", r2)  # same millisecond is fine: versions stay distinct
    assert metadata_store.get_rules("wiki") == r2
    assert [r for _, r in metadata_store.rules_history("wiki")] == [r2, r1]
    assert metadata_store.all_rules() == {"_default": DEFAULT_RULES, "wiki": r2}
    metadata_store.create_tables()
    assert len(metadata_store.rules_history("_default")) == 1


def test_tasks(metadata_store: MetadataStore) -> None:
    t1 = metadata_store.insert_task("index_wiki_1", type="index_parallel", datasource="wiki", payload={"a": 1})
    assert t1.status == "RUNNING" and t1.active
    with pytest.raises(TaskExistsError):
        metadata_store.insert_task("index_wiki_1", type="index_parallel", datasource="wiki", payload={})
    time.sleep(0.002)
    metadata_store.insert_task("kill_wiki_2", type="kill", datasource="wiki", payload={"b": 2})
    time.sleep(0.002)
    metadata_store.insert_task("index_other_3", type="index", datasource="other", payload={})
    done = metadata_store.update_task(
        "index_wiki_1", status="SUCCESS", duration_ms=1234, report={"ingestionStatsAndErrors": {"rows": 5}}
    )
    assert (done.status, done.active, done.duration_ms, done.report) == (
        "SUCCESS", False, 1234, {"ingestionStatsAndErrors": {"rows": 5}}
    )
    assert done.payload == {"a": 1} and done.type == "index_parallel"
    metadata_store.update_task("kill_wiki_2", status="FAILED", error_msg="boom")
    failed = metadata_store.get_task("kill_wiki_2")
    assert failed is not None and failed.error_msg == "boom" and failed.duration_ms is None
    assert failed.status_json()["status"] == "FAILED"
    assert metadata_store.get_task("nope") is None
    with pytest.raises(KeyError):
        metadata_store.update_task("nope", status="SUCCESS")
    with pytest.raises(ValueError):
        metadata_store.update_task("kill_wiki_2", status="DONE")

    def names(**kw: object) -> list[str]:
        return [t.id for t in metadata_store.list_tasks(**kw)]  # type: ignore[arg-type]

    assert names() == ["index_other_3", "kill_wiki_2", "index_wiki_1"]
    assert names(datasource="wiki") == ["kill_wiki_2", "index_wiki_1"]
    assert names(state="RUNNING") == ["index_other_3"]
    assert names(state="running") == ["index_other_3"]
    assert names(state="complete") == ["kill_wiki_2", "index_wiki_1"]
    assert names(state="SUCCESS") == ["index_wiki_1"]
    assert names(state="FAILED", datasource="other") == []
    assert names(limit=2) == ["index_other_3", "kill_wiki_2"]


def test_config_and_state(metadata_store: MetadataStore) -> None:
    assert metadata_store.get_config("coordinator.compaction.config") is None
    metadata_store.set_config("coordinator.compaction.config", {"compactionConfigs": []})
    metadata_store.set_config("coordinator.compaction.config", {"compactionConfigs": [{"dataSource": "wiki"}]})
    assert metadata_store.get_config("coordinator.compaction.config") == {"compactionConfigs": [{"dataSource": "wiki"}]}
    assert metadata_store.get_state("watermark.wiki", 0) == 0
    metadata_store.put_state("watermark.wiki", {"offset": 5})
    metadata_store.put_state("watermark.wiki", {"offset": 7, "at": "2024-01-01T00:00:00.000Z"})
    assert metadata_store.get_state("watermark.wiki") == {"offset": 7, "at": "2024-01-01T00:00:00.000Z"}
    with pytest.raises(ValueError):
        metadata_store.put_state("druid_segments.seq", 1)


def test_concurrent_writers_and_readers_see_whole_batches(metadata_store: MetadataStore) -> None:
    errors: list[BaseException] = []
    stop = threading.Event()
    batch_size = 4

    def writer(w: int) -> None:
        try:
            for i in range(12):
                version = f"v{w}_{i:03d}"
                metadata_store.publish(
                    [seg(f"2024-03-{w + 1:02d}/2024-03-{w + 2:02d}", version, p, batch_size) for p in range(batch_size)]
                )
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def reader() -> None:
        try:
            while not stop.is_set():
                counts: dict[str, int] = {}
                for s in metadata_store.segments():
                    counts[s.version] = counts.get(s.version, 0) + 1
                bad = {v: n for v, n in counts.items() if n != batch_size}
                assert not bad, f"partial batch visible: {bad}"
                metadata_store.change_token()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join(timeout=120)
    stop.set()
    for t in readers:
        t.join(timeout=60)
    assert not errors, errors
    assert len(metadata_store.segments()) == 3 * 12 * batch_size


def test_change_token_is_cheap_and_exact(metadata_store: MetadataStore) -> None:
    t0 = metadata_store.change_token()
    a = seg("2024-01-01/2024-01-02", "v1")
    metadata_store.publish([a])
    t1 = metadata_store.change_token()
    metadata_store.mark_unused([a.identifier])
    t2 = metadata_store.change_token()
    metadata_store.mark_used([a.identifier])
    t3 = metadata_store.change_token()
    assert len({t0, t1, t2, t3}) == 4


def test_url_normalization(tmp_path: Path) -> None:
    assert normalize_url("postgresql://u@h:5/db") == "postgresql+psycopg://u@h:5/db"
    assert normalize_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url(str(tmp_path / "m.db")) == f"sqlite:///{tmp_path / 'm.db'}"
    nested = tmp_path / "a" / "b" / "metadata.db"
    with MetadataStore.from_url(f"sqlite:///{nested}") as store:
        store.create_tables()
        store.publish([seg("2024-01-01/2024-01-02", "v1")])
    with MetadataStore.from_url(f"sqlite:///{nested}") as again:
        assert len(again.segments()) == 1
        with again.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_in_memory_sqlite_shared_across_threads() -> None:
    store = MetadataStore.from_url("sqlite://")
    store.create_tables()
    out: list[int] = []

    def work(i: int) -> None:
        store.publish([seg("2024-01-01/2024-01-02", f"v{i}")])
        out.append(len(store.segments()))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.segments()) == 4 and sorted(out)[-1] == 4
    store.close()


def test_created_date_roundtrip_format() -> None:
    # created_date is written with format_instant and read back with parse_instant
    now = 1_700_000_000_123
    assert parse_instant(format_instant(now)) == now


_CREATOR = textwrap.dedent("""
    import sys, time
    from radstack.storage.metadata import MetadataStore
    store = MetadataStore.from_url(sys.argv[1])
    while time.time() < float(sys.argv[2]):  # every process starts creating at the same moment
        time.sleep(0.001)
    store.create_tables()
    print(len(store.segments()))
""")


def test_processes_starting_at_once_on_a_new_database_all_create_the_tables(metadata_url: str) -> None:
    """A cluster's server, archiver and drivers start together on an empty metadata store: each sees
    the tables missing. On PostgreSQL they raced to CREATE TABLE and all but one crashed with a unique
    violation (found on the simulated hosts, #36); now they take turns and all start."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.time() + 4  # after the interpreters have imported radstack
    procs = [subprocess.Popen([sys.executable, "-c", _CREATOR, metadata_url, str(start)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]  # fmt: skip
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [err[-1500:] for _out, err in outs]
    assert [out.strip() for out, _err in outs] == ["0"] * 6
