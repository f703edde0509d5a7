"""DataSketches metrics and functions on the real broker: HLL, theta and quantiles sketches built by
the indexer at ingestion (rolled up per hour), merged across segments at query time, and built from
raw values at query time — every estimate checked against the same sketch built directly with the
DataSketches library over the raw events."""

from __future__ import annotations

import base64
import random
from typing import Any

import datasketches as ds
import pyarrow as pa
import pytest

from serving.broker.sql.engine import execute
from serving.errors import DruidError
from tests.unit.test_sql_execution import run

SCHEMA: dict[str, Any] = {
    "dataSource": "visits",
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["page", "user"]},
    "metricsSpec": [
        {"type": "count", "name": "count"},
        {"type": "HLLSketchBuild", "name": "users_hll", "fieldName": "user", "lgK": 12, "tgtHllType": "HLL_4"},
        {"type": "thetaSketch", "name": "users_theta", "fieldName": "user"},
        {"type": "quantilesDoublesSketch", "name": "latency_q", "fieldName": "latency", "k": 128},
    ],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour", "rollup": True},
}
N = 3000


def events(seed: int = 5) -> pa.Table:
    rng = random.Random(seed)
    days = ["2024-01-01", "2024-01-02"]
    rows = [(f"{days[i % 2]}T{i % 24:02d}:{i % 60:02d}:00Z", rng.choice("AB"), f"user-{rng.randrange(2000)}",
             round(rng.expovariate(1 / 50), 3)) for i in range(N)]
    ts, page, user, lat = zip(*rows, strict=True)
    return pa.table({"ts": list(ts), "page": list(page), "user": list(user), "latency": list(lat)})


@pytest.fixture
def env(broker_env: Any) -> Any:
    broker_env.index(events(), SCHEMA, version="2024-02-01T00:00:00.000Z")
    broker_env.service.refresh()
    return broker_env


