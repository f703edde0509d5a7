"""Merges of per-row sketches read the integer column beside them (serving/broker/sql/rules/sketch_singles.py,
serving/broker/store/segment_cache.py): every answer equals the same merge over the sketch images (a merge over
a subquery reads the images), and the integer columns stay out of reach: no ``*``, no column list, no name
a query can use shows them."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from serving.broker.service import BrokerService
from serving.broker.sql.engine import catalog_of
from serving.broker.sql.translate import translate
from serving.broker.store import segment_cache
from serving.errors import DruidError
from tests.unit.test_sql_execution import run

SCHEMA: dict[str, Any] = {
    "dataSource": "visits",
    "timestampSpec": {"column": "ts", "format": "millis"},
    "dimensionsSpec": {"dimensions": ["page", "user"]},
    "metricsSpec": [
        {"type": "count", "name": "count"},
        {"type": "HLLSketchBuild", "name": "users_hll", "fieldName": "visitor"},
        {"type": "thetaSketch", "name": "users_theta", "fieldName": "visitor"},
    ],
    # rollup on the hour: most rows hold one visitor's sketch (one value); the rows of "shared" roll up
    # many visitors' into one (many values)
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour", "rollup": True},
}
DAY = 86_400_000
START = 1_704_067_200_000  # 2024-01-01


def events(day: int, n: int = 4000, seed: int = 7) -> pa.Table:
    rng = random.Random(seed + day)
    return pa.table({
        "ts": [START + day * DAY + rng.randrange(DAY) for _ in range(n)],
        "page": [rng.choice("ABC") for _ in range(n)],
        "user": [f"u{i % 1500}" if i % 5 else "shared" for i in range(n)],
        "visitor": [f"u{i % 1500}" if i % 5 else f"v{rng.randrange(300)}" for i in range(n)],
    })


QUERIES = [
    "SELECT APPROX_COUNT_DISTINCT_DS_HLL(users_hll) AS n, APPROX_COUNT_DISTINCT_DS_THETA(users_theta) AS t FROM {src}",
    "SELECT page, APPROX_COUNT_DISTINCT_DS_HLL(users_hll, 14, 'HLL_8') AS n FROM {src} GROUP BY page ORDER BY page",
    "SELECT page, APPROX_COUNT_DISTINCT_DS_HLL(users_hll) FILTER (WHERE page <> 'A') AS n, "
    "APPROX_COUNT_DISTINCT_DS_THETA(users_theta, 1024) AS t FROM {src} GROUP BY page ORDER BY page",
    "SELECT TIME_FLOOR(__time, 'P1D') AS d, HLL_SKETCH_ESTIMATE(DS_HLL(users_hll)) AS n FROM {src} "
    "WHERE page IN ('A', 'B') GROUP BY 1 HAVING APPROX_COUNT_DISTINCT_DS_HLL(users_hll) > 10 ORDER BY 2 DESC",
    "SELECT DS_HLL(users_hll) AS h, DS_THETA(users_theta) AS t FROM {src} WHERE \"user\" = 'shared'",
    "SELECT THETA_SKETCH_ESTIMATE(DS_THETA(users_theta)) AS t FROM {src} WHERE page = 'nowhere'",
]


#: the same rows through a subquery: merged from their images
IMAGES = '(SELECT __time, page, "user", users_hll, users_theta FROM visits) AS v'


@pytest.fixture
def env(broker_env: Any) -> Any:
    for day in range(2):
        broker_env.index(events(day), SCHEMA, version="2024-02-01T00:00:00.000Z")
    broker_env.service.refresh()
    return broker_env


def _translated(env: Any, sql: str) -> str:
    with env.service.snapshot() as (_, state):
        return translate(sql, catalog_of(env.service, state)).sql


@pytest.mark.parametrize("query", QUERIES)
def test_merges_of_the_integer_columns_answer_what_the_images_answer(env: Any, query: str) -> None:
    fast = query.format(src="visits")
    assert "__sketches__visits" in _translated(env, fast) and "_SINGLES(" in _translated(env, fast)
    images = query.format(src=IMAGES)
    assert "__sketches__" not in _translated(env, images)
    assert run(env, fast) == run(env, images)


@pytest.mark.parametrize("query", QUERIES)
def test_where_every_row_is_one_value_no_image_is_collected(broker_env: Any, query: str) -> None:
    rows = events(0)  # rollup off: every row keeps its own visitor's sketch
    no_rollup = {**SCHEMA, "granularitySpec": {**SCHEMA["granularitySpec"], "rollup": False}}
    broker_env.index(rows, no_rollup, version="2024-02-01T00:00:00.000Z")
    broker_env.service.refresh()
    fast = query.format(src="visits")
    assert "CAST(NULL AS BLOB[])" in _translated(broker_env, fast)
    assert run(broker_env, fast) == run(broker_env, query.format(src=IMAGES))


def test_most_rows_have_their_sketch_as_one_value(env: Any) -> None:
    with env.service.snapshot() as (cur, _):
        cur.complete()
        rows, hll, theta = cur.execute(
            'SELECT COUNT(*), COUNT("__rs_single__users_hll"), COUNT("__rs_single__users_theta") '
            'FROM "__sketches__visits"').fetchone()
    assert 0 < hll == theta < rows  # per-row sketches have one value; the rolled-up rows of "shared" do not


def test_stars_and_column_lists_never_show_the_integer_columns(env: Any) -> None:
    names, _ = run(env, "SELECT * FROM visits LIMIT 1")
    assert names == ["__time", "page", "user", "count", "users_hll", "users_theta"]
    names, _ = run(env, "SELECT v.*, (SELECT APPROX_COUNT_DISTINCT_DS_HLL(users_hll) FROM visits) AS n "
                        "FROM visits AS v LIMIT 1")
    assert names == ["__time", "page", "user", "count", "users_hll", "users_theta", "n"]
    _, cols = run(env, "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'visits'")
    assert not [c for (c,) in cols if c.startswith("__rs")]
    _, tables = run(env, "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES")
    assert not [t for (t,) in tables if "sketches" in t]


@pytest.mark.parametrize("query", [
    'SELECT COUNT(*) FROM "__sketches__visits"',
    'SELECT COUNT(*) FROM druid."__sketches__visits"',
    'SELECT "__rs_single__users_hll" FROM visits',
    'SELECT COUNT(*) FROM visits WHERE "__rs_single__users_hll" IS NULL',
])
def test_no_query_can_name_the_sketch_view_or_its_columns(env: Any, query: str) -> None:
    with pytest.raises(DruidError) as e:
        run(env, query)
    assert e.value.status == 400


def test_a_cte_named_like_the_datasource_keeps_its_own_rows(env: Any) -> None:
    cte = run(env, "WITH visits AS (SELECT page, users_hll FROM visits WHERE page = 'A') "
                   "SELECT APPROX_COUNT_DISTINCT_DS_HLL(users_hll) FROM visits")
    filtered = run(env, "SELECT APPROX_COUNT_DISTINCT_DS_HLL(users_hll) FROM visits WHERE page = 'A'")
    whole = run(env, "SELECT APPROX_COUNT_DISTINCT_DS_HLL(users_hll) FROM visits")
    assert cte[1] == filtered[1] != whole[1]


def test_rows_loaded_without_the_integer_column_are_merged_from_their_images(
        broker_env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache an older version wrote has no integer columns: its rows read NULL there and are merged
    from their images, beside the later segments' integers, in one datasource table."""
    with monkeypatch.context() as m:
        m.setattr(segment_cache, "_SINGLE_VALUES", {})
        broker_env.index(events(0), SCHEMA, version="2024-02-01T00:00:00.000Z")
        broker_env.service.refresh()
    assert "__sketches__" not in _translated(broker_env, QUERIES[0].format(src="visits"))
    broker_env.index(events(1), SCHEMA, version="2024-02-01T00:00:00.000Z")
    broker_env.service.refresh()
    loaded = broker_env.service.cache.loaded().values()
    assert sorted(ls.singles for ls in loaded) == [(), ("users_hll", "users_theta")]
    assert len({ls.table for ls in loaded}) == 1  # one datasource table, the column added for the second
    for query in QUERIES:
        translated = _translated(broker_env, query.format(src="visits"))
        assert "__sketches__visits" in translated and "CAST(NULL AS BLOB[])" not in translated
        assert run(broker_env, query.format(src="visits")) == run(broker_env, query.format(src=IMAGES))


