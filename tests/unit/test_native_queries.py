"""Native queries against the small ``wiki`` dataset (tests/fixtures/broker.py), indexed through the
real indexer: every expectation below was worked out by hand from the 8 input events.

After hourly rollup the datasource holds 7 rows:
  day 1  00h Main/alice/US ns0  count 2 added 15 delta  1.0
         01h Talk/bob/DE   ns1  count 1 added  7 delta  2.0
         03h Main/carol/-  ns0  count 1 added  1 delta  0.25
  day 2  00h Main/bob/DE   ns0  count 1 added 20 delta  4.0
         02h Help/alice/US ns4  count 1 added  3 delta -1.0
         02h Talk/dave/FR  ns1  count 1 added  8 delta  0.5
         05h Main/alice/US ns0  count 1 added  2 delta  1.0
"""

from __future__ import annotations

from typing import Any

import pytest

from serving.broker.native import run_native_query
from serving.errors import DruidError

IV = ["2024-01-01/2024-01-03"]
D1, D2 = "2024-01-01T00:00:00.000Z", "2024-01-02T00:00:00.000Z"
ADDED = {"type": "longSum", "name": "added", "fieldName": "added"}
ROWS = {"type": "count", "name": "rows"}
EVENTS = {"type": "longSum", "name": "events", "fieldName": "count"}


def run(env: Any, **q: Any) -> list[dict[str, Any]]:
    q.setdefault("dataSource", "wiki")
    q.setdefault("intervals", IV)
    return run_native_query(env.service, q)


# ---- timeseries -------------------------------------------------------------------------------------
def test_timeseries_by_day(wiki: Any) -> None:
    out = run(wiki, queryType="timeseries", granularity="day", aggregations=[ROWS, EVENTS, ADDED])
    assert out == [
        {"timestamp": D1, "result": {"rows": 3, "events": 4, "added": 23}},
        {"timestamp": D2, "result": {"rows": 4, "events": 4, "added": 33}},
    ]


def test_timeseries_fills_interior_buckets_per_segment(wiki: Any) -> None:
    out = run(wiki, queryType="timeseries", granularity="hour", aggregations=[ROWS, ADDED])
    stamps = [r["timestamp"][11:13] for r in out]
    # day 1 has data 00h..03h, day 2 00h..05h; nothing is filled between the two segments' data
    assert stamps == ["00", "01", "02", "03", "00", "01", "02", "03", "04", "05"]
    assert out[2] == {"timestamp": "2024-01-01T02:00:00.000Z", "result": {"rows": 0, "added": None}}
    assert out[6]["result"] == {"rows": 2, "added": 11}


def test_timeseries_skip_empty_descending_limit(wiki: Any) -> None:
    out = run(wiki, queryType="timeseries", granularity="hour", aggregations=[ADDED],
              context={"skipEmptyBuckets": True})
    assert len(out) == 6  # 7 rows, two of them in day 2's 02h
    out = run(wiki, queryType="timeseries", granularity="day", aggregations=[ADDED], descending=True, limit=1)
    assert out == [{"timestamp": D2, "result": {"added": 33}}]


def test_timeseries_grand_total_and_all(wiki: Any) -> None:
    out = run(wiki, queryType="timeseries", granularity="day", aggregations=[ADDED],
              context={"grandTotal": True})
    assert out[-1] == {"timestamp": None, "result": {"added": 56}}
    out = run(wiki, queryType="timeseries", granularity="all", aggregations=[ROWS],
              intervals=["2023-06-01/2025-01-01"])
    # under "all" the timestamp is where the data starts, not the interval start
    assert out == [{"timestamp": D1, "result": {"rows": 7}}]


