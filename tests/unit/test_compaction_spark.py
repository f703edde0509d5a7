"""Compaction as a Spark job (local[*], real PySpark): reading the segment Parquet files from deep
storage URIs, the indexer per Arrow partition, one core set — and the same answer as the in-process
runner, row for row."""

from __future__ import annotations

from typing import Any

import pyarrow.compute as pc
import pytest

from batch.compaction_job import compact_with_spark
from radstack.storage.compaction import CompactionConfig, plan_compaction, run_compaction
from radstack.storage.segment_format import read_segment_table
from radstack.time.intervals import parse_instant
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


def test_both_runners_keep_array_and_multi_value_columns(broker_env: Any) -> None:
    """Schemaless compaction (no dimensions in the config, no catalog spec) types its output from the
    input files: an ARRAY<STRING> column stays ARRAY (its mark survives Spark, which reads it as a plain
    string array) and a multi-value one stays multi-value; equal arrays roll up."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from radstack.storage.segment_format import value_type_of

    schema = {
        "dataSource": "tagged",
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": [
            {"type": "auto", "name": "tags", "castToType": "ARRAY<STRING>"},
            {"type": "auto", "name": "codes", "castToType": "ARRAY<LONG>"},
            {"type": "string", "name": "mv", "multiValueHandling": "SORTED_ARRAY"}]},
        "metricsSpec": [{"type": "count", "name": "count"}],
        "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "none", "rollup": False},
    }
    ts = [f"2024-01-0{d}T0{h}:{m:02d}:00Z" for d in (1, 2, 3) for h in (0, 1) for m in (0, 30)]
    tags = ['["b", "a"]', '["b", "a"]', '["a", "b"]', None] * 3
    raw = pa.table({"ts": ts, "tags": tags, "codes": ["[1, 2]", "[1, 2]", "[3]", "[]"] * 3, "mv": tags})
    broker_env.index(raw, schema, version=RT_VERSION, shard="append")
    md, deep = broker_env.metadata, broker_env.deep_storage
    cfg = CompactionConfig.from_json({"dataSource": "tagged", "skipOffsetFromLatest": "PT0S",
                                      "metricsSpec": [{"type": "longSum", "name": "count", "fieldName": "count"}],
                                      "tiers": [{"olderThan": "P1D", "queryGranularity": "DAY",
                                                 "segmentGranularity": "DAY"}]})
    plans = plan_compaction(md.segments("tagged"), cfg, now_ms=parse_instant("2024-01-10T00:00:00Z"))
    day1, day2 = sorted(plans, key=lambda p: p.interval.start)[:2]  # the last day with data is left alone
    settings = broker_env.settings.with_overrides({"spark": {"shuffle_partitions": 2}})
    results = (run_compaction(md, deep, day1, cfg, settings=settings, runner="spark", spark_compactor=compact_with_spark),
               run_compaction(md, deep, day2, cfg, settings=settings, runner="inprocess"))
    for res in results:
        tables = [pq.read_table(s.load_spec["path"]) for s in res.segments]
        for t in tables:
            assert [value_type_of(t.schema.field(c)) for c in ("tags", "codes", "mv")] == [
                "array<string>", "array<long>", "multi"], res.runner
        rows = sorted(((r["tags"], r["codes"], r["mv"], r["count"]) for t in tables for r in t.to_pylist()), key=repr)
        assert rows == sorted([(["b", "a"], [1, 2], ["a", "b"], 2), (["a", "b"], [3], ["a", "b"], 1),
                               (None, [], None, 1)], key=repr), res.runner
