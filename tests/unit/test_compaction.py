"""Tiered rollup compaction, in-process: config validation, planning (tiers, skipOffsetFromLatest, the
streaming window guard, idempotence), and real runs over generated data through the indexer and the
broker — every metric total is kept, rows shrink by exactly the expected factor, and SQL sees only
the compacted version (no double counting)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from radstack.storage.compaction import (
    CompactionConfig,
    CompactionConflictError,
    CompactionError,
    compact_datasource,
    compaction_config_document,
    delete_compaction_config,
    load_compaction_configs,
    plan_compaction,
    run_compaction,
    save_compaction_config,
)
from radstack.storage.segments import DataSegment, ShardSpec
from radstack.time.intervals import Interval, Period, format_instant, parse_instant
from serving.coordinator.duties.compaction import compaction_duty
from serving.coordinator.duties.overshadowed import mark_overshadowed_unused

MINUTE = 60_000
HOUR = 3_600_000
DAY = 86_400_000

METRICS = [
    {"type": "count", "name": "count"},
    {"type": "longSum", "name": "bytes", "fieldName": "bytes"},
    {"type": "doubleSum", "name": "revenue", "fieldName": "revenue"},
    {"type": "longMax", "name": "maxLatency", "fieldName": "latency"},
    {"type": "doubleMin", "name": "minPrice", "fieldName": "price"},
]


def ingest_schema(query_gran: str = "MINUTE") -> dict[str, Any]:
    return {
        "dataSource": "flows",
        "timestampSpec": {"column": "ts", "format": "millis"},
        "dimensionsSpec": {"dimensions": ["country", "device"]},
        "metricsSpec": METRICS,
        "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": query_gran, "rollup": True},
    }


def events(start: str, days: int, step_ms: int, combos: list[tuple[str, str]]) -> pa.Table:
    """Two events per (step, combo), deterministic values."""
    t0 = parse_instant(start)
    ts, country, device, nbytes, revenue, latency, price = [], [], [], [], [], [], []
    i = 0
    for k in range(days * DAY // step_ms):
        for c, d in combos:
            for off in (10_000, step_ms // 2 + 5_000):
                i += 1
                ts.append(t0 + k * step_ms + off)
                country.append(c)
                device.append(d)
                nbytes.append(100 + i % 97)
                revenue.append((i % 13) * 0.25)
                latency.append(i % 1009)
                price.append(1.0 + (i % 101) / 8)
    return pa.table({"ts": ts, "country": country, "device": device, "bytes": nbytes, "revenue": revenue,
                     "latency": latency, "price": price})


def truth(table: pa.Table) -> dict[str, Any]:
    import pyarrow.compute as pc

    return {"count": table.num_rows, "bytes": pc.sum(table["bytes"]).as_py(),
            "revenue": pc.sum(table["revenue"]).as_py(), "maxLatency": pc.max(table["latency"]).as_py(),
            "minPrice": pc.min(table["price"]).as_py()}


def sql(env: Any, query: str) -> list[tuple[Any, ...]]:
    from serving.broker.sql.engine import execute

    res = execute(env.service, query, metadata=env.metadata)
    try:
        rows: list[tuple[Any, ...]] = []
        for b in res.batches():
            rows.extend(zip(*[b.column(i).to_pylist() for i in range(b.num_columns)], strict=True))
        return rows
    finally:
        res.close()


def served_totals(env: Any) -> tuple[int, dict[str, Any]]:
    env.service.refresh(force=True)
    [(rows, cnt, nbytes, rev, lat, price)] = sql(
        env, 'SELECT COUNT(*), SUM("count"), SUM(bytes), SUM(revenue), MAX(maxLatency), MIN(minPrice) FROM flows')
    return rows, {"count": cnt, "bytes": nbytes, "revenue": rev, "maxLatency": lat, "minPrice": price}


def assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k] == pytest.approx(b[k], rel=1e-12), k


COMBOS6 = [(c, d) for c in ("US", "DE", "FR") for d in ("a", "b")]
RT_VERSION = "2024-01-01T00:00:00.000Z"


def config(**kw: Any) -> dict[str, Any]:
    base = {"dataSource": "flows", "metricsSpec": METRICS,
            "tiers": [{"olderThan": "P1D", "queryGranularity": "HOUR", "segmentGranularity": "DAY"}]}
    base.update(kw)
    return base


# ---- config ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [
    {},
    {"dataSource": "x"},  # neither granularitySpec nor tiers
    {"dataSource": "x", "tiers": [{"queryGranularity": "HOUR"}]},  # tier without olderThan
    {"dataSource": "x", "tiers": [{"olderThan": "soon", "segmentGranularity": "DAY"}]},
    {"dataSource": "x", "tiers": [{"olderThan": "P1D", "segmentGranularity": "HOUR", "queryGranularity": "DAY"}]},
    {"dataSource": "x", "granularitySpec": {"segmentGranularity": "fortnight"}},
    {"dataSource": "x", "granularitySpec": {"segmentGranularity": "DAY"}, "skipOffsetFromLatest": 5},
    {"dataSource": "x", "granularitySpec": {"segmentGranularity": "DAY"}, "metricsSpec": [{"type": "nope"}]},
])
def test_bad_configs_are_rejected(bad: dict[str, Any]) -> None:
    with pytest.raises(CompactionError):
        CompactionConfig.from_json(bad)


def test_config_round_trip_in_druid_shape(broker_env: Any) -> None:
    md = broker_env.metadata
    assert compaction_config_document(md)["compactionConfigs"] == []
    save_compaction_config(md, config())
    save_compaction_config(md, {"dataSource": "other", "granularitySpec": {"segmentGranularity": "DAY"}})
    save_compaction_config(md, config(skipOffsetFromLatest="PT6H"))  # replaces, does not duplicate
    doc = compaction_config_document(md)
    assert sorted(c["dataSource"] for c in doc["compactionConfigs"]) == ["flows", "other"]
    assert "compactionTaskSlotRatio" in doc and "maxCompactionTaskSlots" in doc
    cfgs = load_compaction_configs(md)
    assert cfgs["flows"].skip_offset == Period.parse("PT6H")
    assert delete_compaction_config(md, "other") and not delete_compaction_config(md, "other")
    assert list(load_compaction_configs(md)) == ["flows"]


# ---- planning (metadata only) ----------------------------------------------------------------


def hourly(first: str, hours: int, version: str = RT_VERSION) -> list[DataSegment]:
    t0 = parse_instant(first)
    return [DataSegment("flows", Interval(t0 + h * HOUR, t0 + (h + 1) * HOUR), version,
                        shard_spec=ShardSpec("numbered", 0, 0), num_rows=10, metrics=("count",))
            for h in range(hours)]


def test_plan_tiers_skip_offset_and_window_guard() -> None:
    segs = hourly("2024-01-01T00:00:00Z", 24 * 36)  # 2024-01-01 … 2024-02-05 (end 2024-02-06)
    cfg = CompactionConfig.from_json(config(skipOffsetFromLatest="PT0S", tiers=[
        {"olderThan": "P1D", "queryGranularity": "HOUR", "segmentGranularity": "DAY"},
        {"olderThan": "P30D", "queryGranularity": "DAY", "segmentGranularity": "MONTH"},
    ]))
    now = parse_instant("2024-03-05T00:00:00Z")  # now - P30D = 2024-02-04: January is a month tier
    plans = plan_compaction(segs, cfg, now_ms=now)
    got = [(format_instant(p.interval.start)[:10], p.tier.segment_granularity.to_json()) for p in plans]
    assert got == [("2024-02-05", "DAY"), ("2024-02-04", "DAY"), ("2024-02-03", "DAY"), ("2024-02-02", "DAY"),
                   ("2024-02-01", "DAY"), ("2024-01-01", "MONTH")]
    assert plans[-1].input_rows == 31 * 24 * 10 and len(plans[-1].inputs) == 31 * 24
    # skipOffsetFromLatest P1D (the default) keeps the newest day out
    cfg_skip = CompactionConfig.from_json(config(tiers=cfg.raw["tiers"]))
    assert "2024-02-05" not in [format_instant(p.interval.start)[:10] for p in plan_compaction(segs, cfg_skip, now_ms=now)]
    # olderThan: now = 2024-02-06T12:00 → only days that ended by 2024-02-05T12:00 (P1D), none a month
    now2 = parse_instant("2024-02-06T12:00:00Z")
    days = [format_instant(p.interval.start)[:10] for p in plan_compaction(segs, cfg, now_ms=now2)]
    assert days[0] == "2024-02-04" and days[-1] == "2024-01-01" and len(days) == 35
    # the streaming window: a bucket that ended less than windowPeriod ago is never planned
    no_age = CompactionConfig.from_json(config(skipOffsetFromLatest="PT0S", tiers=None,
                                               granularitySpec={"segmentGranularity": "DAY",
                                                                "queryGranularity": "HOUR"}))
    end = parse_instant("2024-02-06T00:00:00Z")
    near = [p.interval.end for p in plan_compaction(segs, no_age, now_ms=end + 5 * MINUTE)]
    assert end not in near and max(near) == end - DAY
    far = [p.interval.end for p in plan_compaction(segs, no_age, now_ms=end + 11 * MINUTE)]
    assert max(far) == end
    wide = [p.interval.end for p in plan_compaction(segs, no_age, now_ms=end + 11 * MINUTE,
                                                     window_period=Period.parse("PT1H"))]
    assert max(wide) == end - DAY


def test_plan_skips_what_is_already_compacted_for_its_tier() -> None:
    cfg = CompactionConfig.from_json(config(skipOffsetFromLatest="PT0S"))
    state = {"granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "HOUR", "rollup": True}}
    t0 = parse_instant("2024-01-01T00:00:00Z")
    done = DataSegment("flows", Interval(t0, t0 + DAY), "2024-01-05T00:00:00.000Z", num_rows=5,
                       shard_spec=ShardSpec("numbered", 0, 1), last_compaction_state=state)
    segs = hourly("2024-01-01T00:00:00Z", 48) + [done]
    plans = plan_compaction(segs, cfg, now_ms=parse_instant("2024-02-01T00:00:00Z"))
    assert [format_instant(p.interval.start)[:10] for p in plans] == ["2024-01-02"]
    # the same segment compacted for another tier (DAY query granularity) is compacted again
    other = DataSegment("flows", done.interval, done.version, num_rows=5, shard_spec=ShardSpec("numbered", 0, 1),
                        last_compaction_state={"granularitySpec": {"segmentGranularity": "DAY",
                                                                   "queryGranularity": "DAY"}})
    plans = plan_compaction(hourly("2024-01-01T00:00:00Z", 48) + [other], cfg,
                            now_ms=parse_instant("2024-02-01T00:00:00Z"))
    assert len(plans) == 2


# ---- real runs ------------------------------------------------------------------------------


def test_hour_tier_keeps_totals_and_rolls_up_60x(broker_env: Any) -> None:
    raw = events("2024-01-01T00:00:00Z", 2, MINUTE, COMBOS6)
    broker_env.index(raw, ingest_schema(), version=RT_VERSION, shard="append")
    expected = truth(raw)
    rows_before, served_before = served_totals(broker_env)
    assert rows_before == 2 * 1440 * 6
    assert_same(served_before, expected)

    md, deep = broker_env.metadata, broker_env.deep_storage
    cfg = CompactionConfig.from_json(config(skipOffsetFromLatest="PT0S"))
    now = parse_instant("2024-01-10T00:00:00Z")
    plans, results, errors = compact_datasource(md, deep, cfg, settings=broker_env.settings, now_ms=now)
    assert not errors and len(plans) == 2 and len(results) == 2
    for r in results:
        assert r.rows_in == 1440 * 6 and r.rows_out == 24 * 6  # exactly 60x fewer rows
        assert r.rows_in // r.rows_out == 60
        assert all(s.last_compaction_state and s.interval == r.plan.interval for s in r.segments)
        assert r.version > RT_VERSION
    rows_after, served_after = served_totals(broker_env)
    assert rows_after == 2 * 24 * 6  # only the compacted version is served
    assert_same(served_after, expected)  # no double counting, nothing lost
    by_hour = sql(broker_env, "SELECT TIME_FLOOR(__time, 'PT1H'), SUM(\"count\") FROM flows GROUP BY 1")
    assert len(by_hour) == 48 and {c for _, c in by_hour} == {2 * 60 * 6}

    # idempotent: nothing left to plan
    assert compact_datasource(md, deep, cfg, settings=broker_env.settings, now_ms=now, dry_run=True)[0] == []
    # the detailed segments are fully overshadowed and the coordinator can mark them unused
    unused = mark_overshadowed_unused(md)
    assert len(unused) == 48 and all(RT_VERSION in i for i in unused)
    assert_same(served_totals(broker_env)[1], expected)


def test_the_coordinators_compaction_pass_is_a_task(broker_env: Any) -> None:
    """#51: each datasource the coordinator compacts shows as a ``compact`` task with its report and log;
    a pass with nothing to compact makes none."""
    broker_env.index(events("2024-01-01T00:00:00Z", 1, MINUTE, COMBOS6), ingest_schema(), version=RT_VERSION,
                     shard="append")
    md, deep = broker_env.metadata, broker_env.deep_storage
    save_compaction_config(md, config(skipOffsetFromLatest="PT0S"))
    base = broker_env.settings
    settings = base.model_copy(update={"coordinator": base.coordinator.model_copy(update={
        "compaction": base.coordinator.compaction.model_copy(update={"on": True})})})
    now = parse_instant("2024-01-10T00:00:00Z")
    assert len(compaction_duty(md, deep, settings, now_ms=now, force=True)) == 1
    [task] = [t for t in md.list_tasks() if t.type == "compact"]
    assert task.status == "SUCCESS" and task.datasource == "flows" and task.payload["startedBy"] == "coordinator"
    assert task.report is not None and len(task.report["results"]) == 1
    assert "compacted 2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z: 8,640 → 144 rows" in \
        Path(task.report["log"]).read_text()
    assert compaction_duty(md, deep, settings, now_ms=now, force=True) == []  # nothing left: no new task
    assert len([t for t in md.list_tasks() if t.type == "compact"]) == 1


def test_two_tiers_month_and_day(broker_env: Any) -> None:
    raw = events("2024-01-01T00:00:00Z", 36, 10 * MINUTE, [("US", "a"), ("DE", "b")])
    broker_env.index(raw, ingest_schema("TEN_MINUTE"), version=RT_VERSION, shard="append")
    expected = truth(raw)
    cfg = CompactionConfig.from_json(config(skipOffsetFromLatest="PT0S", tiers=[
        {"olderThan": "P1D", "queryGranularity": "HOUR", "segmentGranularity": "DAY"},
        {"olderThan": "P30D", "queryGranularity": "DAY", "segmentGranularity": "MONTH"},
    ]))
    md, deep = broker_env.metadata, broker_env.deep_storage
    now = parse_instant("2024-03-05T00:00:00Z")
    plans, results, errors = compact_datasource(md, deep, cfg, settings=broker_env.settings, now_ms=now)
    assert not errors and len(results) == 6
    month = [r for r in results if r.plan.tier.segment_granularity.to_json() == "MONTH"]
    assert len(month) == 1 and month[0].rows_out == 31 * 2 and month[0].rows_in == 31 * 144 * 2
    assert sum(r.rows_out for r in results if r is not month[0]) == 5 * 24 * 2
    rows, served = served_totals(broker_env)
    assert rows == 31 * 2 + 5 * 24 * 2
    assert_same(served, expected)


def test_a_changed_interval_is_not_published(broker_env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = events("2024-01-01T00:00:00Z", 1, MINUTE, COMBOS6[:2])
    broker_env.index(raw, ingest_schema(), version=RT_VERSION, shard="append")
    md, deep = broker_env.metadata, broker_env.deep_storage
    cfg = CompactionConfig.from_json(config(skipOffsetFromLatest="PT0S"))
    [plan] = plan_compaction(md.segments("flows"), cfg, now_ms=parse_instant("2024-01-10T00:00:00Z"))
    # a late append lands in the interval after the plan was made
    late = pa.table({"ts": [parse_instant("2024-01-01T05:10:00Z")], "country": ["US"], "device": ["a"],
                     "bytes": [1], "revenue": [1.0], "latency": [1], "price": [1.0]})
    broker_env.index(late, ingest_schema(),
                     version=RT_VERSION, shard="append", partition_offset={
                         Interval(parse_instant("2024-01-01T05:00:00Z"), parse_instant("2024-01-01T06:00:00Z")): 1})
    files_before = set(deep.list("segments/"))
    with pytest.raises(CompactionConflictError):
        run_compaction(md, deep, plan, cfg, settings=broker_env.settings)
    assert set(deep.list("segments/")) == files_before  # its output files were deleted
    assert {s.version for s in md.segments("flows")} == {RT_VERSION}


def test_unknown_metric_combination_is_an_error(broker_env: Any) -> None:
    raw = events("2024-01-01T00:00:00Z", 1, 30 * MINUTE, [("US", "a")])
    broker_env.index(raw, ingest_schema(), version=RT_VERSION, shard="append")
    cfg = CompactionConfig.from_json({"dataSource": "flows", "skipOffsetFromLatest": "PT0S",
                                      "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "DAY"}})
    [plan] = plan_compaction(broker_env.metadata.segments("flows"), cfg, now_ms=parse_instant("2024-02-01T00:00:00Z"))
    with pytest.raises(CompactionError, match="metricsSpec"):
        run_compaction(broker_env.metadata, broker_env.deep_storage, plan, cfg, settings=broker_env.settings)


def test_compaction_builds_the_configured_projections(broker_env: Any) -> None:
    """Compaction writes the projections of its config beside each compacted segment; the broker reads
    them for covered queries, with the base rows' answers."""
    raw = events("2024-01-01T00:00:00Z", 1, MINUTE, COMBOS6)
    broker_env.index(raw, ingest_schema(), version=RT_VERSION, shard="append")
    daily_country = {"type": "aggregate", "name": "daily_country", "groupingColumns": ["country"],
                     "aggregators": [{"type": "longSum", "name": "bytes", "fieldName": "bytes"},
                                     {"type": "longMax", "name": "maxLatency", "fieldName": "maxLatency"}]}
    cfg = CompactionConfig.from_json(config(skipOffsetFromLatest="PT0S", projections=[daily_country]))
    _, results, errors = compact_datasource(broker_env.metadata, broker_env.deep_storage, cfg,
                                            settings=broker_env.settings, now_ms=parse_instant("2024-01-10T00:00:00Z"))
    assert not errors and len(results) == 1
    [seg] = results[0].segments
    assert [(p["name"], p["numRows"]) for p in seg.projections] == [("daily_country", 3)]
    mark_overshadowed_unused(broker_env.metadata)
    broker_env.service.refresh(force=True)
    query = "SELECT country, COUNT(*), SUM(bytes), MAX(maxLatency) FROM flows GROUP BY 1 ORDER BY 1"
    from serving.broker.sql.engine import execute

    res = execute(broker_env.service, query)
    res.close()
    assert res.translation.projections == {"flows": "daily_country"}
    with_projection = sql(broker_env, query)
    res = execute(broker_env.service, query, context={"noProjections": True})
    base = [tuple(r.values()) for b in res.batches() for r in b.to_pylist()]
    res.close()
    assert with_projection == base and [r[1] for r in base] == [48, 48, 48]  # 24 hours × 2 devices
