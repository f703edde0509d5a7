"""Coordinator duties against a real (SQLite) metadata store and a real local deep storage."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.metadata import MetadataStore
from radstack.storage.segments import DataSegment, ShardSpec, segment_path
from radstack.time.intervals import Interval
from serving.coordinator.duties.orphan_files import collect_orphan_segment_files
from serving.coordinator.duties.overshadowed import mark_overshadowed_unused
from serving.coordinator.loop import run_duties

DAY = "2024-01-01/2024-01-02"


def seg(iv: str, version: str, pn: int = 0, parts: int = 1, ds: str = "wiki") -> DataSegment:
    return DataSegment(ds, Interval.parse(iv), version, shard_spec=ShardSpec("numbered", pn, parts))


def hour(h: int) -> str:
    return f"2024-01-01T{h:02d}:00:00Z/2024-01-01T{h + 1:02d}:00:00Z" if h < 23 else "2024-01-01T23:00:00Z/2024-01-02"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    s = MetadataStore.from_url(f"sqlite:///{tmp_path / 'metadata.db'}")
    s.create_tables()
    yield s
    s.close()


def now() -> int:
    return int(time.time() * 1000)


def test_batch_overshadows_realtime(store: MetadataStore) -> None:
    rt = [seg(hour(h), f"2024-01-01T{h:02d}:00:00.000Z", p, 0) for h in range(24) for p in range(2)]
    store.publish(rt)
    assert mark_overshadowed_unused(store) == []
    batch = [seg(DAY, "2024-01-02T01:00:00.000Z", p, 2) for p in range(2)]
    store.publish(batch[:1])  # incomplete core set: overshadows nothing
    assert mark_overshadowed_unused(store) == []
    store.publish(batch[1:])
    before = now()
    marked = mark_overshadowed_unused(store)
    assert sorted(marked) == sorted(s.identifier for s in rt)
    assert {s.identifier for s in store.segments()} == {s.identifier for s in batch}
    row = store.get_segment(rt[0].identifier)
    assert row is not None and not row.used
    assert row.used_status_last_updated is not None and row.used_status_last_updated >= before
    assert mark_overshadowed_unused(store) == []  # nothing left to do


def test_partial_cover_and_unused_overshadower(store: MetadataStore) -> None:
    day = seg(DAY, "v1")
    half = seg("2024-01-01T00:00Z/2024-01-01T12:00Z", "v2")
    store.publish([day, half])
    assert mark_overshadowed_unused(store) == []  # v1 still visible for 12–24
    other_half = seg("2024-01-01T12:00Z/2024-01-02", "v3")
    store.publish([other_half])
    store.mark_unused([other_half.identifier])  # unused rows do not overshadow
    assert mark_overshadowed_unused(store) == []
    store.mark_used([other_half.identifier])
    assert mark_overshadowed_unused(store) == [day.identifier]


def test_delay_waits_for_the_overshadowing_segments(store: MetadataStore) -> None:
    old = seg(DAY, "v1")
    store.publish([old])
    store.publish([seg(DAY, "v2")])
    t = now()
    assert mark_overshadowed_unused(store, now_ms=t, delay_ms=60_000) == []
    assert store.get_segment(old.identifier).used  # type: ignore[union-attr]
    assert mark_overshadowed_unused(store, now_ms=t + 61_000, delay_ms=60_000) == [old.identifier]


def test_datasources_are_separate_and_conflicts_do_not_block_others(store: MetadataStore) -> None:
    store.publish([seg(DAY, "v1", ds="a"), seg(DAY, "v2", ds="a")])
    # same version on overlapping intervals: a broken datasource is left alone
    store.publish([seg(DAY, "v1", ds="b"), seg(hour(3), "v1", ds="b"), seg(DAY, "v2", ds="b")])
    store.publish([seg(DAY, "v1", ds="c")])
    assert mark_overshadowed_unused(store) == [seg(DAY, "v1", ds="a").identifier]
    assert len(store.segments("b")) == 3 and len(store.segments("c")) == 1


def test_orphan_segment_files_are_collected(store: MetadataStore, tmp_path: Path) -> None:
    deep = open_deep_storage({"type": "local", "path": str(tmp_path / "deep")})
    published = seg(DAY, "v1")
    unused = seg("2024-01-02/2024-01-03", "v1")
    orphan = seg(DAY, "v2")
    young = seg(DAY, "v3")
    for s in (published, unused, orphan, young):
        base = f"segments/{segment_path(s.id)}"
        deep.put_bytes(b"PAR1", f"{base}/data.parquet")
        deep.put_bytes(s.to_payload().encode(), f"{base}/descriptor.json")
    # a published segment whose files live elsewhere (its loadSpec says where) is not an orphan
    moved_key = "segments/wiki/moved_here/v0/0/data.parquet"
    moved = seg("2024-01-03/2024-01-04", "v1").with_load_spec(deep.put_bytes(b"PAR1", moved_key))
    store.publish([published, unused, moved])
    store.mark_unused([unused.identifier])
    deep.put_bytes(b"x", "raw/topic/dt=2024-01-01/part-0.json")  # not a segment: never touched
    deep.put_bytes(b"x", "segments/stray.txt")  # not a segment folder: never touched

    newest = max(deep.modified_ms(k) for k in deep.list("segments/"))
    later = newest + 10_000
    # everything is younger than an hour: nothing goes
    assert collect_orphan_segment_files(store, deep, older_than_ms=3_600_000, now_ms=later) == []
    # the young task's files are touched again: only the old orphan goes
    time.sleep(0.05)
    deep.put_bytes(b"PAR1", f"segments/{segment_path(young.id)}/data.parquet")
    young_ms = deep.modified_ms(f"segments/{segment_path(young.id)}/data.parquet")
    orphan_dir = f"segments/{segment_path(orphan.id)}/"
    dry = collect_orphan_segment_files(store, deep, older_than_ms=young_ms - newest, now_ms=young_ms, dry_run=True)
    assert dry == [orphan_dir]
    assert deep.list(orphan_dir)
    got = collect_orphan_segment_files(store, deep, older_than_ms=young_ms - newest, now_ms=young_ms)
    assert got == [orphan_dir]
    assert deep.list(orphan_dir) == []
    for s in (published, unused, young):
        assert deep.list(f"segments/{segment_path(s.id)}/"), s.identifier
    assert deep.exists(moved_key)
    assert deep.exists("raw/topic/dt=2024-01-01/part-0.json") and deep.exists("segments/stray.txt")


def test_run_duties_reports(store: MetadataStore, settings) -> None:  # type: ignore[no-untyped-def]
    old = seg(DAY, "v1")
    store.publish([old, seg(DAY, "v2")])
    report = run_duties(store, None, settings.with_overrides({"coordinator": {"overshadowed_unused_delay_seconds": 0}}))
    assert report["mark_overshadowed_unused"] == [old.identifier] and report.errors == []
    # a failing duty (here: a database without the tables) is reported, not raised
    empty = MetadataStore.from_url(f"sqlite:///{settings.home / 'empty.db'}")
    try:
        broken = run_duties(empty, None, settings)
    finally:
        empty.close()
    assert "mark_overshadowed_unused" not in broken
    assert broken.errors[0].startswith("mark_overshadowed_unused:")
    assert [e.split(":")[0] for e in broken.errors[1:]] == ["retention"]  # the next duty ran, and failed too


def test_the_task_log_cleaner_deletes_only_old_finished_tasks_logs(store: MetadataStore, settings) -> None:  # type: ignore[no-untyped-def]
    from radstack.storage.task_records import task_log_path
    from serving.coordinator.duties.base import DutyContext
    from serving.coordinator.duties.task_logs import DUTY

    on = settings.with_overrides({"coordinator": {"kill_task_logs": {"on": True, "duration_to_retain": "P1D"}}})
    logs = {}
    for task_id, status in (("old_done", "SUCCESS"), ("old_failed", "FAILED"), ("old_running", "RUNNING"),
                            ("young_done", "SUCCESS")):
        store.insert_task(task_id, type="index_parallel", datasource="wiki", payload={}, status="RUNNING")
        if status != "RUNNING":  # young_done ran for 3 days: it finished after the retention's start
            store.update_task(task_id, status=status, duration_ms=3 * 86_400_000 if task_id == "young_done" else 1000)
        logs[task_id] = task_log_path(on, task_id)
        logs[task_id].parent.mkdir(parents=True, exist_ok=True)
        logs[task_id].write_text("log\n")
    spark_log = on.logs_dir / "task-old_done.log"  # an Overlord Spark task's output
    spark_log.write_text("spark\n")
    two_days_on = int(time.time() * 1000) + 2 * 86_400_000
    stats = DUTY.run(DutyContext(store, None, on, now_ms=two_days_on))
    assert stats == {"deleted": 3}  # old_done's two logs, old_failed's; never a running or a recent task's
    assert not logs["old_done"].exists() and not spark_log.exists() and not logs["old_failed"].exists()
    assert logs["old_running"].exists() and logs["young_done"].exists()
    assert store.get_task("old_done") is not None  # the row stays
    # once per period: a second pass right after does nothing
    assert DUTY.run(DutyContext(store, None, on, now_ms=two_days_on + 1000)) == {"deleted": 0}
    off = DUTY.run(DutyContext(store, None, settings, now_ms=two_days_on + 10**9))
    assert off == {"deleted": 0}
