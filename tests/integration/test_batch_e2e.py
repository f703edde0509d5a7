"""The Lambda architecture's promise, end to end (issue 7's "done when"):

generate ``ads`` (impressions + clicks) with duplicates and late events into the real Kafka broker →
the streaming job makes real-time segments (their answer is off: late events are thrown away, the
bounded join misses some) and the archiver copies every raw record → ``radctl backfill --interval``
rebuilds the hours from the archive → the Druid SQL answer equals the exact truth computed here,
independently, from the generator's truth log; ``sys.segments`` shows the real-time segments
overshadowed (then the coordinator marks them unused); and a query running in a loop during the
publishes never sees an hour that is neither the real-time nor the batch answer (no double count)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from radstack.config import Settings
from radstack.time.intervals import Interval, format_instant, parse_instant
from tests.fixtures.streaming import EXAMPLES

pytestmark = pytest.mark.slow

HOUR = 3_600_000
START = 1_795_000_000_000  # 2026-11-18T…: long closed
HOURLY = (
    "SELECT TIME_FLOOR(__time, 'PT1H') AS h, SUM(\"count\") AS n, SUM(clicks) AS c "
    "FROM ads_clicks GROUP BY 1 ORDER BY 1"
)


def _truth(gen_dir: Path) -> dict[int, tuple[int, int]]:
    """hour → (impressions, clicked impressions), from the truth log: unique events only, every late
    event in its own hour, a click counting for its impression when within the join window (2 min)."""
    imps = {}
    for line in (gen_dir / "truth" / "impressions.jsonl").read_bytes().splitlines():
        e = orjson.loads(line)
        imps[e["impression_id"]] = parse_instant(e["timestamp"])
    clicked = set()
    for line in (gen_dir / "truth" / "clicks.jsonl").read_bytes().splitlines():
        c = orjson.loads(line)
        t = imps.get(c["impression_id"])
        if t is not None and 0 <= parse_instant(c["timestamp"]) - t <= 120_000:
            clicked.add(c["impression_id"])
    out: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for iid, t in imps.items():
        h = t // HOUR * HOUR
        out[h][0] += 1
        out[h][1] += iid in clicked
    return {h: (v[0], v[1]) for h, v in out.items()}


def _hourly(url: str) -> dict[int, tuple[int, int]]:
    r = httpx.post(f"{url}/druid/v2/sql", json={"query": HOURLY}, timeout=60)
    if r.status_code == 400 and "not found" in r.text:
        return {}
    assert r.status_code == 200, r.text
    return {parse_instant(x["h"]): (int(x["n"]), int(x["c"])) for x in r.json()}


def _sql(url: str, query: str) -> list[dict[str, Any]]:
    r = httpx.post(f"{url}/druid/v2/sql", json={"query": query}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def _wait(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_backfill_replaces_the_realtime_answer_with_the_truth(
    settings: Settings, radstack_home: Path, stream_spark: Any, kafka_bootstrap: str, ads_topics: dict[str, str],
    tmp_path: Path,
) -> None:
    import yaml

    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore
    from radstack.storage.raw_archive import archive_watermark
    from realtime.archiver import Archiver, ArchiverConfig
    from realtime.streaming.job import StreamingJob, stream_options
    from tests.fixtures.server import running_server
    from tests.fixtures.streaming import produce_ads

    # -- the datasource, in the catalog radctl reads ------------------------------------------------
    raw = yaml.safe_load((EXAMPLES / "ads-clicks.yaml").read_text())
    raw["processing"]["topics"] = [ads_topics["impressions"]]
    raw["processing"]["joins"][0]["topic"] = ads_topics["clicks"]
    settings.datasources_dir.mkdir(parents=True, exist_ok=True)
    (settings.datasources_dir / "ads_clicks.yaml").write_text(yaml.safe_dump(raw))
    from radstack.datasources import get_spec

    spec = get_spec(settings, "ads_clicks")

    # -- events: duplicates and late ones (minutes to hours) -------------------------------------------
    gen = tmp_path / "gen"
    summary = produce_ads(kafka_bootstrap, ads_topics, gen, events=2500, duplicates=0.05, late=0.04,
                          sim_rate=1.0, ctr=0.2, start_ms=START)  # fmt: skip
    imp = summary.streams["impressions"]
    assert imp.duplicates > 0 and imp.late > 0
    truth = _truth(gen)
    assert sum(v[0] for v in truth.values()) == imp.unique

    # -- the two consumers: the streaming job and the archiver ----------------------------------------
    md = MetadataStore.from_settings(settings)
    storage = open_deep_storage(settings)
    opts = stream_options(settings, bootstrap_servers=kafka_bootstrap, available_now=True,
                          max_offsets_per_trigger=500, handoff=False)  # fmt: skip
    StreamingJob(settings, spec, opts, spark=stream_spark, metadata=md).run(timeout=400)
    topics = [ads_topics["impressions"], ads_topics["clicks"]]
    arch = Archiver(
        ArchiverConfig(bootstrap_servers=kafka_bootstrap, topics=topics, group_id=f"archiver-{ads_topics['clicks']}",
                       max_age_seconds=1.0, timestamp_fields={t: ("timestamp", "iso") for t in topics}),
        storage, md,
    )  # fmt: skip
    arch.run(idle_exit_seconds=6)
    for t in topics:
        assert (archive_watermark(md, t) or 0) > START + 2 * HOUR, "the archiver watermark passed the data"
    realtime_ids = {s.identifier for s in md.segments("ads_clicks")}
    assert realtime_ids

    hours = sorted(truth)
    interval = Interval(hours[0], hours[-1] + 2 * HOUR)  # + one empty hour: a tombstone
    with running_server(radstack_home, {"coordinator": {"overshadowed_unused_delay_seconds": 25}}) as srv:
        rt = _wait(lambda: _hourly(srv.url), 30, "the real-time answer")
        assert sum(v[0] for v in rt.values()) != imp.unique  # the real-time answer is off
        assert rt != truth

        # -- a query loop during the backfill ------------------------------------------------------------
        seen: list[dict[int, tuple[int, int]]] = []
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                seen.append(_hourly(srv.url))

        th = threading.Thread(target=loop, daemon=True)
        th.start()
        env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
        env.update({"RADSTACK_HOME": str(radstack_home), "RADSTACK_SPARK__SHUFFLE_PARTITIONS": "2"})
        proc = subprocess.run(
            [sys.executable, "-m", "operations", "backfill", "--interval", interval.iso(), "--datasource",
             "ads_clicks", "--via", "local", "--json"],
            env=env, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        time.sleep(2)  # the broker picks up the last publish
        stop.set()
        th.join(60)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        chunks = [orjson.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
        assert {c["status"] for c in chunks} == {"published"}
        by_hour = {parse_instant(c["interval"].split("/")[0]): c for c in chunks}
        for h, (n, _c) in truth.items():
            assert by_hour[h]["batch_events"] == n
            assert by_hour[h]["realtime_events"] == rt.get(h, (0, 0))[0]
        assert by_hour[hours[-1] + HOUR]["batch_rows"] == 0  # the empty hour: a tombstone

        # -- the answer is now the truth -----------------------------------------------------------------
        final = _wait(lambda: (a := _hourly(srv.url)) == truth and a, 30, "the batch answer")
        assert final == truth
        total = _sql(srv.url, 'SELECT SUM("count") AS n FROM ads_clicks')[0]["n"]
        assert total == imp.unique

        # -- never a mixed answer: each hour is either its real-time or its batch value ------------------
        assert len(seen) > 5
        for snap in seen:
            for h in set(snap) | set(truth) | set(rt):
                got = snap.get(h, (0, 0))
                assert got in (rt.get(h, (0, 0)), truth.get(h, (0, 0))), (format_instant(h), got)
        assert any(s == rt for s in seen) or any(s == truth for s in seen)

        # -- sys.segments: the real-time segments are overshadowed, then marked unused -------------------
        rows = _sql(srv.url, "SELECT segment_id, version, is_overshadowed, is_active FROM sys.segments "
                             "WHERE datasource = 'ads_clicks'")  # fmt: skip
        rt_rows = [r for r in rows if r["segment_id"] in realtime_ids]
        assert rt_rows and all(r["is_overshadowed"] == 1 and r["is_active"] == 0 for r in rt_rows), rt_rows
        batch_versions = {c["version"] for c in chunks}
        assert all(r["version"] in batch_versions for r in rows if r["segment_id"] not in realtime_ids)
        _wait(lambda: not (realtime_ids & {s.identifier for s in md.segments("ads_clicks", used=True)}), 60,
              "the coordinator to mark the overshadowed real-time segments unused")
        # … and the broker drops them at its next metadata poll (coordinator.metadata_poll_seconds)
        _wait(lambda: not realtime_ids & {r["segment_id"] for r in _sql(
            srv.url, "SELECT segment_id FROM sys.segments WHERE datasource = 'ads_clicks'")}, 30,
            "sys.segments to drop the unused real-time segments")
        assert _hourly(srv.url) == truth
    md.close()
