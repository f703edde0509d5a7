"""Transforms + filter, exact dedup, the window period, the batch join and enrichment, on small
DataFrames in a local Spark session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from radstack.spec import load_datasource_spec

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _spec(**kw: Any) -> Any:
    ds = {
        "dataSource": "t",
        "timestampSpec": {"column": "ts"},
        "dimensionsSpec": {"dimensions": ["page", "user", "country"]},
        "metricsSpec": [{"type": "count", "name": "count"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
        "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "minute"},
    }
    ds.update(kw.pop("schema", {}))
    return load_datasource_spec({"dataSchema": ds, "processing": {"topics": ["t"], "eventId": "id", **kw}})


def _df(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, "id string, page string, user string, country string, added bigint, __time bigint")


def test_transforms_read_the_input_row_and_filter_reads_the_output(stream_spark: Any) -> None:
    from radstack.pipeline.transform import transform_and_filter

    spec = _spec(
        schema={"transformSpec": {
            "transforms": [
                {"type": "expression", "name": "page", "expression": "upper(page)"},
                {"type": "expression", "name": "user", "expression": "concat(page, '-', user)"},
            ],
            "filter": {"type": "selector", "dimension": "page", "value": "MAIN"},
        }},
        defaults={"country": "unknown"},
    )
    df = _df(stream_spark, [("1", "main", "a", None, 1, T0), ("2", "talk", "b", "", 2, T0), ("3", "main", "c", "", 3, T0)])
    out = sorted(tuple(r) for r in transform_and_filter(df, spec).select("id", "page", "user", "country").collect())
    assert out == [("1", "MAIN", "main-a", "unknown"), ("3", "MAIN", "main-c", "unknown")]


def test_time_transform_replaces_the_event_time(stream_spark: Any) -> None:
    from radstack.pipeline.transform import apply_transforms

    spec = _spec(schema={"transformSpec": {"transforms": [
        {"type": "expression", "name": "__time", "expression": "__time + 3600000"}]}})
    df = _df(stream_spark, [("1", "p", "u", "c", 1, T0)])
    assert apply_transforms(df, spec).collect()[0]["__time"] == T0 + 3_600_000


def test_exact_dedup_keeps_one_row_per_event_id(stream_spark: Any) -> None:
    from radstack.pipeline.dedup import dedup_exact

    df = _df(stream_spark, [("1", "p", "u", "c", 1, T0), ("1", "p", "u", "c", 1, T0), ("2", "p", "u", "c", 1, T0)])
    assert dedup_exact(df, "id").count() == 2
    assert dedup_exact(df, None).count() == 3


def test_window_period_drops_late_rows(stream_spark: Any) -> None:
    from radstack.pipeline.window import drop_late, interval_closed, late_threshold, window_millis
    from radstack.time.intervals import Interval, Period

    w = window_millis(Period.parse("PT10M"))
    assert w == 600_000
    df = _df(stream_spark, [("1", "p", "u", "c", 1, T0), ("2", "p", "u", "c", 1, T0 + 600_000)])
    thr = late_threshold(T0 + 1_200_000, w)
    assert [r["id"] for r in drop_late(df, thr).collect()] == ["2"]
    assert drop_late(df, late_threshold(None, w)).count() == 2
    hour = Interval(T0, T0 + 3_600_000)
    assert not interval_closed(hour, T0 + 3_600_000 + w - 1, w)
    assert interval_closed(hour, T0 + 3_600_000 + w, w)


def test_batch_join_emits_one_row_per_impression_with_is_clicked(stream_spark: Any) -> None:
    from radstack.pipeline.join import join_batch

    imps = stream_spark.createDataFrame(
        [("i1", "p", T0), ("i2", "p", T0), ("i3", "q", T0 + 1000)], "impression_id string, publisher string, __time bigint")
    clicks = [
        {"timestamp": "2026-01-01T00:00:05Z", "click_id": "c1", "impression_id": "i1"},
        {"timestamp": "2026-01-01T00:00:05Z", "click_id": "c1", "impression_id": "i1"},  # duplicate
        {"timestamp": "2026-01-01T00:00:06Z", "click_id": "c2", "impression_id": "i1"},  # second click
        {"timestamp": "2026-01-01T01:00:00Z", "click_id": "c3", "impression_id": "i3"},  # outside the window
        {"timestamp": "bad", "click_id": "c4", "impression_id": "i2"},  # invalid
    ]
    raw = stream_spark.createDataFrame([(json.dumps(c).encode(),) for c in clicks], "value binary")
    j = {"name": "clicks", "type": "stream", "on": "impression_id", "eventId": "click_id", "window": "PT2M"}
    out = {r["impression_id"]: r["is_clicked"] for r in join_batch(imps, raw, j).collect()}
    assert out == {"i1": 1, "i2": 0, "i3": 0}


def test_enrichment_ip_range_and_lookup_from_deep_storage(stream_spark: Any, tmp_path: Path) -> None:
    from radstack.pipeline import enrich
    from radstack.storage.deep_storage import open_deep_storage

    cfg = {"type": "local", "path": str(tmp_path / "deep")}
    storage = open_deep_storage(cfg)
    storage.put_bytes(b"start,end,value\n10.0.0.0,10.0.0.255,AS100\n10.0.1.0,10.0.1.255,AS200\n", "lookups/asn.csv")
    storage.put_bytes(json.dumps({"AS100": "Example Net", "AS200": "Other Net"}).encode(), "lookups/asname.json")
    enrich.set_deep_storage(cfg)
    spec = _spec(enrich=[
        {"type": "ip_range", "field": "src_ip", "output": "src_as", "key": "lookups/asn.csv", "default": "unknown"},
        {"type": "lookup", "field": "src_as", "output": "as_name", "key": "lookups/asname.json"},
        {"type": "ip_range", "field": "src_ip", "output": "net", "ranges": [{"cidr": "10.0.0.0/23", "value": "lab"}]},
    ])
    df = stream_spark.createDataFrame(
        [("a", "10.0.0.7"), ("b", "10.0.1.200"), ("c", "192.168.1.1"), ("d", "garbage")], "id string, src_ip string")
    got = {r["id"]: (r["src_as"], r["as_name"], r["net"]) for r in enrich.enrich(df, spec, stream_spark).collect()}
    assert got == {
        "a": ("AS100", "Example Net", "lab"),
        "b": ("AS200", "Other Net", "lab"),
        "c": ("unknown", None, None),
        "d": ("unknown", None, None),
    }
    assert enrich.ip_to_long("10.0.1.0") == 10 * 2**24 + 256


def test_marking_form_flags_exactly_the_rows_the_dropping_form_drops(stream_spark: Any) -> None:
    """The streaming sink's one-pass form keeps every row and flags rejects; the batch form drops them."""
    from pyspark.sql import functions as F

    from radstack.pipeline.batch import finish_pipeline

    spec = _spec(schema={"transformSpec": {
        "transforms": [{"type": "expression", "name": "__time",
                        "expression": "if(page == 'nulltime', null, __time)"}],
        "filter": {"type": "selector", "dimension": "country", "value": "nl"},
    }})  # fmt: skip
    df = _df(stream_spark, [("1", "p", "u", "nl", 1, T0), ("2", "p", "u", "de", 2, T0),
                            ("3", "nulltime", "u", "nl", 3, T0), ("4", "p", "u", "nl", 4, T0 + 1)])  # fmt: skip
    dropped = finish_pipeline(df, spec)
    marked = finish_pipeline(df.withColumn("__keep", F.lit(True)), spec, mark="__keep", keep=("id",))
    assert marked.count() == 4
    assert marked.columns[-2:] == ["id", "__keep"]
    kept = marked.where("__keep").drop("id", "__keep")
    assert sorted(map(tuple, kept.collect())) == sorted(map(tuple, dropped.collect()))
    assert sorted(r["id"] for r in marked.where("NOT __keep").collect()) == ["2", "3"]