def test_a_restarted_broker_keeps_the_integer_columns(env: Any) -> None:
    before = [run(env, q.format(src="visits")) for q in QUERIES]
    env.service.stop()
    env.service = BrokerService(env.settings, env.metadata, env.deep_storage)
    try:
        env.service.refresh()
        assert {ls.singles for ls in env.service.cache.loaded().values()} == {("users_hll", "users_theta")}
        assert "__sketches__visits" in _translated(env, QUERIES[0].format(src="visits"))
        assert [run(env, q.format(src="visits")) for q in QUERIES] == before
    finally:
        env.service.stop()


NATIVE = [
    {"queryType": "timeseries", "granularity": "hour",
     "aggregations": [{"type": "HLLSketchMerge", "name": "h", "fieldName": "users_hll", "round": True},
                      {"type": "thetaSketch", "name": "t", "fieldName": "users_theta"}]},
    {"queryType": "groupBy", "granularity": "all", "dimensions": ["page"],
     "aggregations": [{"type": "filtered", "filter": {"type": "selector", "dimension": "page", "value": "B"},
                       "aggregator": {"type": "HLLSketchMerge", "name": "h", "fieldName": "users_hll",
                                      "lgK": 14, "tgtHllType": "HLL_8"}},
                      {"type": "thetaSketch", "name": "t", "fieldName": "users_theta", "size": 1024}],
     "postAggregations": [{"type": "HLLSketchEstimate", "name": "e", "round": True,
                           "field": {"type": "fieldAccess", "fieldName": "h"}}]},
    {"queryType": "topN", "granularity": "all", "dimension": "page", "metric": "h", "threshold": 2,
     "aggregations": [{"type": "HLLSketchBuild", "name": "h", "fieldName": "users_hll"}]},
]


