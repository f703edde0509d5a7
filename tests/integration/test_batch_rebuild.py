"""The Spark rebuild from the raw archive, end to end on real Spark (local[*]) and a real metadata store:
exact dedup, late events in their own hour, perfect rollup, one core set per chunk, tombstones for empty
chunks, newer versions on re-runs, closedness refusal, and failed/killed runs leaving nothing behind."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest

from radstack.intervals import Interval, format_instant, parse_instant
from tests.fixtures.batch import set_watermark, write_archive

pytestmark = pytest.mark.slow

T0 = parse_instant("2026-11-20T00:00:00Z")
HOUR = 3_600_000
SPEC = """\
dataSchema:
  dataSource: web
  timestampSpec: {column: timestamp, format: iso}
  dimensionsSpec: {dimensions: [page, country]}
  metricsSpec:
    - {type: count, name: count}
    - {type: longSum, name: bytes, fieldName: bytes}
  granularitySpec: {segmentGranularity: hour, queryGranularity: minute, rollup: true}
processing:
  topics: [web]
  eventId: id
  windowPeriod: PT10M
"""


def _events(n: int, start: int, *, seed: int = 7, prefix: str = "e") -> list[dict[str, Any]]:
    import random

    rng = random.Random(seed)
    return [
        {
            "timestamp": format_instant(start + rng.randrange(0, HOUR)),
            "id": f"{prefix}{start}-{i}",
            "page": rng.choice(["/a", "/b", "/c"]),
            "country": rng.choice(["DE", "US"]),
            "bytes": rng.randrange(1, 1000),
        }
        for i in range(n)
    ]


@pytest.fixture
def web(settings, tmp_path: Path):  # type: ignore[no-untyped-def]
    from serving.deep_storage import open_deep_storage
    from serving.metadata import MetadataStore

    settings.datasources_dir.mkdir(parents=True, exist_ok=True)
    (settings.datasources_dir / "web.yaml").write_text(SPEC)
    md = MetadataStore.from_settings(settings)
    storage = open_deep_storage(settings)
    yield settings, md, storage
    md.close()


def _truth(events: list[dict[str, Any]], chunk: Interval) -> Counter[tuple[int, str, str]]:
    """(minute, page, country) → events, deduplicated on id, for events inside ``chunk``."""
    seen: dict[str, dict[str, Any]] = {}
    for e in events:
        seen.setdefault(e["id"], e)
    out: Counter[tuple[int, str, str]] = Counter()
    for e in seen.values():
        ms = parse_instant(e["timestamp"])
        if chunk.contains_instant(ms):
            out[(ms // 60_000 * 60_000, e["page"], e["country"])] += 1
    return out


def _served_rows(md: Any, storage: Any, chunk: Interval) -> Counter[tuple[int, str, str]]:
    from batch.backfill import visible

    out: Counter[tuple[int, str, str]] = Counter()
    for seg, _part in visible(md, "web", chunk):
        if seg.is_tombstone:
            continue
        t = pq.read_table(seg.load_spec["path"]).to_pylist()
        for r in t:
            key = (int(r["__time"].timestamp() * 1000), r["page"], r["country"])
            assert key not in out, "perfect rollup: one row per (time, dims) in a batch segment set"
            out[key] += r["count"]
    return out


def test_rebuild_exact_dedup_late_tombstones_versions(web, batch_spark) -> None:  # type: ignore[no-untyped-def]
    from batch.rebuild_job import rebuild

    settings, md, storage = web
    hour0 = _events(400, T0, seed=1)
    hour2 = _events(300, T0 + 2 * HOUR, seed=2)
    late = _events(25, T0, seed=3, prefix="late")  # delivered with hour 2's traffic, event time in hour 0
    dups = hour0[:40] + hour2[10:30]
    raw = [orjson.dumps(e) for e in hour0 + hour2 + late + dups] + [b"not json", b'{"page": "/x"}']
    write_archive(storage, "web", raw, per_file=150)
    set_watermark(md, "web", T0 + 4 * HOUR)
    whole = Interval(T0, T0 + 3 * HOUR)

    res = rebuild(settings, "web", whole, spark=batch_spark)
    assert [c.iso() for c in res.chunks] == [
        f"{format_instant(T0 + i * HOUR)}/{format_instant(T0 + (i + 1) * HOUR)}" for i in range(3)
    ]
    assert res.tombstones == [Interval(T0 + HOUR, T0 + 2 * HOUR)]  # hour 1 has no events
    assert res.events == 400 + 300 + 25
    all_events = hour0 + hour2 + late + dups
    for i in range(3):
        chunk = Interval(T0 + i * HOUR, T0 + (i + 1) * HOUR)
        assert _served_rows(md, storage, chunk) == _truth(all_events, chunk)
    data = [s for s in res.segments if not s.is_tombstone]
    for seg in data:  # one core set per chunk, complete
        assert seg.shard_spec.type == "numbered" and seg.shard_spec.partitions == len(
            [s for s in data if s.interval == seg.interval]
        )
        assert seg.version == res.version
    published = md.segments("web", used=True)
    assert {s.identifier for s in published} == {s.identifier for s in res.segments}
    assert md.get_state("batch.inflight.web") == {"jobs": []}

    # re-running publishes a newer version that overshadows the first
    res2 = rebuild(settings, "web", Interval(T0, T0 + HOUR), spark=batch_spark)
    assert res2.version > res.version
    from batch.backfill import visible

    assert {s.version for s, _ in visible(md, "web", Interval(T0, T0 + HOUR))} == {res2.version}
    assert _served_rows(md, storage, Interval(T0, T0 + HOUR)) == _truth(all_events, Interval(T0, T0 + HOUR))


def test_refuses_open_interval_and_force(web, batch_spark) -> None:  # type: ignore[no-untyped-def]
    from batch.planning import NotClosedError
    from batch.rebuild_job import rebuild

    settings, md, storage = web
    write_archive(storage, "web", [orjson.dumps(e) for e in _events(50, T0)])
    set_watermark(md, "web", T0 + HOUR)  # behind end + windowPeriod (T0 + 1h10m)
    with pytest.raises(NotClosedError, match=r"watermark of topic 'web' is 2026-11-20T01:00:00.000Z"):
        rebuild(settings, "web", Interval(T0, T0 + HOUR), spark=batch_spark)
    assert md.segments("web", used=None) == []
    res = rebuild(settings, "web", Interval(T0, T0 + HOUR), spark=batch_spark, force=True)
    assert res.events == 50


def test_failed_and_killed_runs_leave_nothing(web, batch_spark, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import batch.rebuild_job as job
    from batch import job_state

    settings, md, storage = web
    write_archive(storage, "web", [orjson.dumps(e) for e in _events(80, T0)])
    set_watermark(md, "web", T0 + 2 * HOUR)
    chunk = Interval(T0, T0 + HOUR)

    # a failure at the last moment (publish): nothing visible, its files gone
    import serving.publish

    def boom(*a: Any, **k: Any) -> None:
        raise RuntimeError("metadata store down")

    monkeypatch.setattr(serving.publish, "publish", boom)
    with pytest.raises(RuntimeError, match="metadata store down"):
        job.rebuild(settings, "web", chunk, spark=batch_spark)
    monkeypatch.undo()
    assert md.segments("web", used=None) == []
    assert storage.list("segments/") == []

    # a killed run (kill -9: no chance to clean up) leaves its files and its in-flight record …
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(proc.stdout)
    dead_version = "2026-11-21T00:00:00.000Z"
    for prefix in job_state.version_prefixes("web", [chunk], dead_version):
        storage.put_bytes(b"half-written", prefix + "0/data.parquet")
    rec = job_state.InflightJob(dead_version, (chunk.iso(),), dead_pid, __import__("socket").gethostname(),
                                int(__import__("time").time() * 1000))  # fmt: skip
    job_state._save(md, "web", [rec])
    # … which the next run deletes before it writes its own
    res = job.rebuild(settings, "web", chunk, spark=batch_spark)
    assert res.cleaned == job_state.version_prefixes("web", [chunk], dead_version)
    keys = storage.list("segments/")
    assert keys and not any(dead_version.replace(":", "_") in k for k in keys)
    assert all(res.version.replace(":", "_") in k for k in keys)
