"""The RADStack join in the stream (bounded, watermarks) against the batch (full) join."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from radstack.config import Settings
from tests.fixtures.streaming import ads_spec, produce_ads, segment_rows

pytestmark = pytest.mark.slow

DIMS = ["publisher", "advertiser", "gender", "city"]


def _roll(rows: list[dict[str, Any]], before_ms: int) -> dict[tuple[Any, ...], tuple[int, int]]:
    acc: dict[tuple[Any, ...], list[int]] = {}
    for r in rows:
        t = r["__time"]
        ms = int(t.timestamp() * 1000) if hasattr(t, "timestamp") else int(t)
        if ms >= before_ms:
            continue
        a = acc.setdefault((ms, *(r[d] for d in DIMS)), [0, 0])
        a[0] += r["count"]
        a[1] += r["clicks"]
    return {k: (v[0], v[1]) for k, v in acc.items()}


def test_stream_join_matches_batch_join_where_the_watermark_has_passed(
    settings: Settings, stream_spark: Any, kafka_bootstrap: str, ads_topics: dict[str, str], tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    from radstack.pipeline.batch import run_batch_pipeline
    from radstack.pipeline.indexing import index_dataframe
    from realtime.streaming.job import StreamingJob, stream_options
    from realtime.streaming.sink import state_key

    start = 1_795_000_000_000
    n = 3000
    summary = produce_ads(kafka_bootstrap, ads_topics, tmp_path / "gen", events=n, sim_rate=1.0, ctr=0.3,
                          start_ms=start)
    assert summary.streams["clicks"].unique > 100
    spec = ads_spec(ads_topics["impressions"], name="ads_clicks", clicks_topic=ads_topics["clicks"])
    opts = stream_options(settings, bootstrap_servers=kafka_bootstrap, available_now=True,
                          max_offsets_per_trigger=500, handoff=False)
    job = StreamingJob(settings, spec, opts, spark=stream_spark)
    job.run(timeout=400)
    streamed_rows = segment_rows(job.metadata, "ads_clicks")
    st = job.metadata.get_state(state_key("ads_clicks"))

    def read(topic: str) -> Any:
        return (stream_spark.read.format("kafka").option("kafka.bootstrap.servers", kafka_bootstrap)
                .option("subscribe", topic).option("startingOffsets", "earliest").load())

    rows = run_batch_pipeline(stream_spark, read(ads_topics["impressions"]), spec,
                              joined={"clicks": read(ads_topics["clicks"])})
    res = index_dataframe(rows, spec.data_schema, deep_storage_config={"type": "local", "path": str(tmp_path / "b")},
                          version="2099-01-01T00:00:00.000Z")
    batch_rows = [r for s in res.segments for r in pq.read_table(s.load_spec["path"]).to_pylist()]
    assert sum(r["count"] for r in batch_rows) == n
    assert sum(r["clicks"] for r in batch_rows) == summary.streams["clicks"].unique

    # Impressions older than the watermark - (delay + join window + one batch of event time) have all
    # left the stream join (an unclicked one leaves once the watermark passes its time + window).
    bound = st["watermarkMs"] - 25 * 60_000
    assert bound > start + 10 * 60_000
    s, b = _roll(streamed_rows, bound), _roll(batch_rows, bound)
    assert sum(v[1] for v in b.values()) > 50
    assert s == b


def test_late_rows_the_join_plan_drops_are_counted(
    settings: Settings, stream_spark: Any, kafka_bootstrap: str, ads_topics: dict[str, str]
) -> None:
    """With a stream join, Spark's watermark drops late impressions and clicks before they reach the
    sink, and its progress does not report them; the job counts them from the rows that got past
    dedup on every branch. Hand-made events: on-time impressions (some re-sent) and their clicks (one
    re-sent), an impression hours later that moves the watermark on, then — in the next run, so the
    watermark is known — impressions and clicks two hours behind it."""
    import orjson
    from confluent_kafka import Producer

    from radstack.time.intervals import format_instant
    from realtime.streaming.job import StreamingJob, stream_options
    from realtime.streaming.sink import progress_key
    from tests.fixtures.streaming import ads_spec, segment_rows

    start = 1_795_000_000_000
    producer = Producer({"bootstrap.servers": kafka_bootstrap})

    def imp(i: int, ts: int) -> bytes:
        return orjson.dumps({"timestamp": format_instant(ts), "impression_id": f"imp-{i}", "publisher": "p",
                             "advertiser": "a", "gender": "f", "city": "c", "price": 1.0})

    def click(i: int, ts: int) -> bytes:
        return orjson.dumps({"timestamp": format_instant(ts), "click_id": f"clk-{i}", "impression_id": f"imp-{i}"})

    def send(topic: str, values: list[bytes]) -> None:
        for v in values:
            producer.produce(topic, v)
        producer.flush(10)

    on_time = [imp(i, start + i * 1000) for i in range(200)]
    send(ads_topics["impressions"], on_time + on_time[:10] + [imp(999, start + 3 * 3600_000)])  # 10 re-sent
    clicks = [click(i, start + i * 1000 + 5000) for i in range(0, 200, 4)]  # 50 clicks
    # one re-sent; the query's watermark is the lower of the two sides', so the clicks move on too
    send(ads_topics["clicks"], clicks + clicks[:1] + [click(999, start + 3 * 3600_000 + 5000)])
    spec = ads_spec(ads_topics["impressions"], name="ads_late_join", clicks_topic=ads_topics["clicks"])
    opts = stream_options(settings, bootstrap_servers=kafka_bootstrap, available_now=True,
                          max_offsets_per_trigger=1000, handoff=False)
    StreamingJob(settings, spec, opts, spark=stream_spark).run(timeout=300)

    late = start - 2 * 3600_000
    send(ads_topics["impressions"], [imp(500 + i, late + i * 1000) for i in range(30)])
    send(ads_topics["clicks"], [click(500 + i, late + i * 1000 + 5000) for i in range(10)])
    job = StreamingJob(settings, spec, opts, spark=stream_spark)
    job.run(timeout=300)

    rows = segment_rows(job.metadata, "ads_late_join")
    # every on-time impression has left the join (the watermark passed them), each once, with its
    # click; the one hours later was clicked at once
    assert sum(r["count"] for r in rows) == 201 and sum(r["clicks"] for r in rows) == 51
    prog = job.metadata.get_state(progress_key("ads_late_join"))
    assert prog["duplicatesDropped"] == 11
    assert prog["droppedByWatermark"] == 40  # 30 impressions + 10 clicks behind the watermark
