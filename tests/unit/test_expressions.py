"""Druid expressions → SQL: parsed, compiled, and executed in DuckDB (Spark SQL parsed by sqlglot)."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import pytest
import sqlglot

from radstack.expressions import (
    Binary,
    Call,
    ExpressionError,
    Identifier,
    Literal,
    Unary,
    compile_expression,
    expression_to_predicate_sql,
    expression_to_sql,
    parse_expression,
    required_columns,
)
from radstack.time.granularity import Granularity
from radstack.time.joda import format_millis, parse_to_millis

TYPES = {"s": "STRING", "l": "LONG", "d": "DOUBLE", "n": "STRING", "t": "STRING"}
T0 = 1_000_000_000_123  # 2001-09-09T01:46:40.123Z
T1 = 1_583_020_800_000  # 2020-03-01T00:00:00Z (after a leap day)
T2 = 1_699_999_999_999


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute(
        """CREATE TABLE t (id INTEGER, __time TIMESTAMP, s VARCHAR, l BIGINT, d DOUBLE, n VARCHAR, "weird ""col" VARCHAR)"""
    )
    rows = [
        (1, T0, "Hello", 5, 2.5, "12", "w1"),
        (2, T1, None, None, None, None, None),
        (3, T2, "it's", -7, -0.5, "true", "w3"),
    ]
    for r in rows:
        c.execute("INSERT INTO t VALUES (?, epoch_ms(?::BIGINT), ?, ?, ?, ?, ?)", list(r))
    return c


def run(con: duckdb.DuckDBPyConnection, expr: str) -> list[object]:
    sql = expression_to_sql(expr, column_types=TYPES)
    return [r[0] for r in con.execute(f"SELECT {sql} FROM t ORDER BY id").fetchall()]


# ---- parser ---------------------------------------------------------------------------------------


def test_parse_ast_and_precedence() -> None:
    assert parse_expression("1 + 2 * x") == Binary("+", Literal(1, "LONG"), Binary("*", Literal(2, "LONG"), Identifier("x")))
    # unary binds tighter than '^' in Druid; '^' is right-associative
    assert parse_expression("-x^2") == Binary("^", Unary("-", Identifier("x")), Literal(2, "LONG"))
    assert parse_expression("2^3^2") == Binary("^", Literal(2, "LONG"), Binary("^", Literal(3, "LONG"), Literal(2, "LONG")))
    assert parse_expression("a || b && c") == Binary("||", Identifier("a"), Binary("&&", Identifier("b"), Identifier("c")))
    assert parse_expression('"my col" == \'x\\\'y\'') == Binary("==", Identifier("my col"), Literal("x'y", "STRING"))
    assert parse_expression("CONCAT(a, null, 1.5e1)") == Call(
        "concat", (Identifier("a"), Literal(None, None), Literal(15.0, "DOUBLE"))
    )


@pytest.mark.parametrize("bad", ["1 +", "f(1,", "(a", "a b", "'open", "", "[1, 2]", "a = b"])
def test_parse_errors(bad: str) -> None:
    with pytest.raises(ExpressionError):
        parse_expression(bad)


def test_unknown_function_is_named() -> None:
    with pytest.raises(ExpressionError, match="frobnicate"):
        expression_to_sql("frobnicate(x)")
    with pytest.raises(ExpressionError, match="strlen"):
        expression_to_sql("strlen(a, b)")


def test_required_columns() -> None:
    assert required_columns("concat(a, \"b c\") + timestamp_floor(__time, 'PT1H')") == {"a", "b c", "__time"}


# ---- evaluation in DuckDB ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("1 + 2 * 3", [7, 7, 7]),
        ("-2^2", [4, 4, 4]),
        ("2^3^2", [512, 512, 512]),
        ("7 / 2", [3, 3, 3]),
        ("-7 / 2", [-3, -3, -3]),
        ("7 / 2.0", [3.5, 3.5, 3.5]),
        ("7 % 3", [1, 1, 1]),
        ("-7 % 3", [-1, -1, -1]),
        ("l / 0", [None, None, None]),
        ("3000000000 * 4", [12000000000] * 3),
        ("l + 1", [6, None, -6]),
        ("l * d", [12.5, None, 3.5]),
        ("s + '!'", ["Hello!", None, "it's!"]),
        ("concat(s, '-', l, '-', d)", ["Hello-5-2.5", None, "it's--7--0.5"]),
        ("upper(s)", ["HELLO", None, "IT'S"]),
        ("lower(s)", ["hello", None, "it's"]),
        ("strlen(s)", [5, None, 4]),
        ("substring(s, 1, 3)", ["ell", None, "t's"]),
        ("substring(s, 2, -1)", ["llo", None, "'s"]),
        ("substring(s, 4, 10)", ["o", None, None]),
        ("left(s, 2)", ["He", None, "it"]),
        ("right(s, 2)", ["lo", None, "'s"]),
        ("replace(s, 'l', 'L')", ["HeLLo", None, "it's"]),
        ("trim('  x  ')", ["x"] * 3),
        ("ltrim('xxaxx', 'x')", ["axx"] * 3),
        ("rtrim('xxaxx', 'x')", ["xxa"] * 3),
        ("lpad(s, 7, '*')", ["**Hello", None, "***it's"]),
        ("rpad(s, 3, '*')", ["Hel", None, "it'"]),
        ("strpos(s, 'l')", [2, None, -1]),
        ("strpos(s, 'l', 3)", [3, None, -1]),
        ("contains_string(s, 'ell')", [1, None, 0]),
        ("contains_string(s, 'ELL')", [0, None, 0]),
        ("icontains_string(s, 'ELL')", [1, None, 0]),
        ("regexp_extract(s, 'l+')", ["ll", None, None]),
        ("regexp_extract(s, '(.)(l+)', 1)", ["e", None, None]),
        ("regexp_like(s, '^H')", [1, None, 0]),
        ("nvl(s, 'none')", ["Hello", "none", "it's"]),
        ("nvl(l, 0)", [5, 0, -7]),
        ("if(l > 0, 'pos', 'neg')", ["pos", "neg", "neg"]),
        ("if(n, 1, 2)", [2, 2, 1]),
        ("case_searched(l > 0, 'pos', l < 0, 'neg', 'null')", ["pos", "null", "neg"]),
        ("case_searched(l > 0, 'pos')", ["pos", None, None]),
        ("case_simple(s, 'Hello', 1, 'it''s', 2, 0)".replace("''", "\\'"), [1, 0, 2]),
        ("isnull(s)", [0, 1, 0]),
        ("notnull(s)", [1, 0, 1]),
        ("cast(d, 'LONG')", [2, None, 0]),
        ("cast(n, 'LONG')", [12, None, None]),
        ("cast('1.9', 'LONG')", [1, 1, 1]),
        ("cast(l, 'DOUBLE')", [5.0, None, -7.0]),
        ("cast(l, 'STRING')", ["5", None, "-7"]),
        ("cast(n, 'DOUBLE') + 1", [13.0, None, None]),
        ("abs(l)", [5, None, 7]),
        ("ceil(d)", [3.0, None, -0.0]),
        ("floor(d)", [2.0, None, -1.0]),
        ("round(d)", [3.0, None, -1.0]),
        ("round(2.345, 2)", [2.35] * 3),
        ("round(l)", [5, None, -7]),
        ("pow(2, 10)", [1024.0] * 3),
        ("sqrt(16)", [4.0] * 3),
        ("log10(1000)", [3.0] * 3),
        ("exp(0)", [1.0] * 3),
        ("greatest(l, 0, 3)", [5, 3, 3]),
        ("least(l, d)", [2.5, None, -7.0]),
        ("max(1, 2)", [2] * 3),
        ("div(l, 2)", [2, None, -3]),
        ("div(7.5, 2)", [3] * 3),
        ("l > 3 && d < 3", [1, None, 0]),
        ("l > 3 || d < 3", [1, None, 1]),
        ("l > 100 && d < 3", [0, None, 0]),  # false && null = false
        ("!(l > 3)", [0, None, 1]),
        ("!s", [1, None, 1]),
        ("!n", [1, None, 0]),
        ("s == 'Hello'", [1, None, 0]),
        ("s != 'Hello'", [0, None, 1]),
        ("s < 'a'", [1, None, 0]),
        ("n > 5", [1, None, None]),
        ('"weird ""col" == \'w1\''.replace('""', '\\"'), [1, None, 0]),
        ("null", [None, None, None]),
        ("__time", [T0, T1, T2]),
        ("__time + 1000", [T0 + 1000, T1 + 1000, T2 + 1000]),
    ],
)
def test_duckdb_evaluation(con: duckdb.DuckDBPyConnection, expr: str, expected: list[object]) -> None:
    got = run(con, expr)
    assert got == expected, expression_to_sql(expr, column_types=TYPES)


def test_output_types() -> None:
    assert compile_expression("l / 2", column_types=TYPES).type == "LONG"
    assert compile_expression("l / 2.0", column_types=TYPES).type == "DOUBLE"
    assert compile_expression("s + s", column_types=TYPES).type == "STRING"
    assert compile_expression("l > 1", column_types=TYPES).type == "LONG"
    assert compile_expression("timestamp_extract(__time, 'CENTURY')").type == "DOUBLE"


def test_predicate_form(con: duckdb.DuckDBPyConnection) -> None:
    sql = expression_to_predicate_sql("l > 0 || n", column_types=TYPES)
    ids = [r[0] for r in con.execute(f"SELECT id FROM t WHERE {sql} ORDER BY id").fetchall()]
    assert ids == [1, 3]


def test_injection_through_literals(con: duckdb.DuckDBPyConnection) -> None:
    evil = "x'); DROP TABLE t; --"
    expr = "concat(s, '" + evil.replace("'", "\\'") + "')"
    assert run(con, expr) == ["Hello" + evil, None, "it's" + evil]
    assert con.execute("SELECT count(*) FROM t").fetchone() == (3,)


# ---- time functions, checked against the pure-Python reference -----------------------------------

INSTANTS = [T0, T1, T2, 0, 1_710_054_000_000, 1_730_595_600_000]  # incl. 2024 DST switch days (US)


def _time_values(con: duckdb.DuckDBPyConnection, expr: str) -> list[object]:
    sql = expression_to_sql(expr, column_types={"x": "LONG"})
    out = []
    for ms in INSTANTS:
        out.append(con.execute(f"SELECT {sql} FROM (SELECT ?::BIGINT AS x)", [ms]).fetchone()[0])
    return out


@pytest.mark.parametrize("period", ["PT1S", "PT5M", "PT1H", "PT6H", "P1D", "P1W", "P1M", "P3M", "P1Y", "P2D", "PT2H"])
@pytest.mark.parametrize("tz", ["UTC", "America/Los_Angeles", "Asia/Kolkata"])
def test_timestamp_floor_matches_granularity(con: duckdb.DuckDBPyConnection, period: str, tz: str) -> None:
    g = Granularity.parse({"type": "period", "period": period, "timeZone": tz})
    got = _time_values(con, f"timestamp_floor(x, '{period}', null, '{tz}')")
    assert got == [g.bucket_start(ms) for ms in INSTANTS]


@pytest.mark.parametrize("period", ["PT1H", "P1D", "P1M"])
def test_timestamp_ceil(con: duckdb.DuckDBPyConnection, period: str) -> None:
    g = Granularity.parse(period)
    got = _time_values(con, f"timestamp_ceil(x, '{period}')")
    assert got == [ms if g.bucket_start(ms) == ms else g.next_start(g.bucket_start(ms)) for ms in INSTANTS]


def test_timestamp_floor_with_origin(con: duckdb.DuckDBPyConnection) -> None:
    origin = 1_000_000_000_000 + 15 * 60_000
    g = Granularity.parse({"type": "period", "period": "PT1H", "origin": origin})
    assert _time_values(con, f"timestamp_floor(x, 'PT1H', {origin})") == [g.bucket_start(ms) for ms in INSTANTS]
    g = Granularity.parse({"type": "period", "period": "P1M", "origin": "2000-01-15T00:00:00Z"})
    got = _time_values(con, "timestamp_floor(x, 'P1M', '2000-01-15T00:00:00Z')")
    assert got == [g.bucket_start(ms) for ms in INSTANTS]


@pytest.mark.parametrize(("period", "step"), [("PT1H", 3), ("P1D", -2), ("P1M", 1), ("P1Y", 2), ("P1M", -13)])
@pytest.mark.parametrize("tz", ["UTC", "America/Los_Angeles"])
def test_timestamp_shift(con: duckdb.DuckDBPyConnection, period: str, step: int, tz: str) -> None:
    from radstack.time.intervals import Period, datetime_to_ms, ms_to_datetime
    from radstack.time.joda import zone

    p = Period.parse(period)
    expected = [datetime_to_ms(p.add_to(ms_to_datetime(ms).astimezone(zone(tz)), step)) for ms in INSTANTS]
    assert _time_values(con, f"timestamp_shift(x, '{period}', {step}, '{tz}')") == expected


@pytest.mark.parametrize(
    "unit",
    ["EPOCH", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "DOW", "ISODOW", "DOY", "WEEK", "MONTH",
     "QUARTER", "YEAR", "ISOYEAR", "DECADE", "CENTURY", "MILLENNIUM"],
)
@pytest.mark.parametrize("tz", ["UTC", "Asia/Kolkata"])
def test_timestamp_extract(con: duckdb.DuckDBPyConnection, unit: str, tz: str) -> None:
    from radstack.time.joda import zone

    def ref(ms: int) -> float:
        dt = datetime.fromtimestamp(ms / 1000, UTC).astimezone(zone(tz))
        iso = dt.isocalendar()
        return {
            "EPOCH": ms // 1000, "MILLISECOND": ms % 1000, "SECOND": dt.second, "MINUTE": dt.minute,
            "HOUR": dt.hour, "DAY": dt.day, "DOW": dt.isoweekday(), "ISODOW": dt.isoweekday(),
            "DOY": dt.timetuple().tm_yday, "WEEK": iso.week, "MONTH": dt.month,
            "QUARTER": (dt.month - 1) // 3 + 1, "YEAR": dt.year, "ISOYEAR": iso.year,
            "DECADE": dt.year // 10, "CENTURY": -(-dt.year // 100), "MILLENNIUM": -(-dt.year // 1000),
        }[unit]  # fmt: skip

    assert _time_values(con, f"timestamp_extract(x, '{unit}', '{tz}')") == [ref(ms) for ms in INSTANTS]


@pytest.mark.parametrize(
    "pattern",
    [None, "yyyy-MM-dd'T'HH:mm:ss.SSSZZ", "yyyy-MM-dd HH:mm:ss.SSS Z", "yyyyMMdd", "MMM d, yyyy h:mm a",
     "EEEE dd MMMM yy", "HH:mm:ss.S", "yyyy ZZZ z"],
)
@pytest.mark.parametrize("tz", ["UTC", "America/Los_Angeles", "Asia/Kolkata"])
def test_timestamp_format(con: duckdb.DuckDBPyConnection, pattern: str | None, tz: str) -> None:
    if pattern is not None and " z" in pattern and tz != "UTC":
        with pytest.raises(ExpressionError):
            expression_to_sql("timestamp_format(x, '" + pattern + f"', '{tz}')")
        return
    arg = "null" if pattern is None else "'" + pattern.replace("'", "\\'") + "'"
    got = _time_values(con, f"timestamp_format(x, {arg}, '{tz}')")
    assert got == [format_millis(ms, pattern, tz) for ms in INSTANTS]


@pytest.mark.parametrize(
    ("pattern", "tz"),
    [(None, "UTC"), (None, "America/Los_Angeles"), ("yyyy-MM-dd'T'HH:mm:ss.SSSZZ", "UTC"),
     ("yyyy-MM-dd HH:mm:ss", "Asia/Kolkata"), ("yyyyMMdd", "UTC"), ("d MMM yyyy h:mm a", "America/Los_Angeles")],
)
def test_timestamp_parse_roundtrip(con: duckdb.DuckDBPyConnection, pattern: str | None, tz: str) -> None:
    arg = "" if pattern is None else ", '" + pattern.replace("'", "\\'") + f"', '{tz}'"
    if pattern is None and tz != "UTC":
        arg = f", null, '{tz}'"
    sql = expression_to_sql(f"timestamp_parse(x{arg})", column_types={"x": "STRING"})
    for ms in INSTANTS:
        text = format_millis(ms, pattern, tz)
        if pattern is None:
            text = text.replace("T", " ")[:23] if tz != "UTC" else text  # local text, no offset
        (got,) = con.execute(f"SELECT {sql} FROM (SELECT ?::VARCHAR AS x)", [text]).fetchone()
        assert got == parse_to_millis(text, pattern, tz), (text, sql)


def test_timestamp_parse_failures_are_null(con: duckdb.DuckDBPyConnection) -> None:
    for expr in ("timestamp_parse('garbage')", "timestamp_parse('2001-13-45', 'yyyy-MM-dd')", "timestamp('x')"):
        assert run(con, expr) == [None, None, None]
    assert run(con, "timestamp('2001-09-09T01:46:40.123Z')") == [T0] * 3


def test_time_function_arguments_must_be_literals() -> None:
    with pytest.raises(ExpressionError, match="period"):
        expression_to_sql("timestamp_floor(__time, s)")
    with pytest.raises(ExpressionError, match="period"):
        expression_to_sql("timestamp_floor(__time, 'P1X')")
    with pytest.raises(ExpressionError, match="time zone"):
        expression_to_sql("timestamp_floor(__time, 'P1D', null, 'Mars/Olympus')")
    with pytest.raises(ExpressionError, match="unit"):
        expression_to_sql("timestamp_extract(__time, 'FORTNIGHT')")


# ---- identifiers and dialects -----------------------------------------------------------------------


def test_time_column_and_quoting() -> None:
    assert expression_to_sql("__time") == 'epoch_ms("__time")'
    assert expression_to_sql("__time", dialect="spark") == "unix_millis(`__time`)"
    assert expression_to_sql("__time", column_types={"__time": "LONG"}) == '"__time"'
    assert expression_to_sql('"a""b"'.replace('""', '\\"')) == '"a""b"'
    assert expression_to_sql('"a`b"', dialect="spark") == "`a``b`"
    assert expression_to_sql("'it\\'s'", dialect="spark") == "'it\\'s'"
    with pytest.raises(ExpressionError, match="dialect"):
        expression_to_sql("1", dialect="oracle")


SPARK_EXPRS = [
    "concat(upper(s), '-', strlen(s))", "substring(s, 1, 3)", "substring(s, l, d)", "left(s, 2)", "right(s, 2)",
    "replace(s, 'a', 'b')", "trim(s)", "ltrim(s, 'x')", "rtrim(s)", "lpad(s, 5, '*')", "rpad(s, 5, '*')",
    "strpos(s, 'a')", "strpos(s, 'a', 2)", "contains_string(s, 'a')", "icontains_string(s, 'A')",
    "regexp_extract(s, 'a(\\\\d+)', 1)", "regexp_like(s, '^a')", "nvl(s, 'x')", "if(l > 1, 'a', 'b')",
    "case_searched(l > 1, 1, l < 0, 2, 3)", "case_simple(s, 'a', 1, 2)", "isnull(s)", "notnull(s)",
    "cast(s, 'LONG')", "cast(l, 'DOUBLE')", "cast(d, 'STRING')", "abs(d)", "ceil(d)", "floor(d)", "round(d, 1)",
    "exp(d)", "log(d)", "log10(d)", "pow(d, 2)", "sqrt(d)", "greatest(l, d)", "least(l, 1)", "div(l, 3)",
    "l / 2 + d * 3 - 1 % 2", "-l ^ 2", "!(l > 1) && s == 'x' || d != 1",
    "timestamp('2001-01-01')", "timestamp_parse(s, 'yyyy-MM-dd', 'Asia/Tokyo')",
    "timestamp_floor(__time, 'PT1H')", "timestamp_floor(__time, 'P1M', null, 'America/Los_Angeles')",
    "timestamp_floor(__time, 'P2D', null, 'America/Los_Angeles')",
    "timestamp_ceil(__time, 'P1D')", "timestamp_shift(__time, 'P1M', 2, 'Asia/Kolkata')",
    "timestamp_shift(__time, 'PT1H', l)", "timestamp_extract(__time, 'ISOYEAR')",
    "timestamp_extract(__time, 'DOW', 'Europe/Paris')",
    "timestamp_format(__time)", "timestamp_format(__time, 'yyyy-MM-dd\\'T\\'HH:mm:ssZZ', 'America/Los_Angeles')",
]  # fmt: skip


@pytest.mark.parametrize("expr", SPARK_EXPRS)
def test_spark_dialect_parses(expr: str) -> None:
    sql = expression_to_sql(expr, dialect="spark", column_types=TYPES)
    tree = sqlglot.parse_one(sql, read="spark")
    assert tree is not None
    assert '"' not in sql.replace("\\'", "")  # identifiers use backticks in Spark


@pytest.mark.parametrize("expr", SPARK_EXPRS)
def test_duckdb_dialect_runs_everything(con: duckdb.DuckDBPyConnection, expr: str) -> None:
    sql = expression_to_sql(expr, column_types=TYPES)
    con.execute(f"SELECT {sql} FROM t").fetchall()
