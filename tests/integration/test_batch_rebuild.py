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

from radstack.config import Settings
from radstack.time.intervals import Interval, format_instant, parse_instant
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
  projections:
    - type: aggregate
      name: by_country
      groupingColumns: [country]
      aggregators: [{type: longSum, name: count, fieldName: count}, {type: longSum, name: bytes, fieldName: bytes}]
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
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore

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
    from batch.rebuild_job import STAGES

    # every step timed, in order (no Spark start: the session was given), and they add up to the job
    assert list(res.stages) == [s for s in STAGES if s != "spark_start"]
    assert all(v >= 0 for v in res.stages.values()) and sum(res.stages.values()) <= res.seconds + 0.01
    assert res.to_json()["stages"].keys() == res.stages.keys()
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
    for seg in data:  # the projection was built beside every segment file, and moved with it on renumbering
        [proj] = seg.projections
        rows = pq.read_table(proj["loadSpec"]["path"]).to_pylist()
        base = pq.read_table(seg.load_spec["path"]).to_pylist()
        assert proj["name"] == "by_country" and proj["numRows"] == len(rows) == len({r["country"] for r in base})
        assert sum(r["count"] for r in rows) == sum(r["count"] for r in base)
        assert sum(r["__rows"] for r in rows) == len(base)
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
    def boom(*a: Any, **k: Any) -> None:
        raise RuntimeError("metadata store down")

    monkeypatch.setattr(job, "publish", boom)  # the name the job module calls
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


# ---- radctl backfill --via local: one Spark job per group of consecutive chunks ------------------------

MINUTE = 60_000
MINUTE_SPEC = SPEC.replace("segmentGranularity: hour", "segmentGranularity: minute")
DATA_MINUTES = (5, 6, 47, 70)  # of the two hours from T0; every other minute is empty


def _minute_events(seed: int = 11) -> list[dict[str, Any]]:
    import random

    rng = random.Random(seed)
    out = []
    for m in DATA_MINUTES:
        for i in range(40 + m):
            out.append({
                "timestamp": format_instant(T0 + m * MINUTE + rng.randrange(0, MINUTE)),
                "id": f"m{m}-{i}", "page": rng.choice(["/a", "/b"]), "country": rng.choice(["DE", "US"]),
                "bytes": rng.randrange(1, 100),
            })  # fmt: skip
    return out


def _minute_truth(events: list[dict[str, Any]], chunk: Interval) -> tuple[int, int]:
    """(rolled-up rows, unique events) of ``chunk``."""
    t = _truth(events, chunk)
    return len(t), sum(t.values())


def _with(settings: Settings, **batch: Any) -> Any:
    from radstack.config import load_settings

    return load_settings(env={"RADSTACK_HOME": str(settings.home)}, overrides={"batch": batch})


