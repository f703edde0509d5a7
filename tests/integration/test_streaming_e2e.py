"""Kafka (real broker) → Spark Structured Streaming → real-time segments, end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from radstack.config import Settings
from radstack.time.intervals import format_instant
from tests.fixtures.streaming import ads_spec, produce_ads, rolled_up, segment_rows, sql_count

pytestmark = pytest.mark.slow

DIMS = ["publisher", "advertiser", "gender", "city"]


def _job(settings: Settings, spec: Any, spark: Any, bootstrap: str, **kw: Any) -> Any:
    from realtime.streaming.job import StreamingJob, stream_options

    opts = stream_options(settings, bootstrap_servers=bootstrap, available_now=True, **kw)
    return StreamingJob(settings, spec, opts, spark=spark)


def test_exact_count_without_duplicates_or_late_events(
    settings: Settings, stream_spark: Any, kafka_bootstrap: str, ads_topics: dict[str, str], tmp_path: Path
) -> None:
    from radstack.time.intervals import format_instant
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
    settings: Settings, stream_spark: Any, kafka_bootstrap: str, ads_topics: dict[str, str], tmp_path: Path
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


def test_streaming_and_batch_give_identical_rolled_up_rows(
    settings: Settings, stream_spark: Any, kafka_bootstrap: str, ads_topics: dict[str, str], tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    from radstack.pipeline.batch import run_batch_pipeline
    from radstack.pipeline.indexing import index_dataframe

    produce_ads(kafka_bootstrap, ads_topics, tmp_path / "gen", events=2500, sim_rate=0.5, seed=11)
    spec = ads_spec(ads_topics["impressions"])
    job = _job(settings, spec, stream_spark, kafka_bootstrap, max_offsets_per_trigger=700, handoff=False)
    job.run(timeout=300)
    streamed = rolled_up(segment_rows(job.metadata, "ads"), DIMS)

    raw = (
        stream_spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", ads_topics["impressions"])
        .option("startingOffsets", "earliest")
        .load()
    )
    rows = run_batch_pipeline(stream_spark, raw, spec)
    res = index_dataframe(
        rows.repartition(2), spec.data_schema, deep_storage_config={"type": "local", "path": str(tmp_path / "batch-ds")},
        version="2099-01-01T00:00:00.000Z", shard="append",
    )
    batch_rows = [r for s in res.segments for r in pq.read_table(s.load_spec["path"]).to_pylist()]
    batched = rolled_up(batch_rows, DIMS)
    assert sum(v[0] for v in batched.values()) == 2500
    assert streamed == batched
    assert len({s.interval for s in res.segments}) >= 2  # the input spans several hourly segments


def test_handoff_merges_closed_intervals_atomically(
    settings: Settings, stream_spark: Any, kafka_bootstrap: str, ads_topics: dict[str, str], tmp_path: Path
) -> None:
    from realtime.streaming.handoff import handoff_version

    n = 2000
    # 0.5 events/s of event time: 4000 s, so the first hour closes (end + PT10M) before the stream ends
    produce_ads(kafka_bootstrap, ads_topics, tmp_path / "gen", events=n, sim_rate=0.5, seed=5)
    spec = ads_spec(ads_topics["impressions"])
    job = _job(settings, spec, stream_spark, kafka_bootstrap, max_offsets_per_trigger=250,
               handoff=True, handoff_check_seconds=0.0)
    job.run(timeout=300)
    used = job.metadata.segments("ads")
    intervals = sorted({s.interval for s in used}, key=lambda i: i.start)
    first = intervals[0]
    firsts = [s for s in used if s.interval == first]
    assert [s.version for s in firsts] == [handoff_version(first)]
    assert firsts[0].shard_spec.partitions == 1
    unused = [s for s in job.metadata.segments("ads", used=False) if s.interval == first]
    assert len(unused) >= 2  # the small real-time partitions it replaced
    # the last interval is still open: real-time appends
    assert all(s.version == format_instant(s.interval.start) for s in used if s.interval == intervals[-1])
    assert sum(r["count"] for r in segment_rows(job.metadata, "ads")) == n



#: run in a child process, so the test reads the driver JVM's own stderr (where the stream thread's
#: uncaught StackOverflowError was printed); the batch's work starts with a long Spark job collected
#: through py4j (what a stop interrupted in bench_streaming), then the real sink runs
_STOP_CHILD = """
import json, sys, threading, time
from radstack.config import load_settings
from realtime.streaming.job import StreamingJob, stream_options
from realtime.streaming.sink import SegmentSink
from tests.fixtures.streaming import ads_spec

real = SegmentSink._process_batch
def slow_then_real(self, df, batch_id):
    df.sparkSession.range(0, 10**11, numPartitions=2).selectExpr("sum(id % 7)").collect()
    real(self, df, batch_id)
SegmentSink._process_batch = slow_then_real

settings = load_settings()
opts = stream_options(settings, bootstrap_servers=sys.argv[1], available_now=False, handoff=False)
job = StreamingJob(settings, ads_spec(sys.argv[2]), opts)
job.start()
runner = threading.Thread(target=job.run, daemon=True)
runner.start()
deadline = time.monotonic() + 120
while job.sink.running_batch is None and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(3)  # well inside the long collect
job.stop()
runner.join(60)
print(json.dumps({"interrupted": job.sink.running_batch is None, "exception": str(job.query.exception()),
                  "stopped": not runner.is_alive()}))
job.spark.stop()
"""


def test_stop_during_a_micro_batch_is_a_clean_stop_and_loses_nothing(
    settings: Settings, stream_spark: Any, kafka_bootstrap: str, ads_topics: dict[str, str], tmp_path: Path
) -> None:
    """#36 item 6: stopping the query while its foreachBatch waits on a Spark job interrupts that
    py4j call. The sink's error used to carry the whole Java stack back to Spark, whose interruption
    check (a regular expression over that text) overflowed the stream thread's stack. Now the stop is
    clean: no StackOverflowError from the driver JVM, no query exception, and the interrupted batch
    is redone by the next run (exact count)."""
    import json
    import os
    import subprocess
    import sys

    n = 2000
    produce_ads(kafka_bootstrap, ads_topics, tmp_path / "gen", events=n)
    env = {**os.environ, "RADSTACK_HOME": str(settings.home), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", _STOP_CHILD, kafka_bootstrap, ads_topics["impressions"]],
                         env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    (tmp_path / "child.err").write_text(out.stderr)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"interrupted": True, "exception": "None", "stopped": True}, result
    assert "StackOverflowError" not in out.stderr + out.stdout, "the stream thread overflowed its stack"
    # the interrupted batch is redone from the checkpoint by the next run: every event exactly once
    rerun = _job(settings, ads_spec(ads_topics["impressions"]), stream_spark, kafka_bootstrap,
                 max_offsets_per_trigger=2000, handoff=False)
    rerun.run(timeout=300)
    assert sum(r["count"] for r in segment_rows(rerun.metadata, "ads")) == n
