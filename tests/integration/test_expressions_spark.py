"""The spark dialect of radstack.expressions / radstack.filters, executed by a real local Spark session
and compared with the DuckDB dialect on the same rows."""

from __future__ import annotations

import duckdb
import pytest

from radstack.expressions import expression_to_sql
from radstack.filters import filter_to_sql

pytestmark = pytest.mark.slow

TYPES = {"s": "STRING", "l": "LONG", "d": "DOUBLE"}
ROWS = [(1, 1_000_000_000_123, "Hello", 5, 2.5), (2, 1_583_020_800_000, None, None, None), (3, 1_699_999_999_999, "it's", -7, -0.5)]
EXPRS = [
    "concat(upper(s), '-', strlen(s))", "substring(s, 1, 3)", "strpos(s, 'l', 3)", "trim(s, 'H')",
    "regexp_extract(s, '(l+)', 1)", "l / 2", "div(d, 2)", "cast(d, 'LONG')", "if(l > 0, 'p', 'n')",
    "timestamp_floor(__time, 'P1M', null, 'America/Los_Angeles')", "timestamp_floor(__time, 'PT1H')",
    "timestamp_ceil(__time, 'P1D')", "timestamp_shift(__time, 'P1M', 2, 'Asia/Kolkata')",
    "timestamp_extract(__time, 'DOW')", "timestamp_extract(__time, 'ISOYEAR')",
    "timestamp_format(__time)", "timestamp_format(__time, 'yyyy-MM-dd HH:mm ZZ', 'America/Los_Angeles')",
    "timestamp_parse('2001-09-09T01:46:40.123Z')", "timestamp_parse('20010909', 'yyyyMMdd')",
]  # fmt: skip
FILTERS = [
    {"type": "like", "dimension": "s", "pattern": "it_s"},
    {"type": "bound", "dimension": "s", "lower": "a", "ordering": "alphanumeric"},
    {"type": "search", "dimension": "s", "query": {"type": "insensitive_contains", "value": "ELL"}},
    {"type": "not", "field": {"type": "selector", "dimension": "l", "value": "5"}},
]


@pytest.fixture(scope="module")
def spark(spark_session):  # type: ignore[no-untyped-def]
    s = spark_session  # the run's shared session (UTC session time zone)
    df = s.createDataFrame(
        [(i, t, st, lv, dv) for i, t, st, lv, dv in ROWS], "id INT, ms BIGINT, s STRING, l BIGINT, d DOUBLE"
    )
    df.selectExpr("id", "timestamp_millis(ms) AS __time", "s", "l", "d").createOrReplaceTempView("t")
    return s


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute("CREATE TABLE t (id INTEGER, __time TIMESTAMP, s VARCHAR, l BIGINT, d DOUBLE)")
    for r in ROWS:
        c.execute("INSERT INTO t VALUES (?, epoch_ms(?::BIGINT), ?, ?, ?)", list(r))
    return c


def test_expressions_agree(spark, con: duckdb.DuckDBPyConnection) -> None:  # type: ignore[no-untyped-def]
    for expr in EXPRS:
        ssql = expression_to_sql(expr, dialect="spark", column_types=TYPES)
        dsql = expression_to_sql(expr, column_types=TYPES)
        got = [r[0] for r in spark.sql(f"SELECT {ssql} AS v FROM t ORDER BY id").collect()]
        want = [r[0] for r in con.execute(f"SELECT {dsql} FROM t ORDER BY id").fetchall()]
        assert got == want, (expr, ssql)


def test_filters_agree(spark, con: duckdb.DuckDBPyConnection) -> None:  # type: ignore[no-untyped-def]
    for f in FILTERS:
        ssql = filter_to_sql(f, dialect="spark", column_types=TYPES)
        dsql = filter_to_sql(f, column_types=TYPES)
        got = [r[0] for r in spark.sql(f"SELECT id FROM t WHERE {ssql} ORDER BY id").collect()]
        want = [r[0] for r in con.execute(f"SELECT id FROM t WHERE {dsql} ORDER BY id").fetchall()]
        assert got == want, (f, ssql)


GRANULARITIES = [
    "none", "all", "second", "minute", "fifteen_minute", "hour", "six_hour", "day", "week", "month", "quarter",
    "year", {"type": "period", "period": "PT1H", "timeZone": "Asia/Kolkata"},
    {"type": "period", "period": "P1D", "timeZone": "America/Los_Angeles"},
    {"type": "period", "period": "P1M", "timeZone": "Europe/Berlin"},
    {"type": "duration", "duration": 7_200_000, "origin": "1970-01-01T00:30:00Z"},
    {"type": "period", "period": "PT6H", "origin": "2020-01-01T01:00:00Z"},
]  # fmt: skip


@pytest.mark.parametrize("gran", GRANULARITIES, ids=str)
def test_rollup_floor_matches_granularity_bucket_start(spark, gran) -> None:  # type: ignore[no-untyped-def]
    """The batch rebuild floors ``__time`` in Spark (radstack.pipeline.rollup): same buckets as the
    indexer's Granularity.bucket_start, zoned and calendar periods included."""
    from radstack.pipeline.rollup import _floor
    from radstack.time.granularity import Granularity

    g = Granularity.parse(gran)
    times = [0, 1, 1_000_000_000_123, 1_583_020_800_000, 1_699_999_999_999, 1_711_846_799_999, -86_400_001]
    df = spark.createDataFrame([(t,) for t in times], "__time BIGINT")
    got = [r["b"] for r in _floor(df, "__time", "b", g).orderBy("__time").collect()]
    assert got == [g.bucket_start(t) for t in sorted(times)]