def test_timeseries_period_granularity_in_a_time_zone(wiki: Any) -> None:
    gran = {"type": "period", "period": "P1D", "timeZone": "America/Los_Angeles"}
    out = run(wiki, queryType="timeseries", granularity=gran, aggregations=[ADDED])
    assert out == [
        {"timestamp": "2023-12-31T00:00:00.000-08:00", "result": {"added": 23}},
        {"timestamp": "2024-01-01T00:00:00.000-08:00", "result": {"added": 33}},
    ]
    out = run(wiki, queryType="timeseries", granularity={"type": "duration", "duration": 7200000,
                                                         "origin": "2024-01-01T01:00:00Z"},
              aggregations=[ADDED], context={"skipEmptyBuckets": True})
    assert [(r["timestamp"], r["result"]["added"]) for r in out] == [
        ("2023-12-31T23:00:00.000Z", 15), ("2024-01-01T01:00:00.000Z", 7),
        ("2024-01-01T03:00:00.000Z", 1), ("2024-01-01T23:00:00.000Z", 20),
        ("2024-01-02T01:00:00.000Z", 11), ("2024-01-02T05:00:00.000Z", 2),
    ]


def test_aggregators(wiki: Any) -> None:
    aggs = [
        {"type": "filtered", "filter": {"type": "selector", "dimension": "country", "value": "US"},
         "aggregator": {"type": "count", "name": "us_rows"}},
        {"type": "doubleSum", "name": "delta", "fieldName": "delta"},
        {"type": "longMax", "name": "max_added", "fieldName": "added"},
        {"type": "doubleMin", "name": "min_delta", "fieldName": "delta"},
        {"type": "longFirst", "name": "first_added", "fieldName": "added"},
        {"type": "longLast", "name": "last_added", "fieldName": "added"},
        {"type": "stringLast", "name": "last_user", "fieldName": "user"},
        {"type": "cardinality", "name": "users", "fields": ["user"]},
        {"type": "cardinality", "name": "pairs", "fields": ["page", "country"], "byRow": True},
        {"type": "hyperUnique", "name": "hu", "fieldName": "user"},
        {"type": "doubleMean", "name": "mean_delta", "fieldName": "delta"},
        {"type": "longSum", "name": "twice", "expression": "added * 2"},
        {"type": "max", "name": "lenient_max", "fieldName": "added"},
    ]
    (row,) = run(wiki, queryType="timeseries", granularity="all", aggregations=aggs)
    r = row["result"]
    assert r["us_rows"] == 3
    assert r["delta"] == 7.75
    assert (r["max_added"], r["min_delta"], r["first_added"], r["last_added"]) == (20, -1.0, 15, 2)
    assert r["last_user"] == "alice"
    assert (r["users"], r["pairs"]) == (4.0, 6.0)
    assert r["hu"] == pytest.approx(4.0, rel=0.05)
    assert r["mean_delta"] == pytest.approx(7.75 / 7)
    assert r["twice"] == 112
    assert r["lenient_max"] == 20.0


def test_post_aggregators(wiki: Any) -> None:
    posts = [
        {"type": "arithmetic", "name": "per_row", "fn": "/",
         "fields": [{"type": "fieldAccess", "fieldName": "added"}, {"type": "fieldAccess", "fieldName": "rows"}]},
        {"type": "arithmetic", "name": "plus", "fn": "+",
         "fields": [{"type": "fieldAccess", "fieldName": "added"}, {"type": "constant", "value": 1}]},
        {"type": "arithmetic", "name": "div0", "fn": "/",
         "fields": [{"type": "fieldAccess", "fieldName": "added"}, {"type": "constant", "value": 0}]},
        {"type": "doubleGreatest", "name": "g", "fields": [{"type": "fieldAccess", "fieldName": "added"},
                                                          {"type": "constant", "value": 30}]},
        {"type": "expression", "name": "e", "expression": "added - rows"},
    ]
    out = run(wiki, queryType="timeseries", granularity="day", aggregations=[ROWS, ADDED],
              postAggregations=posts)
    assert out[0]["result"] == {"rows": 3, "added": 23, "per_row": 23 / 3, "plus": 24.0, "div0": 0.0,
                                "g": 30.0, "e": 20}
    assert out[1]["result"]["g"] == 33.0


