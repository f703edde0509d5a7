"""Compaction as a Spark job (local[*], real PySpark): reading the segment Parquet files from deep
storage URIs, the indexer per Arrow partition, one core set — and the same answer as the in-process
runner, row for row."""

from __future__ import annotations

from typing import Any

import pyarrow.compute as pc
import pytest

from batch.compaction_job import compact_with_spark
from radstack.intervals import parse_instant
from radstack.storage.compaction import CompactionConfig, plan_compaction, run_compaction
from radstack.storage.segment_format import read_segment_table
from tests.unit.test_compaction import COMBOS6, MINUTE, RT_VERSION, config, events, ingest_schema, truth

pytestmark = pytest.mark.slow


def output_rows(env: Any, segments: list[Any]) -> list[dict[str, Any]]:
    import pyarrow as pa

    tables = [read_segment_table(s.load_spec["path"]) for s in segments]  # local deep storage
    t = pa.concat_tables(tables)
    rows = t.to_pylist()
    return sorted(rows, key=lambda r: (r["__time"], r["country"], r["device"]))


def test_spark_runner_equals_in_process(broker_env: Any) -> None:
    raw = events("2024-01-01T00:00:00Z", 2, MINUTE, COMBOS6)
    broker_env.index(raw, ingest_schema(), version=RT_VERSION, shard="append")
    md, deep = broker_env.metadata, broker_env.deep_storage
    cfg = CompactionConfig.from_json(config(skipOffsetFromLatest="PT0S"))
    now = parse_instant("2024-01-10T00:00:00Z")
    day2, day1 = plan_compaction(md.segments("flows"), cfg, now_ms=now)

    settings = broker_env.settings.with_overrides({"spark": {"shuffle_partitions": 3}})
    spark_res = run_compaction(md, deep, day1, cfg, settings=settings, runner="spark", spark_compactor=compact_with_spark)
    local_res = run_compaction(md, deep, day2, cfg, settings=settings, runner="inprocess")
    assert spark_res.runner == "spark" and spark_res.rows_in == local_res.rows_in == 1440 * 6
    assert spark_res.rows_out == local_res.rows_out == 24 * 6
    # one complete core set per interval
    parts = sorted(s.partition_num for s in spark_res.segments)
    assert parts == list(range(len(parts))) and all(s.shard_spec.partitions == len(parts) for s in spark_res.segments)
    assert spark_res.totals["in"] == spark_res.totals["out"]

    exp = truth(raw)
    rows = output_rows(broker_env, spark_res.segments) + output_rows(broker_env, local_res.segments)
    assert sum(r["count"] for r in rows) == exp["count"]
    assert sum(r["bytes"] for r in rows) == exp["bytes"]
    assert max(r["maxLatency"] for r in rows) == exp["maxLatency"]
    # the Spark output for day 1 equals what the in-process runner makes of the same day
    day1_raw = raw.filter(pc.less(raw["ts"], parse_instant("2024-01-02T00:00:00Z")))
    assert sum(r["count"] for r in output_rows(broker_env, spark_res.segments)) == day1_raw.num_rows
    assert sum(r["bytes"] for r in output_rows(broker_env, spark_res.segments)) == pc.sum(day1_raw["bytes"]).as_py()