@pytest.mark.parametrize("query", NATIVE, ids=[q["queryType"] for q in NATIVE])
def test_native_merges_read_the_integer_columns_where_every_row_has_one(
        broker_env: Any, monkeypatch: pytest.MonkeyPatch, query: dict[str, Any]) -> None:
    from serving.broker.native import run_native_query
    from serving.broker.native.aggregators import merged_sketch_columns
    from serving.broker.native.query_context import QueryContext

    no_rollup = {**SCHEMA, "granularitySpec": {**SCHEMA["granularitySpec"], "rollup": False}}
    broker_env.index(events(0), no_rollup, version="2024-02-01T00:00:00.000Z")
    broker_env.service.refresh()
    full = {"dataSource": "visits", "intervals": ["2024-01-01/2024-01-03"], **query}
    read: list[dict[str, str]] = []
    real = QueryContext.read_singles

    def spy(ctx: QueryContext, columns: set[str]) -> None:
        real(ctx, columns)
        read.append(dict(ctx.singles))

    monkeypatch.setattr(QueryContext, "read_singles", spy)
    fast = run_native_query(broker_env.service, full)
    assert read == [{c: f"__rs_single__{c}" for c in merged_sketch_columns(query["aggregations"])}]
    assert max(_numbers(fast)) > 100  # real estimates, not empty sketches
    monkeypatch.setattr(QueryContext, "read_singles", lambda ctx, columns: None)  # the images, as before
    assert fast == run_native_query(broker_env.service, full)


def _numbers(value: Any) -> list[float]:
    """Every number in a native answer."""
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [float(value)] if isinstance(value, (int, float)) and not isinstance(value, bool) else []