# ---- topN ---------------------------------------------------------------------------------------------
def test_topn_numeric_inverted_dimension(wiki: Any) -> None:
    out = run(wiki, queryType="topN", granularity="all", dimension="user", threshold=2, metric="added",
              aggregations=[ADDED])
    assert out == [{"timestamp": D1, "result": [{"user": "bob", "added": 27}, {"user": "alice", "added": 20}]}]
    out = run(wiki, queryType="topN", granularity="all", dimension="user", threshold=2,
              metric={"type": "inverted", "metric": {"type": "numeric", "metric": "added"}}, aggregations=[ADDED])
    assert [r["user"] for r in out[0]["result"]] == ["carol", "dave"]
    out = run(wiki, queryType="topN", granularity="all", dimension="user", threshold=2,
              metric={"type": "dimension", "ordering": "lexicographic", "previousStop": "alice"},
              aggregations=[ADDED])
    assert out[0]["result"] == [{"user": "bob", "added": 27}, {"user": "carol", "added": 1}]


def test_topn_per_day_with_dimension_spec(wiki: Any) -> None:
    out = run(wiki, queryType="topN", granularity="day", threshold=1, metric="added", aggregations=[ADDED],
              dimension={"type": "default", "dimension": "user", "outputName": "who"})
    assert out == [
        {"timestamp": D1, "result": [{"who": "alice", "added": 15}]},
        {"timestamp": D2, "result": [{"who": "bob", "added": 20}]},
    ]


# ---- groupBy ------------------------------------------------------------------------------------------
def test_groupby_limit_spec_and_having(wiki: Any) -> None:
    out = run(wiki, queryType="groupBy", granularity="all", dimensions=["page", "country"], aggregations=[ADDED],
              limitSpec={"type": "default", "limit": 3,
                         "columns": [{"dimension": "added", "direction": "descending"}]})
    assert out == [
        {"version": "v1", "timestamp": D1, "event": {"page": "Main", "country": "DE", "added": 20}},
        {"version": "v1", "timestamp": D1, "event": {"page": "Main", "country": "US", "added": 17}},
        {"version": "v1", "timestamp": D1, "event": {"page": "Talk", "country": "FR", "added": 8}},
    ]
    out = run(wiki, queryType="groupBy", granularity="all", dimensions=["page", "country"], aggregations=[ADDED],
              having={"type": "greaterThan", "aggregation": "added", "value": 5})
    assert [(r["event"]["page"], r["event"]["country"]) for r in out] == [
        ("Main", "DE"), ("Main", "US"), ("Talk", "DE"), ("Talk", "FR")]
    out = run(wiki, queryType="groupBy", granularity="all", dimensions=["country"], aggregations=[ADDED],
              having={"type": "not", "havingSpec": {"type": "dimSelector", "dimension": "country", "value": "US"}})
    assert [(r["event"]["country"], r["event"]["added"]) for r in out] == [(None, 1), ("DE", 27), ("FR", 8)]


def test_groupby_by_day_offset_and_dimension_order(wiki: Any) -> None:
    out = run(wiki, queryType="groupBy", granularity="day", dimensions=["page"], aggregations=[ADDED])
    assert [(r["timestamp"], r["event"]["page"], r["event"]["added"]) for r in out] == [
        (D1, "Main", 16), (D1, "Talk", 7), (D2, "Help", 3), (D2, "Main", 22), (D2, "Talk", 8)]
    out = run(wiki, queryType="groupBy", granularity="all", dimensions=["user"], aggregations=[ADDED],
              limitSpec={"type": "default", "limit": 2, "offset": 1,
                         "columns": [{"dimension": "user", "direction": "descending", "dimensionOrder": "strlen"}]})
    # strlen descending: alice/carol (5) then dave (4), bob (3); ties by value descending
    assert [r["event"]["user"] for r in out] == ["alice", "dave"]