def hll(values: list[str]) -> float:
    """What radstack computes for raw values: the merge of two halves' sketches (composite estimate)."""
    u = ds.hll_union(12)
    for part in (values[: len(values) // 2], values[len(values) // 2:]):
        s = ds.hll_sketch(12, ds.tgt_hll_type.HLL_4)
        for v in part:
            s.update(v.encode("utf-16-le").decode("ascii"))  # Druid's default: UTF-16LE code units
        u.update(s)
    return u.get_result(ds.tgt_hll_type.HLL_4).get_estimate()


def theta(values: list[str]) -> ds.compact_theta_sketch:
    s = ds.update_theta_sketch(14)
    for v in values:
        s.update(v)
    return s.compact()


def test_hll_from_ingested_sketches_and_from_raw_values_equal_the_library(env: Any) -> None:
    t = events()
    users, pages = t.column("user").to_pylist(), t.column("page").to_pylist()
    true_count = len(set(users))
    _, rows = run(env, "SELECT APPROX_COUNT_DISTINCT_DS_HLL(users_hll), APPROX_COUNT_DISTINCT_DS_HLL(\"user\"), "
                       "HLL_SKETCH_ESTIMATE(DS_HLL(\"user\")), HLL_SKETCH_ESTIMATE(DS_HLL(users_hll), TRUE) FROM visits")
    merged_metric, raw, raw_estimate, merged_rounded = rows[0]
    # raw values: exactly the library's sketch of them (the column is read in segment order)
    _, ordered = run(env, 'SELECT "user" FROM visits ORDER BY __time')
    assert raw_estimate == pytest.approx(hll([r[0] for r in ordered])) and raw == round(raw_estimate)
    # the ingested sketches, merged: the same registers, within the sketch's error of the truth
    assert merged_rounded == merged_metric and abs(merged_metric - true_count) < 0.03 * true_count
    assert abs(raw - true_count) < 0.03 * true_count
    _, rows = run(env, "SELECT page, APPROX_COUNT_DISTINCT_DS_HLL(users_hll) FROM visits GROUP BY page ORDER BY page")
    for page, got in rows:
        truth = len({u for u, q in zip(users, pages, strict=True) if q == page})
        assert abs(got - truth) < 0.03 * truth


def test_theta_set_operations(env: Any) -> None:
    t = events()
    users, pages = t.column("user").to_pylist(), t.column("page").to_pylist()
    a = theta([u for u, p in zip(users, pages, strict=True) if p == "A"])
    b = theta([u for u, p in zip(users, pages, strict=True) if p == "B"])
    inter = ds.theta_intersection()
    inter.update(a)
    inter.update(b)
    _, rows = run(env, "SELECT APPROX_COUNT_DISTINCT_DS_THETA(users_theta), "
                       "THETA_SKETCH_ESTIMATE(THETA_SKETCH_INTERSECT(DS_THETA(users_theta) FILTER (WHERE page = 'A'), "
                       "DS_THETA(users_theta) FILTER (WHERE page = 'B'))), "
                       "THETA_SKETCH_ESTIMATE(THETA_SKETCH_NOT(DS_THETA(\"user\") FILTER (WHERE page = 'A'), "
                       "DS_THETA(\"user\") FILTER (WHERE page = 'B'))) FROM visits")
    assert rows[0][0] == round(theta(users).get_estimate())
    assert rows[0][1] == pytest.approx(inter.get_result().get_estimate())
    assert rows[0][2] == pytest.approx(ds.theta_a_not_b().compute(a, b).get_estimate())


def test_quantiles(env: Any) -> None:
    lat = events().column("latency").to_pylist()
    _, rows = run(env, "SELECT APPROX_QUANTILE_DS(latency_q, 0.5), APPROX_QUANTILE_DS(latency_q, 0.9), "
                       "DS_GET_QUANTILES(DS_QUANTILES_SKETCH(latency_q), 0.1, 0.99) FROM visits")
    exact = sorted(lat)
    median, p90, (p10, p99) = rows[0]
    assert abs(median - exact[len(exact) // 2]) < 0.05 * exact[-1]  # a k=128 sketch's rank error is ~2 %
    assert abs(p90 - exact[int(0.9 * len(exact))]) < 0.05 * exact[-1]
    assert p10 < median < p90 < p99


def test_sketch_columns_are_typed_and_sent_as_base64(env: Any) -> None:
    _, rows = run(env, "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'visits' "
                       "AND DATA_TYPE LIKE 'COMPLEX%' ORDER BY 1")
    assert rows == [("latency_q", "COMPLEX<quantilesDoublesSketch>"), ("users_hll", "COMPLEX<HLLSketch>"),
                    ("users_theta", "COMPLEX<thetaSketch>")]
    res = execute(env.service, "SELECT DS_HLL(users_hll) AS s FROM visits", metadata=env.metadata)
    try:
        assert [(c.sql_type, c.native_type) for c in res.columns] == [("OTHER", "COMPLEX<HLLSketch>")]
        raw = next(res.batches()).column(0)[0].as_py()
    finally:
        res.close()
    _, est = run(env, "SELECT HLL_SKETCH_ESTIMATE(DS_HLL(users_hll)) FROM visits")
    assert ds.hll_sketch.deserialize(raw).get_estimate() == pytest.approx(est[0][0])
    from serving.broker.sql.result_formats import ResultWriter
    res = execute(env.service, "SELECT DS_HLL(users_hll) AS s FROM visits", metadata=env.metadata)
    try:
        body = ResultWriter("array", res.columns).write_all(res.batches()).decode()
    finally:
        res.close()
    assert base64.b64decode(body[3:-4]) == raw


def test_bad_sketch_arguments(env: Any) -> None:
    for sql in ("SELECT APPROX_COUNT_DISTINCT_DS_HLL(\"user\", page) FROM visits",
                "SELECT APPROX_QUANTILE_DS(latency) FROM visits"):
        with pytest.raises(DruidError) as e:
            run(env, sql)
        assert e.value.status == 400


def test_native_sketch_aggregators_match_sql(env: Any) -> None:
    from serving.broker.native import run_native_query

    _, sql = run(env, "SELECT page, HLL_SKETCH_ESTIMATE(DS_HLL(users_hll)), THETA_SKETCH_ESTIMATE(DS_THETA(\"user\")) "
                      "FROM visits GROUP BY page ORDER BY page")
    out = run_native_query(env.service, {
        "queryType": "groupBy", "dataSource": "visits", "intervals": ["2024-01-01/2024-01-03"], "granularity": "all",
        "dimensions": ["page"],
        "aggregations": [{"type": "HLLSketchMerge", "name": "hll", "fieldName": "users_hll"},
                         {"type": "thetaSketch", "name": "theta", "fieldName": "user"}],
        "postAggregations": [{"type": "HLLSketchEstimate", "name": "hll_rounded", "round": True,
                              "field": {"type": "fieldAccess", "fieldName": "hll"}}]})
    got = [(r["event"]["page"], r["event"]["hll"], r["event"]["theta"], r["event"]["hll_rounded"]) for r in out]
    assert [(p, pytest.approx(h), pytest.approx(t), round(h)) for p, h, t in sql] == got


def test_native_quantiles_sketch_and_post_aggregators(env: Any) -> None:
    from serving.broker.native import run_native_query

    _, sql = run(env, "SELECT APPROX_QUANTILE_DS(latency_q, 0.5), APPROX_QUANTILE_DS(latency_q, 0.9) FROM visits")
    out = run_native_query(env.service, {
        "queryType": "timeseries", "dataSource": "visits", "intervals": ["2024-01-01/2024-01-03"], "granularity": "all",
        "aggregations": [{"type": "quantilesDoublesSketch", "name": "q", "fieldName": "latency_q", "k": 128}],
        "postAggregations": [
            {"type": "quantilesDoublesSketchToQuantile", "name": "p50", "fraction": 0.5,
             "field": {"type": "fieldAccess", "fieldName": "q"}},
            {"type": "quantilesDoublesSketchToQuantiles", "name": "ps", "fractions": [0.5, 0.9],
             "field": {"type": "fieldAccess", "fieldName": "q"}},
            {"type": "finalizingFieldAccess", "name": "n", "fieldName": "q"}]})
    result = out[0]["result"]
    assert result["q"] == result["n"] == N  # finalized to the number of values, as in Druid
    assert result["ps"][0] == result["p50"]
    # merged in another order than the SQL query's: the same answer up to the sketch's rank error
    lat = sorted(events().column("latency").to_pylist())
    for got, fraction, via_sql in zip(result["ps"], (0.5, 0.9), sql[0], strict=True):
        for value in (got, via_sql):
            assert abs(sum(v <= value for v in lat) / len(lat) - fraction) < 0.03
    with pytest.raises(DruidError) as e:
        run_native_query(env.service, {
            "queryType": "timeseries", "dataSource": "visits", "intervals": ["2024-01-01/2024-01-03"],
            "aggregations": [{"type": "count", "name": "c"}],
            "postAggregations": [{"type": "quantilesDoublesSketchToQuantile", "name": "p", "fraction": 0.5,
                                  "field": {"type": "fieldAccess", "fieldName": "c"}}]})
    assert e.value.status == 400


def test_segment_metadata_types_sketch_columns(env: Any) -> None:
    """Sketch columns are COMPLEX<family> in segmentMetadata too (their strings were analysed before,
    which failed on the binary column)."""
    from serving.broker.native import run_native_query

    out = run_native_query(env.service, {"queryType": "segmentMetadata", "dataSource": "visits",
                                         "intervals": ["2024-01-01/2024-01-03"], "merge": True})
    columns = out[0]["columns"]
    assert {c: columns[c]["typeSignature"] for c in ("users_hll", "users_theta", "latency_q", "page")} == {
        "users_hll": "COMPLEX<HLLSketch>", "users_theta": "COMPLEX<thetaSketch>",
        "latency_q": "COMPLEX<quantilesDoublesSketch>", "page": "STRING"}
    assert columns["users_hll"]["type"] == "HLLSketch" and columns["page"]["type"] == "STRING"  # Druid's names
    assert columns["users_hll"]["cardinality"] is None and columns["page"]["cardinality"] == 2


@pytest.mark.parametrize("source", [
    "(SELECT * FROM visits) AS virtual_table",  # how Superset's virtual datasets wrap a datasource
    "(SELECT v.* FROM visits AS v) AS t",
    "(SELECT * FROM (SELECT * FROM visits) AS a) AS b",
    "w",
])
def test_sketch_columns_passed_on_by_a_star_are_merged(env: Any, source: str) -> None:
    """A ``SELECT *`` subquery or CTE passes the sketch columns on as sketches (as Druid types them), so
    they are merged, not taken for raw values."""
    query = ("SELECT page, APPROX_COUNT_DISTINCT_DS_HLL(users_hll) AS h, APPROX_COUNT_DISTINCT_DS_THETA(users_theta) AS t, "
             "APPROX_QUANTILE_DS(latency_q, 0.5) AS q FROM {src} GROUP BY page ORDER BY page")
    with_cte = "WITH w AS (SELECT * FROM visits) " if source == "w" else ""
    got, want = run(env, with_cte + query.format(src=source)), run(env, query.format(src="visits"))
    assert [r[:3] for r in got[1]] == [r[:3] for r in want[1]]  # HLL and theta merges: the same sketches
    # a quantiles merge depends on the order DuckDB hands the sketches over: within the sketch's error
    assert [r[3] for r in got[1]] == [pytest.approx(r[3], rel=0.05) for r in want[1]]