def test_local_backfill_one_job_per_group_of_chunks(web, batch_spark, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from batch.backfill import plan_backfill, run_local, visible
    from batch.rebuild_job import rebuild

    settings, md, storage = web
    events = _minute_events()
    write_archive(storage, "web", [orjson.dumps(e) for e in events + events[:30]], per_file=100)  # 30 re-sends
    set_watermark(md, "web", T0 + 3 * HOUR)
    # what serves the two hours first: HOUR segments (one job), to be split per minute in "before"
    first = rebuild(settings, "web", Interval(T0, T0 + 2 * HOUR), spark=batch_spark)
    (settings.datasources_dir / "web.yaml").write_text(MINUTE_SPEC)

    s30 = _with(settings, chunks_per_job=30)
    plan = plan_backfill(s30, "2026-11-20T00/PT2H", "web")
    assert plan.total == 120
    calls: list[tuple[int, str]] = []
    results = run_local(s30, plan, spark=batch_spark, progress=lambda r: calls.append((r.interval.start, r.status)))

    # 120 chunks in 4 jobs of 30: one version per group, groups in time order
    assert [r.interval for r in results] == plan.chunks["web"]
    assert {r.status for r in results} == {"published"} and not any(r.error for r in results)
    groups = [results[i : i + 30] for i in range(0, 120, 30)]
    versions = []
    for g in groups:
        assert len({r.version for r in g}) == 1 and len({r.seconds for r in g}) == 1
        assert {r.group for r in g} == {Interval(g[0].interval.start, g[-1].interval.end)}
        assert {r.group_chunks for r in g} == {30}
        assert len({tuple(r.stages.items()) for r in g}) == 1 and "index" in g[0].stages  # the group's rebuild
        assert g[0].to_json()["stages"].keys() == g[0].stages.keys()
        versions.append(g[0].version)
    assert versions == sorted(versions) and len(set(versions)) == 4 and versions[0] > first.version

    # per chunk: before = the hourly segment's rows in that minute, after = the truth; empty → tombstone
    for r in results:
        m = (r.interval.start - T0) // MINUTE
        rows, n = _minute_truth(events, r.interval)
        assert (r.before_rows, r.before_events, r.before_versions) == (rows, n, [first.version]), m
        assert (r.rows, r.events) == (rows, n), m
        served = visible(md, "web", r.interval)
        if m in DATA_MINUTES:
            assert rows > 0 and _served_rows(md, storage, r.interval) == _truth(events, r.interval)
            assert not any(s.is_tombstone for s, _ in served)
        else:
            assert rows == 0 and [s.is_tombstone for s, _ in served] == [True], m
        assert {s.version for s, _ in served} == {r.version}
    assert sum(r.events for r in results) == len(events)

    # progress: every chunk reported running, then published, a group at a time
    assert len(calls) == 240
    for k, g in enumerate(groups):
        block = calls[k * 60 : (k + 1) * 60]
        assert block == [(r.interval.start, "running") for r in g] + [(r.interval.start, "published") for r in g]

    # a failed group marks its chunks failed (nothing published) and the next group still runs
    import batch.rebuild_job as job

    real_publish = job.publish

    def publish_fails_first_group(metadata: Any, deep_storage: Any, segments: Any, *a: Any, **k: Any) -> Any:
        if any(s.interval.start == T0 for s in segments):
            raise RuntimeError("metadata store down")
        return real_publish(metadata, deep_storage, segments, *a, **k)

    monkeypatch.setattr(job, "publish", publish_fails_first_group)
    again = run_local(s30, plan_backfill(s30, "2026-11-20T00/PT1H", "web"), spark=batch_spark)
    monkeypatch.undo()
    assert [r.status for r in again] == ["failed"] * 30 + ["published"] * 30
    assert {r.error for r in again[:30]} == {"RuntimeError: metadata store down"}
    assert {r.version for r in again[:30]} == {versions[0]}  # still the earlier job's
    assert len({r.version for r in again[30:]}) == 1 and again[30].version > versions[3]
    for r in again:
        assert (r.rows, r.events) == (r.before_rows, r.before_events) == _minute_truth(events, r.interval)

    # the default (1440 chunks per job): two hours in one job, one version
    one = run_local(settings, plan, spark=batch_spark)
    assert len({r.version for r in one}) == 1 and {r.group_chunks for r in one} == {120}
    assert [(r.rows, r.events) for r in one] == [(r.rows, r.events) for r in results]


def test_chunk_summaries_match_chunk_summary(web, batch_spark) -> None:  # type: ignore[no-untyped-def]
    """The per-group summary equals the per-chunk one, and empty chunks read no segment file."""
    import batch.backfill.summaries as bf  # where chunk_summaries reads each segment (_segment_times)
    from batch.rebuild_job import rebuild
    from radstack.datasources import get_spec

    settings, md, storage = web
    events = _minute_events(seed=5)
    write_archive(storage, "web", [orjson.dumps(e) for e in events])
    set_watermark(md, "web", T0 + 3 * HOUR)
    (settings.datasources_dir / "web.yaml").write_text(MINUTE_SPEC)
    rebuild(settings, "web", Interval(T0, T0 + 30 * MINUTE), spark=batch_spark)  # 0:00–0:30 batch, rest nothing
    spec = get_spec(settings, "web")
    chunks = [Interval(T0 + i * MINUTE, T0 + (i + 1) * MINUTE) for i in range(120)]
    reads: list[Any] = []
    real = bf._segment_times
    bf._segment_times = lambda *a: reads.append(a[1]) or real(*a)  # type: ignore[assignment]
    try:
        together = bf.chunk_summaries(md, storage, spec, chunks)
    finally:
        bf._segment_times = real  # type: ignore[assignment]
    assert together == [bf.chunk_summary(md, storage, spec, c) for c in chunks]
    assert len(reads) == len([s for s in md.segments("web", used=True) if not s.is_tombstone])
    for c, (rows, n, vs) in zip(chunks, together, strict=True):
        rebuilt = c.start < T0 + 30 * MINUTE
        assert (rows, n) == (_minute_truth(events, c) if rebuilt else (0, 0))
        assert len(vs) == (1 if rebuilt else 0)


def test_cli_prints_one_line_per_group_and_folds_empty_chunks(web, batch_spark, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from operations.cli import app

    settings, md, storage = web
    (settings.datasources_dir / "web.yaml").write_text(MINUTE_SPEC)
    events = [e for e in _minute_events(seed=3) if parse_instant(e["timestamp"]) < T0 + HOUR]  # minutes 5, 6, 47
    write_archive(storage, "web", [orjson.dumps(e) for e in events])
    set_watermark(md, "web", T0 + 3 * HOUR)
    monkeypatch.setenv("RADSTACK_BATCH__CHUNKS_PER_JOB", "30")
    r = CliRunner().invoke(app, ["backfill", "--interval", "2026-11-20T00/PT1H", "--datasource", "web", "--via",
                                 "local", "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    lines = [orjson.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 60 and {ln["status"] for ln in lines} == {"published"}  # --json: every chunk
    assert len({ln["version"] for ln in lines}) == 2
    assert sum(ln["batch_events"] for ln in lines) == len(events)
    err = r.stderr
    assert "60 chunk(s)" in err and "2 Spark job(s) of at most 30 chunk(s)" in err
    progress = [ln for ln in err.splitlines() if ln.startswith("  web ")]
    assert len(progress) == 4, err  # running + published, per group
    assert sum("(30 chunk(s)): published in" in ln for ln in progress) == 2
    table = [ln for ln in r.stdout.splitlines() if not ln.startswith("{")]
    rows = [ln for ln in table if "│ web" in ln]
    assert len(rows) == 4, "\n".join(table)  # the 3 minutes with data + one line for the rest
    assert sum("T00:05:00.000Z/" in ln or "T00:06:00.000Z/" in ln or "T00:47:00.000Z/" in ln for ln in rows) == 3
    assert "57 other chunks: no events (tombstones)" in r.stdout
    assert "2 versions" in r.stdout
