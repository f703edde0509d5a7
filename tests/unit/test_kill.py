"""Kill deletes rows and files of UNUSED segments inside the interval, and nothing else: never a used
segment, never one partly outside the interval, never files a used segment points into, never a
segment marked used while the kill runs. Dry runs change nothing. The automatic duty is off by default."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from radstack.config import Settings
from radstack.storage.deep_storage.local import LocalDeepStorage
from radstack.storage.kill import (
    find_kill_candidates,
    kill_duty,
    kill_unused_segments,
    segment_folder,
)
from radstack.storage.metadata import MetadataStore
from radstack.storage.publish import publish
from radstack.storage.segment_format import segment_data_key
from radstack.storage.segments import DataSegment, ShardSpec
from radstack.time.intervals import Interval, parse_instant

DAY = 86_400_000
T0 = parse_instant("2024-01-01T00:00:00Z")


@pytest.fixture
def env(tmp_path: Path) -> Any:
    store = MetadataStore.from_url(f"sqlite:///{tmp_path / 'meta.db'}")
    store.create_tables()
    deep = LocalDeepStorage(tmp_path / "deep")
    yield store, deep
    store.close()


def make(deep: LocalDeepStorage, ds: str, day: int, version: str, pn: int = 0, days: int = 1) -> DataSegment:
    seg = DataSegment(ds, Interval(T0 + day * DAY, T0 + (day + days) * DAY), version,
                      shard_spec=ShardSpec("numbered", pn, 0), size=4)
    spec = deep.put_bytes(b"PAR1", segment_data_key(seg.id))
    return seg.with_load_spec(spec, size=4)


def files_of(deep: LocalDeepStorage, seg: DataSegment) -> list[str]:
    folder = segment_folder(deep, seg)
    assert folder is not None
    return deep.list(folder)


def test_kill_removes_rows_and_files_only_for_unused_segments_in_the_interval(env: Any) -> None:
    store, deep = env
    old = [make(deep, "ds", d, "v1") for d in range(5)]
    new = [make(deep, "ds", d, "v2") for d in range(5)]
    wide = make(deep, "ds", 3, "v0", days=4)  # unused, but reaches outside the kill interval
    other = [make(deep, "other", d, "v1") for d in range(5)]
    publish(store, deep, old + new + [wide] + other)
    store.mark_unused([s.identifier for s in old] + [wide.identifier] + [s.identifier for s in other])
    for s in old + new + [wide] + other:
        assert len(files_of(deep, s)) == 2  # data.parquet + descriptor.json

    report = kill_unused_segments(store, deep, "ds", Interval(T0, T0 + 5 * DAY))
    assert sorted(report.segments) == sorted(s.identifier for s in old)
    assert len(report.folders) == 5 and report.bytes == 20 and not report.errors
    for s in old:
        assert store.get_segment(s.identifier) is None
        assert deep.list(segment_folder(deep, s) or "") == []
    for s in new:  # used: untouched
        row = store.get_segment(s.identifier)
        assert row is not None and row.used and len(files_of(deep, s)) == 2
    for s in [wide, *other]:  # unused but outside the interval / another datasource: untouched
        row = store.get_segment(s.identifier)
        assert row is not None and not row.used and len(files_of(deep, s)) == 2


def test_dry_run_changes_nothing(env: Any) -> None:
    store, deep = env
    segs = [make(deep, "ds", d, "v1") for d in range(3)]
    publish(store, deep, segs)
    store.mark_unused([segs[0].identifier, segs[1].identifier])
    before = sorted(deep.list("segments/"))
    report = kill_unused_segments(store, deep, "ds", Interval(T0, T0 + 10 * DAY), dry_run=True)
    assert report.dry_run and sorted(report.segments) == sorted([segs[0].identifier, segs[1].identifier])
    assert len(report.folders) == 2
    assert sorted(deep.list("segments/")) == before
    assert len(store.segments("ds", used=None)) == 3


def test_files_a_used_segment_points_into_are_kept(env: Any) -> None:
    store, deep = env
    used = make(deep, "ds", 0, "v2")
    # an unused row whose loadSpec points at the used segment's file (e.g. re-published metadata)
    alias = DataSegment("ds", used.interval, "v1", dict(used.load_spec), shard_spec=ShardSpec("numbered", 0, 0))
    publish(store, deep, [used, alias])
    store.mark_unused([alias.identifier])
    report = kill_unused_segments(store, deep, "ds", Interval(T0, T0 + DAY))
    assert report.segments == [alias.identifier] and report.kept_files == [alias.identifier]
    assert report.folders == []
    assert store.get_segment(alias.identifier) is None
    assert deep.exists(deep.key_for_load_spec(used.load_spec))
    assert store.get_segment(used.identifier).used  # type: ignore[union-attr]


def test_a_segment_marked_used_during_the_kill_survives(env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store, deep = env
    segs = [make(deep, "ds", d, "v1") for d in range(3)]
    publish(store, deep, segs)
    store.mark_unused([s.identifier for s in segs])
    import radstack.storage.kill as kill_mod

    real = kill_mod.find_kill_candidates

    def racing(*a: Any, **kw: Any) -> Any:
        rows = real(*a, **kw)
        store.mark_used([segs[1].identifier])  # someone re-enables it right after the candidates were read
        return rows

    monkeypatch.setattr(kill_mod, "find_kill_candidates", racing)
    report = kill_unused_segments(store, deep, "ds", Interval(T0, T0 + 3 * DAY))
    assert report.skipped == [segs[1].identifier]
    assert sorted(report.segments) == sorted([segs[0].identifier, segs[2].identifier])
    row = store.get_segment(segs[1].identifier)
    assert row is not None and row.used and len(files_of(deep, segs[1])) == 2


def test_versions_limit_and_last_updated_filters(env: Any) -> None:
    store, deep = env
    segs = [make(deep, "ds", d, v) for d in range(4) for v in ("v1", "v2")]
    publish(store, deep, segs)
    store.mark_unused([s.identifier for s in segs])
    iv = Interval(T0, T0 + 4 * DAY)
    assert len(find_kill_candidates(store, "ds", iv, versions=["v1"])) == 4
    assert len(find_kill_candidates(store, "ds", iv, limit=3)) == 3
    assert find_kill_candidates(store, "ds", iv, max_used_status_last_updated_ms=0) == []
    report = kill_unused_segments(store, deep, "ds", iv, versions=["v2"])
    assert sorted(report.segments) == sorted(s.identifier for s in segs if s.version == "v2")
    assert {s.version for s in store.segments("ds", used=None)} == {"v1"}


@pytest.mark.parametrize("seed", range(8))
def test_random_histories_never_lose_a_used_segment(env: Any, seed: int) -> None:
    store, deep = env
    rng = random.Random(seed)
    segs = []
    for d in range(12):
        for v in range(rng.randint(1, 3)):
            for pn in range(rng.randint(1, 2)):
                segs.append(make(deep, rng.choice(["a", "b"]), d, f"v{v}", pn, days=rng.choice([1, 1, 2])))
    # dedupe ids (same ds/day/version/pn drawn twice)
    segs = list({s.identifier: s for s in segs}.values())
    publish(store, deep, segs)
    unused = {s.identifier for s in segs if rng.random() < 0.5}
    store.mark_unused(unused)
    lo = rng.randint(0, 6)
    iv = Interval(T0 + lo * DAY, T0 + (lo + rng.randint(1, 8)) * DAY)
    for ds in ("a", "b"):
        kill_unused_segments(store, deep, ds, iv)
    for s in segs:
        row = store.get_segment(s.identifier)
        gone = s.identifier in unused and iv.contains(s.interval)
        if gone:
            assert row is None and deep.list(segment_folder(deep, s) or "") == []
        else:
            assert row is not None and row.used == (s.identifier not in unused)
            assert len(files_of(deep, s)) == 2


def _settings(**kill: Any) -> Settings:
    return Settings.model_validate({"coordinator": {"kill": kill}})


def test_kill_duty_is_off_by_default_and_respects_retain_and_buffer(env: Any) -> None:
    store, deep = env
    segs = [make(deep, "ds", d, "v1") for d in range(10)]
    publish(store, deep, segs)
    store.mark_unused([s.identifier for s in segs])
    now = T0 + 10 * DAY
    from radstack.config import load_settings

    assert kill_duty(store, deep, load_settings(env={}), now_ms=now + 1000 * DAY) == []  # default: off
    assert len(store.segments("ds", used=None)) == 10
    # buffer: they were marked unused just now (wall clock), so P30D of buffer protects them all
    on = _settings(on=True, duration_to_retain="P3D", buffer_period="P30D", period_seconds=0)
    reports = kill_duty(store, deep, on, now_ms=now)
    assert all(not r.segments for r in reports) and len(store.segments("ds", used=None)) == 10
    # no buffer: segments whose interval ended at least P3D before now go, at most max_segments
    on = _settings(on=True, duration_to_retain="P3D", buffer_period="PT0S", period_seconds=0, max_segments=4)
    reports = kill_duty(store, deep, on, now_ms=_wall_ms())
    # now is the wall clock (>> 2024), so every segment is old enough: max_segments caps the pass
    assert sum(len(r.segments) for r in reports) == 4
    dry = _settings(on=True, duration_to_retain="P3D", buffer_period="PT0S", period_seconds=0, dry_run=True)
    reports = kill_duty(store, deep, dry, now_ms=_wall_ms())
    assert sum(len(r.segments) for r in reports) == 6 and len(store.segments("ds", used=None)) == 6
    # each pass that found something to kill (not the one the buffer held back) is a coordinator task (#51)
    kills = [t for t in store.list_tasks() if t.type == "kill"]
    assert [t.status for t in kills] == ["SUCCESS"] * 2 and {t.payload["startedBy"] for t in kills} == {"coordinator"}
    newest = kills[0]
    assert newest.report is not None and newest.report["dryRun"] is True and newest.report["numKilledSegments"] == 6
    assert "would kill 6 segment(s)" in Path(newest.report["log"]).read_text()


def test_kill_duty_runs_once_per_period(env: Any) -> None:
    store, deep = env
    segs = [make(deep, "ds", d, "v1") for d in range(4)]
    publish(store, deep, segs)
    store.mark_unused([s.identifier for s in segs])
    s = _settings(on=True, duration_to_retain="P1D", buffer_period="PT0S", period_seconds=3600, max_segments=1)
    now = _wall_ms()
    assert sum(len(r.segments) for r in kill_duty(store, deep, s, now_ms=now)) == 1
    assert kill_duty(store, deep, s, now_ms=now + 1000) == []  # within the period
    assert sum(len(r.segments) for r in kill_duty(store, deep, s, now_ms=now + 3_600_000)) == 1


def _wall_ms() -> int:
    import time

    return time.time_ns() // 1_000_000