def test_groupby_output_types_extraction_virtual_columns(wiki: Any) -> None:
    out = run(wiki, queryType="groupBy", granularity="all", dimensions=["ns"], aggregations=[ROWS])
    assert [r["event"] for r in out] == [{"ns": "0", "rows": 4}, {"ns": "1", "rows": 2}, {"ns": "4", "rows": 1}]
    out = run(wiki, queryType="groupBy", granularity="all", aggregations=[ROWS],
              dimensions=[{"type": "default", "dimension": "ns", "outputName": "n", "outputType": "LONG"}])
    assert [r["event"]["n"] for r in out] == [0, 1, 4]
    out = run(wiki, queryType="groupBy", granularity="all", aggregations=[ADDED], dimensions=[
        {"type": "extraction", "dimension": "user", "outputName": "initial",
         "extractionFn": {"type": "substring", "index": 0, "length": 1}}])
    assert [(r["event"]["initial"], r["event"]["added"]) for r in out] == [("a", 20), ("b", 27), ("c", 1), ("d", 8)]
    out = run(wiki, queryType="groupBy", granularity="all", dimensions=["big"],
              virtualColumns=[{"type": "expression", "name": "big", "expression": "added > 5",
                               "outputType": "LONG"}],
              aggregations=[ROWS])
    assert [r["event"] for r in out] == [{"big": "0", "rows": 3}, {"big": "1", "rows": 4}]
    out = run(wiki, queryType="groupBy", granularity="all", dimensions=[], aggregations=[ADDED],
              filter={"type": "selector", "dimension": "big", "value": "1"},
              virtualColumns=[{"type": "expression", "name": "big", "expression": "added > 5",
                               "outputType": "LONG"}])
    assert out == [{"version": "v1", "timestamp": D1, "event": {"added": 50}}]


def test_groupby_subtotals(wiki: Any) -> None:
    out = run(wiki, queryType="groupBy", granularity="all", dimensions=["page", "country"], aggregations=[ADDED],
              subtotalsSpec=[["page"], []])
    events = [r["event"] for r in out]
    assert events == [
        {"page": "Help", "country": None, "added": 3},
        {"page": "Main", "country": None, "added": 38},
        {"page": "Talk", "country": None, "added": 15},
        {"page": None, "country": None, "added": 56},
    ]


def test_groupby_time_format_extraction(wiki: Any) -> None:
    out = run(wiki, queryType="groupBy", granularity="all", aggregations=[ADDED], dimensions=[
        {"type": "extraction", "dimension": "__time", "outputName": "day",
         "extractionFn": {"type": "timeFormat", "format": "yyyy-MM-dd", "timeZone": "UTC"}}])
    assert [(r["event"]["day"], r["event"]["added"]) for r in out] == [("2024-01-01", 23), ("2024-01-02", 33)]


# ---- scan ---------------------------------------------------------------------------------------------
SEG1 = "wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_2024-02-01T00:00:00.000Z"
SEG2 = "wiki_2024-01-02T00:00:00.000Z_2024-01-03T00:00:00.000Z_2024-02-01T00:00:00.000Z"


def test_scan_list_all_columns(wiki: Any) -> None:
    out = run(wiki, queryType="scan", limit=1)
    assert out == [{"segmentId": SEG1,
                    "columns": ["__time", "page", "user", "country", "ns", "count", "added", "delta"],
                    "events": [{"__time": 1704067200000, "page": "Main", "user": "alice", "country": "US",
                                "ns": 0, "count": 2, "added": 15, "delta": 1.0}],
                    "rowSignature": [{"name": "__time", "type": "LONG"}, {"name": "page", "type": "STRING"},
                                     {"name": "user", "type": "STRING"}, {"name": "country", "type": "STRING"},
                                     {"name": "ns", "type": "LONG"}, {"name": "count", "type": "LONG"},
                                     {"name": "added", "type": "LONG"}, {"name": "delta", "type": "DOUBLE"}]}]


