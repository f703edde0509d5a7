"""Kafka (real broker) → Spark Structured Streaming → real-time segments, end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.streaming import ads_spec, produce_ads, rolled_up, segment_rows, sql_count

pytestmark = pytest.mark.slow

DIMS = ["publisher", "advertiser", "gender", "city"]


def _job(settings: Any, spec: Any, spark: Any, bootstrap: str, **kw: Any) -> Any:
    from realtime.streaming.job import StreamingJob, stream_options

    opts = stream_options(settings, bootstrap_servers=bootstrap, available_now=True, **kw)
    return StreamingJob(settings, spec, opts, spark=spark)


def test_exact_count_without_duplicates_or_late_events(
    settings: Any, stream_spark: Any, kafka_bootstrap: str, ads_topics: dict[str, str], tmp_path: Path
) -> None:
    from radstack.intervals import format_instant
    from realtime.streaming.sink import progress_key, state_key

    n = 3000
    summary = produce_ads(kafka_bootstrap, ads_topics, tmp_path / "gen", events=n)
    assert summary.streams["impressions"].unique == n
    # one malformed message goes to the dead-letter topic and is counted, not indexed
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": kafka_bootstrap})
    p.produce(ads_topics["impressions"], b'{"timestamp": "not a time", "impression_id": "x"}')
    p.flush(10)

    spec = ads_spec(ads_topics["impressions"])
    job = _job(settings, spec, stream_spark, kafka_bootstrap, max_offsets_per_trigger=1000, handoff=False)
    job.run(timeout=300)

    rows = segment_rows(job.metadata, "ads")
    assert sum(r["count"] for r in rows) == n
    got = sql_count(settings, job.metadata, "ads")
    if got is not None:
        assert got == n
    st = job.metadata.get_state(state_key("ads"))
    assert st["counters"]["processed"] == n
    assert st["counters"]["unparseable"] == 1 and st["counters"]["deadLettered"] == 1
    assert st["counters"]["thrownAway"] == 0
    assert st["lastBatchId"] >= 3  # 3001 messages at 1000 per trigger
    assert sum(sum(v.values()) for v in st["offsets"].values()) == n + 1
    prog = job.metadata.get_state(progress_key("ads"))
    assert prog["duplicatesDropped"] == 0
    # every segment is a real-time append of the interval-start version
    for seg in job.metadata.segments("ads"):
        assert seg.version == format_instant(seg.interval.start)
        assert seg.shard_spec.partitions == 0

    from tests.fixtures.kafka import consume

    dlq = consume(kafka_bootstrap, ads_topics["impressions"] + ".dlq", "t-dlq", 1)
    assert dlq == [b'{"timestamp": "not a time", "impression_id": "x"}']


def test_duplicates_and_late_events_are_counted(
    settings: Any, stream_spark: Any, kafka_bootstrap: str, ads_topics: dict[str, str], tmp_path: Path
) -> None:
    from realtime.streaming.sink import progress_key, state_key

    n = 3000
    summary = produce_ads(kafka_bootstrap, ads_topics, tmp_path / "gen", events=n, duplicates=0.05, late=0.03)
    imp = summary.streams["impressions"]
    assert imp.duplicates > 0 and imp.late > 0
    spec = ads_spec(ads_topics["impressions"])
    job = _job(settings, spec, stream_spark, kafka_bootstrap, max_offsets_per_trigger=300, handoff=False)
    job.run(timeout=300)

    total = sum(r["count"] for r in segment_rows(job.metadata, "ads"))
    st = job.metadata.get_state(state_key("ads"))["counters"]
    prog = job.metadata.get_state(progress_key("ads"))
    assert total != imp.unique  # the real-time answer is off ...
    assert total == st["processed"]
    # ... and the counters account for every message: indexed + thrown away + duplicates = sent
    sent = imp.unique + imp.duplicates
    assert total + st["thrownAway"] + prog["droppedByWatermark"] + prog["duplicatesDropped"] == sent
    assert prog["duplicatesDropped"] > 0
    assert st["thrownAway"] + prog["droppedByWatermark"] > 0
