"""Window frames read and checked as Druid (Calcite) reads them (serving/broker/sql/rules/window_frames.py)."""

from __future__ import annotations

import pytest

from serving.broker.sql import Catalog, ColumnInfo, translate
from serving.errors import DruidError

CATALOG = Catalog({"wiki": [ColumnInfo("__time", "LONG", "time"), ColumnInfo("page", "STRING", "dimension"),
                            ColumnInfo("added", "LONG", "metric")]})


def _frame(frame: str) -> str:
    sql = translate(f"SELECT SUM(added) OVER (PARTITION BY page ORDER BY __time {frame}) FROM wiki", CATALOG).sql
    return sql[sql.index("NULLS FIRST") + len("NULLS FIRST "):sql.index(") AS")]


@pytest.mark.parametrize(("frame", "duckdb"), [
    ("ROWS 2 PRECEDING", "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW"),
    ("ROWS 0 FOLLOWING", "ROWS BETWEEN CURRENT ROW AND 0 FOLLOWING"),
    ("ROWS UNBOUNDED FOLLOWING", "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING"),
    ("RANGE UNBOUNDED FOLLOWING", "RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING"),
    ("RANGE CURRENT ROW", "RANGE BETWEEN CURRENT ROW AND CURRENT ROW"),
    ("ROWS BETWEEN 3 FOLLOWING AND 1 FOLLOWING", "ROWS BETWEEN 3 FOLLOWING AND 1 FOLLOWING"),
    ("ROWS BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING", "ROWS BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING"),
])
def test_frames_druid_accepts(frame: str, duckdb: str) -> None:
    assert _frame(frame) == duckdb


@pytest.mark.parametrize(("frame", "message"), [
    ("ROWS BETWEEN UNBOUNDED FOLLOWING AND CURRENT ROW", "UNBOUNDED FOLLOWING cannot be specified for the lower"),
    ("ROWS BETWEEN CURRENT ROW AND UNBOUNDED PRECEDING", "UNBOUNDED PRECEDING cannot be specified for the upper"),
    ("ROWS BETWEEN 1 FOLLOWING AND 1 PRECEDING", "comes after its upper bound"),
    ("ROWS BETWEEN CURRENT ROW AND 2 PRECEDING", "comes after its upper bound"),
    ("ROWS BETWEEN 2 FOLLOWING AND CURRENT ROW", "comes after its upper bound"),
    ("ROWS BETWEEN -1 PRECEDING AND CURRENT ROW", "non-negative integer"),
    ("RANGE 0 PRECEDING", "RANGE clause currently supports only UNBOUNDED or CURRENT ROW"),
    ("RANGE BETWEEN CURRENT ROW AND 1 FOLLOWING", "RANGE clause currently supports only UNBOUNDED or CURRENT ROW"),
])
def test_frames_druid_refuses(frame: str, message: str) -> None:
    with pytest.raises(DruidError, match=message) as e:
        _frame(frame)
    assert e.value.status == 400


def test_rank_needs_an_order_by() -> None:
    with pytest.raises(DruidError, match="require ORDER BY clause in window specification"):
        translate("SELECT RANK() OVER (PARTITION BY page) FROM wiki", CATALOG)


def test_tied_rows_keep_the_grouping_order(wiki: object) -> None:
    # page/user groups of the wiki fixture; ordering by page alone ties the users of a page: Druid keeps
    # them in grouping order (user ascending), so ROW_NUMBER, FIRST_VALUE and a ROWS frame see them so
    from tests.unit.test_sql_execution import run

    _, rows = run(wiki, 'SELECT page, "user", ROW_NUMBER() OVER (ORDER BY page) AS rn, '
                        'FIRST_VALUE("user") OVER (ORDER BY page) AS fv, '
                        'LAST_VALUE("user") OVER (ORDER BY page ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) AS nxt, '
                        'COUNT(*) OVER (ORDER BY page) AS peers '
                        'FROM wiki GROUP BY page, "user"')
    assert sorted(rows, key=lambda r: r[2]) == [
        ("Help", "alice", 1, "alice", "alice", 1),
        ("Main", "alice", 2, "alice", "bob", 4),  # the default RANGE frame keeps ties as peers (COUNT 4)
        ("Main", "bob", 3, "alice", "carol", 4),
        ("Main", "carol", 4, "alice", "bob", 4),
        ("Talk", "bob", 5, "alice", "dave", 6),
        ("Talk", "dave", 6, "alice", "dave", 6),
    ]


def test_a_select_alias_is_not_a_window_key() -> None:
    # Calcite resolves no SELECT alias inside OVER (…): Druid's "Column 's' not found in any table"
    for sql in ("SELECT UPPER(page) AS s, COUNT(*) OVER (PARTITION BY s) FROM wiki",
                "SELECT UPPER(page) AS s, ROW_NUMBER() OVER w FROM wiki WINDOW w AS (ORDER BY s)"):
        with pytest.raises(DruidError, match="Column 's' not found in any table"):
            translate(sql, CATALOG)
    translate("SELECT page AS page, ROW_NUMBER() OVER (ORDER BY page) FROM wiki", CATALOG)  # a column
