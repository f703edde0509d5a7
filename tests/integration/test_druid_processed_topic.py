"""Serving at scale through Apache Druid, fed by radstack (``make test-druid``).

The same raw events go through both paths: radstack's streaming job reads the raw topic, makes its own
real-time segments and writes the processed topic (``processing.processedTopic``); a real Druid 33
ingests that topic with the Kafka supervisor ``radctl druid specs`` generates. Dashboard queries (counts,
sums, topN, timeseries) answer the same on both. Then the batch layer rebuilds the hours from the
archive — it has the late events the streaming path dropped — and Druid gets the rebuild as the
generated ``index_parallel`` re-index: the answers are the same again, and both now count every event.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from radstack.druid_cluster.specs import chunk_interval, index_parallel_spec, kafka_supervisor_spec
from radstack.druid_cluster.submit import OverlordClient
from radstack.time.intervals import Interval, format_instant
from tests.integration.test_druid_cluster import (
    ADS_SPEC,
    ads_events,
    native,
    parquet_to_json_lines,
    same,
    sql,
    sync_broker,
    wait_broker_serves,
)

pytestmark = [pytest.mark.slow, pytest.mark.druid]

DASHBOARD_SQL = [
    'SELECT SUM("count") AS events, SUM(price) AS revenue, MAX(max_price) AS top FROM {t}',
    'SELECT publisher, SUM("count") AS events, SUM(price) AS revenue FROM {t} GROUP BY publisher ORDER BY publisher',
    "SELECT TIME_FLOOR(__time, 'PT1M') AS m, SUM(\"count\") AS events FROM {t} GROUP BY 1 ORDER BY 1",
    'SELECT city, SUM("count") AS events, MAX(max_price) AS top FROM {t} GROUP BY city ORDER BY city',
]


def _native(ds: str, interval: Interval) -> list[dict[str, Any]]:
    aggs = [{"type": "longSum", "name": "events", "fieldName": "count"},
            {"type": "doubleSum", "name": "revenue", "fieldName": "price"}]  # fmt: skip
    base = {"dataSource": ds, "intervals": [interval.iso()], "granularity": "all", "aggregations": aggs}
    return [
        {**base, "queryType": "timeseries", "granularity": "minute"},
        {**base, "queryType": "topN", "dimension": "advertiser", "metric": "events", "threshold": 3},
    ]


def _compare(ours: str, theirs: str, druid_ds: str, interval: Interval) -> list[str]:
    failures: list[str] = []
    for q in DASHBOARD_SQL:
        failures += [f"SQL {q}: {d}" for d in same(sql(theirs, q.format(t=f'"{druid_ds}"')), sql(ours, q.format(t='"ads"')))[:5]]
    for q_ours, q_druid in zip(_native("ads", interval), _native(druid_ds, interval), strict=True):
        failures += [f"native {q_druid['queryType']}: {d}" for d in same(native(theirs, q_druid), native(ours, q_ours))[:5]]
    return failures


def _druid_count(broker: str, ds: str) -> int:
    with contextlib.suppress(AssertionError, KeyError, IndexError):
        return int(sql(broker, f'SELECT SUM("count") AS n FROM "{ds}"')[0]["n"] or 0)
    return 0


def test_druid_serves_the_processed_topic_and_the_rebuild(
    radstack_server: Any, local_druid: Any, kafka_bootstrap: str, kafka_topic: str, stream_spark: Any,
    tmp_path: Path,
) -> None:  # fmt: skip
    from confluent_kafka import Producer

    from batch.rebuild_job import rebuild
    from radstack.datasources import get_spec
    from radstack.storage.deep_storage import open_deep_storage
    from realtime.archiver import Archiver, ArchiverConfig
    from realtime.streaming.job import StreamingJob, stream_options
    from realtime.topics import ensure_topics

    settings = radstack_server.settings
    processed = f"{kafka_topic}-processed"
    ensure_topics(kafka_bootstrap, {processed: 2})
    raw = yaml.safe_load(ADS_SPEC.read_text())
    raw["processing"].update(topics=[kafka_topic], processedTopic=processed)
    settings.datasources_dir.mkdir(parents=True, exist_ok=True)
    (settings.datasources_dir / "ads.yaml").write_text(yaml.safe_dump(raw))
    spec = get_spec(settings, "ads")

    # -- the raw events: on time, exact re-sends, and late ones the streaming path drops --------------
    now = int(time.time() * 1000)
    on_time = ads_events(600, seed=21, interval=Interval(now - 5 * 60_000, now - 1000))
    late = ads_events(40, seed=22, interval=Interval(now - 40 * 60_000, now - 30 * 60_000))
    for i, e in enumerate(late):
        e["impression_id"] = f"late-{i}"
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    for e in on_time + on_time[:30] + late:  # the late ones arrive last: behind the watermark
        producer.produce(kafka_topic, orjson.dumps(e))
    assert producer.flush(30) == 0

    # -- radstack's streaming job: real-time segments + the processed topic -----------------------------
    md = radstack_server.ctx.metadata
    # several micro-batches: the late events come last, behind the watermark the earlier ones set
    opts = stream_options(settings, bootstrap_servers=kafka_bootstrap, available_now=True, handoff=False,
                          max_offsets_per_trigger=200)
    StreamingJob(settings, spec, opts, spark=stream_spark, metadata=md).run(timeout=300)
    sync_broker(radstack_server)
    ours = radstack_server.url
    assert sql(ours, 'SELECT SUM("count") AS n FROM ads')[0]["n"] == len(on_time)  # deduped, late dropped

    # -- Druid's Kafka supervisor on the processed topic -----------------------------------------------
    sup = kafka_supervisor_spec(spec, bootstrap_servers=kafka_bootstrap, task_duration="PT10M")
    sup["spec"]["dataSchema"]["dataSource"] = "ads_druid"
    theirs, overlord = local_druid.broker_url, local_druid.overlord_url
    hours = chunk_interval(spec, Interval(now - 40 * 60_000, now))
    with OverlordClient(overlord) as druid:
        assert druid.submit_supervisor(sup) == "ads_druid"
        try:
            deadline = time.monotonic() + 180
            while _druid_count(theirs, "ads_druid") != len(on_time):
                assert time.monotonic() < deadline, f"Druid ingested {_druid_count(theirs, 'ads_druid')} of {len(on_time)}"
                time.sleep(1)
            failures = _compare(ours, theirs, "ads_druid", hours)
            assert not failures, "real-time:\n" + "\n".join(failures)
        finally:
            r = httpx.post(f"{overlord}/druid/indexer/v1/supervisor/ads_druid/terminate", timeout=60)
            assert r.status_code == 200, r.text
            # the interval is still open, so its streaming task would hold the time-chunk lock the re-index
            # needs until taskDuration ends: stop it (the re-index replaces everything it had)
            running = httpx.get(f"{overlord}/druid/indexer/v1/tasks",
                                params={"state": "running", "datasource": "ads_druid"}, timeout=60).json()
            for t in running:
                httpx.post(f"{overlord}/druid/indexer/v1/task/{t['id']}/shutdown", timeout=60)

        # -- the batch layer: archive, rebuild; Druid gets the rebuild as index_parallel ------------------
        storage = open_deep_storage(settings)
        Archiver(ArchiverConfig(bootstrap_servers=kafka_bootstrap, topics=[kafka_topic], group_id=f"arch-{kafka_topic}",
                                max_age_seconds=1.0, timestamp_fields={kafka_topic: ("timestamp", "iso")}),
                 storage, md).run(idle_exit_seconds=5)  # fmt: skip
        res = rebuild(settings, "ads", hours, spark=stream_spark, force=True, metadata=md, deep_storage=storage)
        assert res.events == len(on_time) + len(late), res
        sync_broker(radstack_server)
        assert sql(ours, 'SELECT SUM("count") AS n FROM ads')[0]["n"] == len(on_time) + len(late)

        from operations.commands.druid import build_specs

        files = build_specs(settings, "ads", hours.iso())["index_parallel"]["spec"]["ioConfig"]["inputSource"]["files"]
        json_files = parquet_to_json_lines(files, tmp_path / "as-json")  # local Druid has no Parquet extension
        task = index_parallel_spec(spec, hours, {"type": "local", "files": json_files}, input_format={"type": "json"})
        task["spec"]["dataSchema"]["dataSource"] = "ads_druid"
        st = druid.wait_for_task(druid.submit_task(task), timeout_s=300, poll_s=1.0)
        assert st.ok, st
        druid.wait_for_load("ads_druid", timeout_s=120)
        wait_broker_serves(theirs, "ads_druid")
        deadline = time.monotonic() + 120
        while _druid_count(theirs, "ads_druid") != len(on_time) + len(late):
            assert time.monotonic() < deadline, "Druid's re-index did not overshadow its real-time segments"
            time.sleep(1)
    failures = _compare(ours, theirs, "ads_druid", hours)
    assert not failures, f"after the rebuild ({format_instant(hours.start)}…):\n" + "\n".join(failures)