def test_scan_batches_offset_order_compacted(wiki: Any) -> None:
    out = run(wiki, queryType="scan", columns=["user"], batchSize=2)
    assert [(r["segmentId"], len(r["events"])) for r in out] == [(SEG1, 2), (SEG1, 1), (SEG2, 2), (SEG2, 2)]
    out = run(wiki, queryType="scan", columns=["user"], offset=2, limit=2)
    assert [(r["segmentId"], r["events"]) for r in out] == [(SEG1, [{"user": "carol"}]), (SEG2, [{"user": "bob"}])]
    out = run(wiki, queryType="scan", columns=["__time", "user", "nope"], resultFormat="compactedList",
              order="descending", limit=1)
    assert out == [{"segmentId": SEG2, "columns": ["__time", "user", "nope"],
                    "events": [[1704171600000, "alice", None]],
                    "rowSignature": [{"name": "__time", "type": "LONG"}, {"name": "user", "type": "STRING"},
                                     {"name": "nope", "type": "STRING"}]}]  # as Druid 33 sends it


# ---- search, timeBoundary, segmentMetadata, dataSourceMetadata ----------------------------------------------
def test_search(wiki: Any) -> None:
    out = run(wiki, queryType="search", granularity="all", searchDimensions=["page", "user"],
              query={"type": "contains", "value": "a", "caseSensitive": True})
    assert out == [{"timestamp": D1, "result": [
        {"dimension": "page", "value": "Main", "count": 4},
        {"dimension": "page", "value": "Talk", "count": 2},
        {"dimension": "user", "value": "alice", "count": 3},
        {"dimension": "user", "value": "carol", "count": 1},
        {"dimension": "user", "value": "dave", "count": 1},
    ]}]
    out = run(wiki, queryType="search", granularity="all", query={"type": "insensitive_contains", "value": "US"},
              limit=5)
    assert out[0]["result"] == [{"dimension": "country", "value": "US", "count": 3}]


def test_time_boundary(wiki: Any) -> None:
    out = run_native_query(wiki.service, {"queryType": "timeBoundary", "dataSource": "wiki"})
    assert out == [{"timestamp": D1, "result": {"minTime": D1, "maxTime": "2024-01-02T05:00:00.000Z"}}]
    out = run_native_query(wiki.service, {"queryType": "timeBoundary", "dataSource": "wiki", "bound": "maxTime",
                                          "filter": {"type": "selector", "dimension": "user", "value": "carol"}})
    assert out == [{"timestamp": "2024-01-01T03:00:00.000Z", "result": {"maxTime": "2024-01-01T03:00:00.000Z"}}]


def test_segment_metadata(wiki: Any) -> None:
    out = run(wiki, queryType="segmentMetadata")
    assert [r["id"] for r in out] == [SEG1, SEG2]
    assert out[0]["numRows"] == 3 and out[1]["numRows"] == 4
    assert out[0]["intervals"] == ["2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z"]
    assert out[0]["columns"]["country"] == {
        "typeSignature": "STRING", "type": "STRING", "hasMultipleValues": False, "hasNulls": True, "size": 0,
        "cardinality": 3, "minValue": None, "maxValue": "US", "errorMessage": None}  # NULL counts, as in Druid 33
    (merged,) = run(wiki, queryType="segmentMetadata", merge=True, analysisTypes=["cardinality", "aggregators"],
                    toInclude={"type": "list", "columns": ["user", "added"]})
    # named as Druid names it: after the last segment's interval
    assert merged["id"] == "wiki_2024-01-02T00:00:00.000Z_2024-01-03T00:00:00.000Z_merged" and merged["numRows"] == 7
    assert set(merged["columns"]) == {"user", "added"}
    assert merged["columns"]["user"]["cardinality"] == 3  # the larger per-segment cardinality
    assert merged["columns"]["user"]["minValue"] is None
    assert merged["aggregators"]["added"] == {"type": "longSum", "name": "added", "fieldName": "added"}


