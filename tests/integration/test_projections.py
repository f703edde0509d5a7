"""Aggregate projections: built by the indexer beside each segment, chosen by the broker for SQL and
native queries they cover, and giving exactly the base rows' answers.

Every query below runs twice against the same broker: as is, and with ``noProjections``; the two
answers must be equal (doubles to 1e-9 relative — summing in another order rounds differently, as in
Druid). The golden SQL translation cases run the same way, so every one of them a projection covers is
checked too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.fixtures.broker import WIKI_SCHEMA, BrokerEnv, wiki_table

GOLDEN = json.loads((Path(__file__).parent.parent / "unit" / "golden" / "sql" / "translations.json").read_text())


def _floor(period: str) -> dict[str, Any]:
    return {"type": "expression", "name": "__gran", "expression": f"timestamp_floor(__time, '{period}')",
            "outputType": "LONG"}


PROJECTIONS = [
    {"type": "aggregate", "name": "daily_page_country", "virtualColumns": [_floor("P1D")],
     "groupingColumns": [{"type": "long", "name": "__gran"}, "page", "country"],
     "aggregators": [{"type": "longSum", "name": "count", "fieldName": "count"},
                     {"type": "longSum", "name": "added", "fieldName": "added"},
                     {"type": "doubleSum", "name": "delta", "fieldName": "delta"}]},
    {"type": "aggregate", "name": "hourly", "groupingColumns": ["__time"],
     "aggregators": [{"type": "longSum", "name": "added", "fieldName": "added"},
                     {"type": "longMax", "name": "count", "fieldName": "count"}]},
    {"type": "aggregate", "name": "by_user", "groupingColumns": ["user"],
     "aggregators": [{"type": "longSum", "name": "added", "fieldName": "added"}]},
]
SCHEMA = {**WIKI_SCHEMA, "projections": PROJECTIONS}

SQL = [
    ("SELECT COUNT(*) AS c, SUM(added) AS a FROM wiki", "by_user"),
    ("SELECT page, SUM(added) AS a, SUM(delta) AS d FROM wiki GROUP BY page ORDER BY a DESC", "daily_page_country"),
    ("SELECT TIME_FLOOR(__time, 'P1D') AS d, country, COUNT(*) AS c, SUM(\"count\") AS n FROM wiki "
     "WHERE __time >= TIMESTAMP '2024-01-01 00:00:00' AND __time < TIMESTAMP '2024-01-03 00:00:00' "
     "GROUP BY 1, 2 ORDER BY 1, 2", "daily_page_country"),
    ("SELECT FLOOR(__time TO HOUR) AS h, COUNT(*) AS c, SUM(added) AS a, MAX(\"count\") AS m FROM wiki GROUP BY 1 "
     "ORDER BY 1", "hourly"),
    ("SELECT DATE_TRUNC('month', __time) AS m, SUM(added) FROM wiki GROUP BY 1", "by_user"),  # day buckets, fewest rows
    ("SELECT \"user\", SUM(added) AS a FROM wiki GROUP BY 1 ORDER BY a DESC LIMIT 2", "by_user"),
    ("SELECT COUNT(DISTINCT page) AS p, COUNT(DISTINCT country) AS c FROM wiki WHERE page <> 'Help'",
     "daily_page_country"),
    ("SELECT page, COUNT(*) FILTER (WHERE country = 'US') AS us FROM wiki GROUP BY page HAVING COUNT(*) > 1",
     "daily_page_country"),
    ("SELECT * FROM (SELECT page, SUM(added) AS a FROM wiki GROUP BY page) t WHERE a > 5", "daily_page_country"),
    ("SELECT country, SUM(added) FROM wiki WHERE __time >= '2024-01-02' GROUP BY country", "daily_page_country"),
    # not covered: each needs something no projection keeps
    ("SELECT page, SUM(added) FROM wiki WHERE __time >= TIMESTAMP '2024-01-01 01:00:00' GROUP BY 1", None),
    ("SELECT page, AVG(added) FROM wiki GROUP BY page", None),
    ("SELECT \"user\", page, SUM(added) FROM wiki GROUP BY 1, 2", None),
    ("SELECT ns, COUNT(*) FROM wiki GROUP BY ns", None),
    ("SELECT page, SUM(added) FROM wiki WHERE __time > TIMESTAMP '2024-01-01 00:00:00' GROUP BY 1", None),
    ("SELECT COUNT(page) FROM wiki", None),
    ("SELECT SUM(delta) FROM wiki WHERE \"user\" = 'alice'", None),
    ("SELECT page, added FROM wiki", None),
    ("SELECT LATEST(page) FROM wiki", None),
]

NATIVE: list[tuple[dict[str, Any], str | None]] = [
    ({"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2024-01-01/2024-01-03"], "granularity": "day",
      "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "added", "fieldName": "added"},
                       {"type": "doubleSum", "name": "delta", "fieldName": "delta"}]}, "daily_page_country"),
    ({"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2024-01-01/2024-01-03"], "granularity": "hour",
      "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "added", "fieldName": "added"}]},
     "hourly"),
    ({"queryType": "topN", "dataSource": "wiki", "intervals": ["2024-01-01/2024-01-03"], "granularity": "all",
      "dimension": "page", "metric": "added", "threshold": 2,
      "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]}, "daily_page_country"),
    ({"queryType": "groupBy", "dataSource": "wiki", "intervals": ["2024-01-01/2024-01-03"], "granularity": "all",
      "dimensions": ["country"], "filter": {"type": "in", "dimension": "page", "values": ["Main", "Talk"]},
      "aggregations": [{"type": "filtered", "filter": {"type": "selector", "dimension": "page", "value": "Main"},
                        "aggregator": {"type": "count", "name": "main"}},
                       {"type": "doubleSum", "name": "delta", "fieldName": "delta"}],
      "postAggregations": [{"type": "arithmetic", "name": "x", "fn": "*",
                            "fields": [{"type": "fieldAccess", "fieldName": "main"},
                                       {"type": "constant", "value": 2}]}]}, "daily_page_country"),
    ({"queryType": "groupBy", "dataSource": "wiki", "intervals": ["2024-01-01/2024-01-03"], "granularity": "all",
      "dimensions": ["user"], "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]}, "by_user"),
    # not covered
    ({"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2024-01-01T01:00/2024-01-03"],
      "granularity": "all", "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]}, "hourly"),
    ({"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2024-01-01T01:30/2024-01-03"],
      "granularity": "all", "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]}, None),
    ({"queryType": "groupBy", "dataSource": "wiki", "intervals": ["2024-01-01/2024-01-03"], "granularity": "all",
      "dimensions": ["ns"], "aggregations": [{"type": "count", "name": "rows"}]}, None),
    ({"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2024-01-01/2024-01-03"], "granularity": "all",
      "aggregations": [{"type": "longMin", "name": "added", "fieldName": "added"}]}, None),
    ({"queryType": "scan", "dataSource": "wiki", "intervals": ["2024-01-01/2024-01-03"], "limit": 3}, None),
]


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _sql(env: BrokerEnv, query: str, context: dict[str, Any] | None = None) -> tuple[list[Any], dict[str, str]]:
    """Rows (sorted unless the query orders them) and the projections that answered."""
    from serving.broker.sql.engine import execute

    result = execute(env.service, query, context=context or {})
    try:
        rows = [tuple(r.values()) for b in result.batches() for r in b.to_pylist()]
    finally:
        result.close()
    if "ORDER BY" not in query:
        rows.sort(key=repr)
    return rows, result.translation.projections


def _native(env: BrokerEnv, query: dict[str, Any], **context: Any) -> tuple[list[Any], dict[str, str]]:
    from serving.broker.native import run_native_query

    used: dict[str, str] = {}
    rows = run_native_query(env.service, {**query, "context": context}, used_projections=used)
    return rows, used


@pytest.fixture
def projected(broker_env: BrokerEnv) -> BrokerEnv:
    broker_env.index(wiki_table(), SCHEMA, version="2024-02-01T00:00:00.000Z")
    broker_env.service.refresh()
    return broker_env


def test_segments_carry_projection_files(projected: BrokerEnv) -> None:
    segs = projected.metadata.segments("wiki", used=True)
    assert len(segs) == 2
    for seg in segs:
        assert [p["name"] for p in seg.projections] == ["daily_page_country", "hourly", "by_user"]
        assert all(p["numRows"] > 0 and p["loadSpec"] for p in seg.projections)
    views = {v.name: v for v in projected.service.datasource("wiki").projections}
    assert set(views) == {"daily_page_country", "hourly", "by_user"}
    assert all(v.computed_rows == 0 for v in views.values())
    assert views["by_user"].stored_rows == 6  # day 1: alice, bob, carol; day 2: bob, alice, dave


@pytest.mark.parametrize(("query", "expected"), SQL, ids=[q[:70] for q, _ in SQL])
def test_sql_answers_equal_base_rows(projected: BrokerEnv, query: str, expected: str | None) -> None:
    rows, used = _sql(projected, query)
    base, none = _sql(projected, query, {"noProjections": True})
    assert none == {}
    assert used == ({"wiki": expected} if expected else {})
    assert _close(rows, base), (rows, base)


@pytest.mark.parametrize(("query", "expected"), NATIVE, ids=[f"{q['queryType']}-{i}" for i, (q, _) in enumerate(NATIVE)])
def test_native_answers_equal_base_rows(projected: BrokerEnv, query: dict[str, Any], expected: str | None) -> None:
    rows, used = _native(projected, query)
    base, none = _native(projected, query, noProjections=True)
    assert none == {}
    assert used == ({"wiki": expected} if expected else {})
    assert _close(rows, base), (rows, base)


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=[c["druid"][:60] for c in GOLDEN["cases"]])
def test_golden_queries_equal_with_and_without_projections(projected: BrokerEnv, case: dict[str, str]) -> None:
    from serving.errors import DruidError

    query = case["druid"]
    try:
        base, _ = _sql(projected, query, {"noProjections": True})
    except DruidError as e:  # the golden catalog has columns and tables this dataset lacks
        with pytest.raises(DruidError) as again:
            _sql(projected, query)
        assert again.value.to_json() == e.to_json()
        return
    if "CURRENT_" in query:
        return  # the clock moves between the two runs
    rows, _ = _sql(projected, query)
    assert _close(rows, base), (rows, base)


def test_golden_set_is_partly_covered(projected: BrokerEnv) -> None:
    """The golden cases a projection answers (so the comparison above really exercises projections)."""
    covered = []
    for case in GOLDEN["cases"]:
        try:
            _, used = _sql(projected, case["druid"])
        except Exception:  # noqa: BLE001 - cases about other tables
            continue
        if used:
            covered.append(case["druid"])
    assert len(covered) >= 3, covered


def test_context_keys(projected: BrokerEnv) -> None:
    from serving.errors import DruidError

    q = "SELECT page, SUM(added) FROM wiki GROUP BY page"
    assert _sql(projected, q, {"useProjection": "daily_page_country"})[1] == {"wiki": "daily_page_country"}
    with pytest.raises(DruidError) as e:
        _sql(projected, q, {"useProjection": "by_user"})
    assert e.value.status == 400 and "by_user" in e.value.to_json()["errorMessage"]
    with pytest.raises(DruidError):
        _sql(projected, "SELECT ns, COUNT(*) FROM wiki GROUP BY ns", {"forceProjections": True})
    native = NATIVE[0][0]
    with pytest.raises(DruidError) as e:
        _native(projected, native, useProjection="by_user")
    assert e.value.status == 400


def test_segments_without_files_are_aggregated_on_the_fly(projected: BrokerEnv) -> None:
    """A newer segment built without projections (say, real-time) joins the projection view through an
    on-the-fly aggregation of its base rows; answers stay equal."""
    extra = pa.table({"ts": ["2024-01-03T04:00:00Z", "2024-01-03T04:30:00Z"], "page": ["Main", "New"],
                      "user": ["erin", "erin"], "country": ["US", None], "ns": [0, 2], "added": [9, 4],
                      "delta": [0.5, 0.125]})
    projected.index(extra, WIKI_SCHEMA, version="2024-02-02T00:00:00.000Z")
    projected.service.refresh()
    views = {v.name: v for v in projected.service.datasource("wiki").projections}
    assert views["by_user"].computed_rows == 2
    for query, expected in SQL:
        rows, used = _sql(projected, query)
        assert used == ({"wiki": expected} if expected else {})
        assert _close(rows, _sql(projected, query, {"noProjections": True})[0]), query


def test_projection_header_over_http(projected: BrokerEnv) -> None:
    from fastapi.testclient import TestClient

    from tests.fixtures.druid_sql import sql_app

    client = TestClient(sql_app(projected))
    r = client.post("/druid/v2/sql", json={"query": SQL[1][0]})
    assert r.status_code == 200 and r.headers["X-Radstack-Projection"] == "wiki=daily_page_country"
    r = client.post("/druid/v2/sql", json={"query": SQL[1][0], "context": {"noProjections": True}})
    assert r.status_code == 200 and "X-Radstack-Projection" not in r.headers
