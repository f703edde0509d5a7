"""BITWISE_COMPLEMENT and BITWISE_SHIFT_RIGHT through the broker, against Java's ``~x`` and ``x >> (n & 63)``."""

from __future__ import annotations

import duckdb
import pytest

from serving.broker.sql.catalog import Catalog, ColumnInfo
from serving.broker.sql.translate import translate
from serving.errors import DruidError

CATALOG = Catalog({"t": [ColumnInfo("__time", "LONG", "time"), ColumnInfo("x", "LONG", "metric"),
                         ColumnInfo("n", "LONG", "metric")]})
ROWS = [(5, 1), (-8, 1), (1, 64), (-1, 63), (9_223_372_036_854_775_807, 62), (None, 1), (7, None)]


def _java_shift_right(x: int | None, n: int | None) -> int | None:
    return None if x is None or n is None else x >> (n & 63)


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute('CREATE TABLE t ("__time" TIMESTAMP, x BIGINT, n BIGINT)')
    c.executemany("INSERT INTO t VALUES (TIMESTAMP '2026-01-01', ?, ?)", ROWS)
    return c


def test_complement_and_shift_right_match_java(con: duckdb.DuckDBPyConnection) -> None:
    sql = translate("SELECT x, n, BITWISE_COMPLEMENT(x), BITWISE_SHIFT_RIGHT(x, n) FROM t", CATALOG).sql
    got = {(x, n): (c, s) for x, n, c, s in con.execute(sql).fetchall()}
    assert got == {(x, n): (None if x is None else ~x, _java_shift_right(x, n)) for x, n in ROWS}


@pytest.mark.parametrize("sql", ["SELECT BITWISE_COMPLEMENT(x, 1) FROM t", "SELECT BITWISE_SHIFT_RIGHT(x) FROM t"])
def test_wrong_argument_counts_are_druid_400s(sql: str) -> None:
    with pytest.raises(DruidError) as ei:
        translate(sql, CATALOG)
    assert ei.value.status == 400


def _java_shift_left(x: int | None, n: int | None) -> int | None:
    if x is None or n is None:
        return None
    v = (x << (n & 63)) & (2**64 - 1)  # a Java long wraps around
    return v - 2**64 if v >= 2**63 else v


def test_shift_left_wraps_around_as_java_does(con: duckdb.DuckDBPyConnection) -> None:
    sql = translate("SELECT x, n, BITWISE_SHIFT_LEFT(x, n) FROM t", CATALOG).sql
    got = {(x, n): s for x, n, s in con.execute(sql).fetchall()}
    assert got == {(x, n): _java_shift_left(x, n) for x, n in ROWS}
    assert got[(9_223_372_036_854_775_807, 62)] == -4611686018427387904 and got[(-8, 1)] == -16