def test_datasource_metadata(wiki: Any) -> None:
    out = run_native_query(wiki.service, {"queryType": "dataSourceMetadata", "dataSource": "wiki"})
    assert out[0]["result"] == {"maxIngestedEventTime": "2024-01-02T05:00:00.000Z"}


# ---- unknowns and errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("qtype", ["timeseries", "topN", "groupBy", "scan", "search", "timeBoundary",
                                   "segmentMetadata", "dataSourceMetadata"])
def test_unknown_datasource_is_empty(wiki: Any, qtype: str) -> None:
    q = {"queryType": qtype, "dataSource": "nope", "intervals": IV, "granularity": "all",
         "aggregations": [ROWS], "dimension": "x", "threshold": 1, "metric": "rows", "dimensions": ["x"],
         "query": {"type": "contains", "value": "a"}}
    assert run_native_query(wiki.service, q) == []


def test_missing_column_is_null(wiki: Any) -> None:
    (row,) = run(wiki, queryType="timeseries", granularity="all", aggregations=[ROWS],
                 filter={"type": "selector", "dimension": "nope", "value": None})
    assert row["result"] == {"rows": 7}
    (row,) = run(wiki, queryType="timeseries", granularity="all", aggregations=[
        ROWS, {"type": "longSum", "name": "s", "fieldName": "nope"}],
        filter={"type": "selector", "dimension": "nope", "value": "x"})
    assert row["result"] == {"rows": 0, "s": None}


@pytest.mark.parametrize("query,status", [
    ({"queryType": "timeseries", "dataSource": "wiki", "intervals": IV, "granularity": "fortnight"}, 400),
    ({"queryType": "bogus", "dataSource": "wiki"}, 400),
    ({"queryType": "timeseries", "dataSource": "wiki"}, 400),
    ({"queryType": "timeseries", "dataSource": "wiki", "intervals": ["nonsense"]}, 400),
    ({"queryType": "timeseries", "dataSource": "wiki", "intervals": IV,
      "aggregations": [{"type": "javascript", "name": "j"}]}, 501),
    ({"queryType": "topN", "dataSource": "wiki", "intervals": IV, "dimension": "page", "threshold": 3,
      "metric": "missing", "aggregations": [ROWS]}, 400),
    ({"queryType": "timeseries", "dataSource": "wiki", "intervals": IV,
      "filter": {"type": "no-such-filter"}}, 400),
])
def test_errors(wiki: Any, query: dict[str, Any], status: int) -> None:
    with pytest.raises(DruidError) as e:
        run_native_query(wiki.service, query)
    assert e.value.status == status


def test_timeout_is_504(wiki: Any) -> None:
    with pytest.raises(DruidError) as e:
        run(wiki, queryType="groupBy", granularity="hour", dimensions=["page", "user"], aggregations=[ADDED],
            context={"timeout": 1})
    assert e.value.status == 504
    # and the broker keeps serving
    assert run(wiki, queryType="timeseries", granularity="all", aggregations=[ROWS])[0]["result"] == {"rows": 7}


def test_scan_with_an_expression_virtual_column(wiki: Any) -> None:
    # a virtual column without outputType is typed from the data; reading a second segment once failed
    # with "Column v0 in REPLACE list not found"
    out = run(wiki, queryType="scan", columns=["page", "v0"], limit=3, order="ascending",
              virtualColumns=[{"type": "expression", "name": "v0", "expression": "concat(page, '-', strlen(page))"}])
    events = [e for batch in out for e in batch["events"]]
    assert events and all(e["v0"] == f"{e['page']}-{len(e['page'])}" for e in events)
