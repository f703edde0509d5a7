"""Druid's native expression language (transformSpec transforms, virtual columns, expression filters,
expression aggregators and post-aggregators), parsed to a small AST and compiled to SQL.

    >>> expression_to_sql("concat(upper(page), '-', strlen(page))", column_types={"page": "STRING"})

Semantics follow Druid with SQL-compatible null handling: ``null`` propagates through operators and
most functions; comparisons and ``&& || !`` yield ``1``/``0`` longs (or ``null``, three-valued);
truthiness of a long/double is ``> 0`` and of a string is ``'true'`` (case-insensitive); ``/`` of two
longs is integer division (truncating, like Java); division or modulo by zero yields ``null``.
Within expressions ``__time`` is epoch millis: the compiled SQL reads the table's ``__time`` TIMESTAMP
column through ``epoch_ms("__time")`` (DuckDB) or ``unix_millis(`__time`)`` (Spark).

Two dialects are produced: ``duckdb`` (the broker and the indexer) and ``spark`` (the streaming and
batch jobs; written for a Spark session whose ``spark.sql.session.timeZone`` is ``UTC``).
The time helpers (:func:`time_floor_sql`, :func:`time_format_sql`, …) are public so the SQL layer can
compile ``TIME_FLOOR``/``TIME_FORMAT``/``TIME_PARSE`` with the same code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from radstack import joda
from radstack.granularity import Granularity
from radstack.intervals import Period, TimeParseError, ms_to_datetime, parse_instant

__all__ = [
    "ExpressionError",
    "Literal",
    "Identifier",
    "Unary",
    "Binary",
    "Call",
    "Expr",
    "Compiled",
    "parse_expression",
    "expression_to_sql",
    "compile_expression",
    "required_columns",
    "normalize_type",
    "quote_identifier",
    "string_literal",
    "millis_to_local_sql",
    "local_to_millis_sql",
    "time_floor_sql",
    "granularity_floor_sql",
    "time_ceil_sql",
    "time_shift_sql",
    "time_extract_sql",
    "time_format_sql",
    "time_parse_sql",
]

DIALECTS = ("duckdb", "spark")


class ExpressionError(ValueError):
    """An expression that cannot be parsed or compiled (the message names the culprit)."""


# ---- AST ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Literal:
    value: int | float | str | None
    type: str | None  # "LONG" | "DOUBLE" | "STRING" | None (null)


@dataclass(frozen=True)
class Identifier:
    name: str


@dataclass(frozen=True)
class Unary:
    op: str  # "-" | "!"
    arg: Expr


@dataclass(frozen=True)
class Binary:
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Call:
    name: str  # lower-cased
    args: tuple[Expr, ...]


Expr = Literal | Identifier | Unary | Binary | Call

# ---- tokenizer + parser ----------------------------------------------------------------------------

_TOKEN_RX = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<double>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<long>\d+)
  | (?P<string>'(?:[^'\\]|\\.)*')
  | (?P<qident>"(?:[^"\\]|\\.)*")
  | (?P<ident>[_$a-zA-Z][_$a-zA-Z0-9]*)
  | (?P<op><=|>=|==|!=|&&|\|\||[-+*/%^<>!(),\[\]])
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0"}


def _unescape(body: str) -> str:
    def repl(m: re.Match[str]) -> str:
        s = m.group(1)
        if s.startswith("u"):
            return chr(int(s[1:], 16))
        return _ESCAPES.get(s, s)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", repl, body, flags=re.DOTALL)


def _tokenize(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RX.match(text, pos)
        if not m:
            raise ExpressionError(f"cannot parse expression {text!r}: unexpected {text[pos:pos + 10]!r}")
        kind = m.lastgroup or ""
        if kind != "ws":
            out.append((kind, m.group()))
        pos = m.end()
    out.append(("eof", ""))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i]

    def take(self) -> tuple[str, str]:
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept(self, *ops: str) -> str | None:
        kind, val = self.peek()
        if kind == "op" and val in ops:
            self.i += 1
            return val
        return None

    def expect(self, op: str) -> None:
        if not self.accept(op):
            raise ExpressionError(
                f"cannot parse expression {self.text!r}: expected {op!r} but found {self.peek()[1]!r}"
            )

    def parse(self) -> Expr:
        e = self.or_()
        if self.peek()[0] != "eof":
            raise ExpressionError(f"cannot parse expression {self.text!r}: unexpected {self.peek()[1]!r}")
        return e

    def or_(self) -> Expr:
        e = self.and_()
        while self.accept("||"):
            e = Binary("||", e, self.and_())
        return e

    def and_(self) -> Expr:
        e = self.cmp()
        while self.accept("&&"):
            e = Binary("&&", e, self.cmp())
        return e

    def cmp(self) -> Expr:
        e = self.add()
        while op := self.accept("<", "<=", ">", ">=", "==", "!="):
            e = Binary(op, e, self.add())
        return e

    def add(self) -> Expr:
        e = self.mul()
        while op := self.accept("+", "-"):
            e = Binary(op, e, self.mul())
        return e

    def mul(self) -> Expr:
        e = self.pow()
        while op := self.accept("*", "/", "%"):
            e = Binary(op, e, self.pow())
        return e

    def pow(self) -> Expr:
        base = self.unary()
        if self.accept("^"):
            return Binary("^", base, self.pow())  # right-associative
        return base

    def unary(self) -> Expr:
        # Druid's grammar binds unary minus/not tighter than '^': -2^2 == (-2)^2.
        if op := self.accept("-", "!"):
            arg = self.unary()
            if op == "-" and isinstance(arg, Literal) and arg.type in ("LONG", "DOUBLE"):
                assert isinstance(arg.value, int | float)
                return Literal(-arg.value, arg.type)
            return Unary(op, arg)
        return self.primary()

    def primary(self) -> Expr:
        kind, val = self.take()
        if kind == "long":
            return Literal(int(val), "LONG")
        if kind == "double":
            return Literal(float(val), "DOUBLE")
        if kind == "string":
            return Literal(_unescape(val[1:-1]), "STRING")
        if kind == "qident":
            return Identifier(_unescape(val[1:-1]))
        if kind == "ident":
            if val == "null":
                return Literal(None, None)
            if val in ("NaN", "Infinity"):
                return Literal(float(val.lower().replace("infinity", "inf")), "DOUBLE")
            if self.accept("("):
                args: list[Expr] = []
                if not self.accept(")"):
                    args.append(self.or_())
                    while self.accept(","):
                        args.append(self.or_())
                    self.expect(")")
                return Call(val.lower(), tuple(args))
            return Identifier(val)
        if kind == "op" and val == "(":
            e = self.or_()
            self.expect(")")
            return e
        if kind == "op" and val == "[":
            raise ExpressionError(f"array literals are not supported (in {self.text!r})")
        raise ExpressionError(f"cannot parse expression {self.text!r}: unexpected {val or 'end of input'!r}")


def parse_expression(text: str) -> Expr:
    """Parse a Druid expression into an AST (raises :class:`ExpressionError`)."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("expression is empty")
    return _Parser(text).parse()


def required_columns(expr: str | Expr) -> set[str]:
    """The column names an expression reads."""
    node = parse_expression(expr) if isinstance(expr, str) else expr
    out: set[str] = set()

    def walk(n: Expr) -> None:
        if isinstance(n, Identifier):
            out.add(n.name)
        elif isinstance(n, Unary):
            walk(n.arg)
        elif isinstance(n, Binary):
            walk(n.left)
            walk(n.right)
        elif isinstance(n, Call):
            for a in n.args:
                walk(a)

    walk(node)
    return out


# ---- SQL building blocks -------------------------------------------------------------------------


def _check_dialect(dialect: str) -> str:
    d = dialect.lower()
    if d not in DIALECTS:
        raise ExpressionError(f"unknown SQL dialect {dialect!r} (expected one of {', '.join(DIALECTS)})")
    return d


def quote_identifier(name: str, dialect: str = "duckdb") -> str:
    """A column name as a quoted SQL identifier (``"a""b"`` in DuckDB, ```a``b``` in Spark)."""
    if _check_dialect(dialect) == "spark":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def string_literal(value: str, dialect: str = "duckdb") -> str:
    """A SQL string literal that reads back exactly ``value`` (no injection possible)."""
    if "\0" in value:
        raise ExpressionError("NUL characters are not allowed in string literals")
    if _check_dialect(dialect) == "spark":
        # Spark processes backslash escapes inside literals and concatenates adjacent literals.
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return "'" + value.replace("'", "''") + "'"


_TYPE_ALIASES = {
    "LONG": "LONG", "BIGINT": "LONG", "INTEGER": "LONG", "INT": "LONG", "SMALLINT": "LONG",
    "TINYINT": "LONG", "INT64": "LONG", "INT32": "LONG", "BOOLEAN": "LONG",
    "DOUBLE": "DOUBLE", "FLOAT": "DOUBLE", "REAL": "DOUBLE", "DECIMAL": "DOUBLE", "FLOAT64": "DOUBLE",
    "FLOAT32": "DOUBLE", "NUMERIC": "DOUBLE",
    "STRING": "STRING", "VARCHAR": "STRING", "TEXT": "STRING", "CHAR": "STRING",
    "TIMESTAMP": "TIMESTAMP", "TIMESTAMP[MS]": "TIMESTAMP", "TIMESTAMP_MS": "TIMESTAMP",
}  # fmt: skip


def normalize_type(t: str | None) -> str | None:
    """Druid/SQL/Arrow type names → ``LONG`` | ``DOUBLE`` | ``STRING`` | ``TIMESTAMP`` | None."""
    if t is None:
        return None
    key = str(t).strip().upper()
    if key in _TYPE_ALIASES:
        return _TYPE_ALIASES[key]
    base = key.split("(")[0].strip()
    if base.startswith("TIMESTAMP"):
        return "TIMESTAMP"
    return _TYPE_ALIASES.get(base)


def _is_utc(tz: str | None) -> bool:
    return tz is None or tz.upper() in ("UTC", "Z", "ETC/UTC", "GMT", "UCT")


def _check_tz(tz: str | None) -> str:
    if tz is None:
        return "UTC"
    try:
        joda.zone(tz)
    except ValueError as e:
        raise ExpressionError(str(e)) from e
    return tz


def _idiv(a: str, b: str, dialect: str) -> str:
    return f"({a} div {b})" if dialect == "spark" else f"({a} // {b})"


def _str_type(dialect: str) -> str:
    return "STRING" if dialect == "spark" else "VARCHAR"


def _concat(parts: Sequence[str], dialect: str) -> str:
    if len(parts) == 1:
        return parts[0]
    if dialect == "spark":
        return "concat(" + ", ".join(parts) + ")"
    return "(" + " || ".join(parts) + ")"


def millis_to_local_sql(ms: str, tz: str | None, dialect: str = "duckdb") -> str:
    """SQL turning epoch millis into a zone-less TIMESTAMP holding the wall-clock time in ``tz``."""
    dialect = _check_dialect(dialect)
    tz = _check_tz(tz)
    if dialect == "spark":
        base = f"timestamp_millis({ms})"
        return base if _is_utc(tz) else f"from_utc_timestamp({base}, {string_literal(tz, dialect)})"
    base = f"epoch_ms({ms})"
    return base if _is_utc(tz) else f"timezone({string_literal(tz, dialect)}, timezone('UTC', {base}))"


def local_to_millis_sql(ts: str, tz: str | None, dialect: str = "duckdb") -> str:
    """SQL turning a zone-less wall-clock TIMESTAMP in ``tz`` back into epoch millis."""
    dialect = _check_dialect(dialect)
    tz = _check_tz(tz)
    if dialect == "spark":
        return (
            f"unix_millis({ts})"
            if _is_utc(tz)
            else f"unix_millis(to_utc_timestamp({ts}, {string_literal(tz, dialect)}))"
        )
    return f"epoch_ms({ts})" if _is_utc(tz) else f"epoch_ms(timezone({string_literal(tz, dialect)}, {ts}))"


def _period(text: str) -> Period:
    try:
        return Period.parse(text)
    except TimeParseError as e:
        raise ExpressionError(f"invalid period {text!r}") from e


def _fields(p: Period) -> list[tuple[str, int]]:
    return [
        (name, v)
        for name, v in (
            ("year", p.years), ("month", p.months), ("week", p.weeks), ("day", p.days),
            ("hour", p.hours), ("minute", p.minutes), ("millis", p.millis),
        )
        if v
    ]  # fmt: skip


def _spark_day_floor_from_origin(ms: str, p: Period, period: str, origin: int, tz: str) -> str:
    """Spark: whole days/weeks counted from an origin at local midnight (Druid's default origin)."""

    origin_local = ms_to_datetime(origin).astimezone(joda.zone(tz))
    if p.is_calendar or p.fixed_millis % 86_400_000 or origin_local.time() != origin_local.time().min:
        raise ExpressionError(f"timestamp_floor with period {period!r} and an origin is not supported on Spark")
    n = p.fixed_millis // 86_400_000
    local = millis_to_local_sql(ms, tz, "spark")
    olocal = millis_to_local_sql(str(origin), tz, "spark")
    d = f"datediff(to_date({local}), to_date({olocal}))"
    k = f"({d} - pmod({d}, {n}))"
    return local_to_millis_sql(f"CAST(date_add(to_date({olocal}), {k}) AS TIMESTAMP)", tz, "spark")


def _mod_floor(x: str, step: int, origin: int, dialect: str) -> str:
    """Floor ``x`` to a multiple of ``step`` counted from ``origin`` (exact integer arithmetic)."""
    shifted = f"({x} - {origin})" if origin else x
    return f"({x} - ((({shifted} % {step}) + {step}) % {step}))"


def time_floor_sql(
    ms: str,
    period: str,
    origin: int | None = None,
    tz: str | None = "UTC",
    dialect: str = "duckdb",
) -> str:
    """SQL for Druid's ``timestamp_floor(ms, period, origin, tz)`` / ``TIME_FLOOR`` (epoch millis)."""
    dialect = _check_dialect(dialect)
    tz = _check_tz(tz)
    p = _period(period)
    fields = _fields(p)
    fixed = not p.is_calendar and not p.weeks and (not p.days or _is_utc(tz))
    if origin is None and len(fields) == 1 and fields[0][1] > 1:
        # Druid aligns several units (PT6H, P2D …) on multiples from its default origin,
        # 1970-01-01T00:00 on the zone's wall clock (PeriodGranularity).
        origin = Granularity.parse({"type": "period", "period": period, "timeZone": tz})._default_origin()
    if origin is not None:
        if fixed and p.fixed_millis > 0:
            return _mod_floor(ms, p.fixed_millis, origin, dialect)
        if dialect == "spark":
            return _spark_day_floor_from_origin(ms, p, period, origin, tz)
        local = millis_to_local_sql(ms, tz, dialect)
        olocal = millis_to_local_sql(str(origin), tz, dialect)
        months = p.years * 12 + p.months
        if months and (p.weeks or p.days or p.fixed_millis):
            raise ExpressionError(f"timestamp_floor cannot mix months and days in {period!r}")
        if not months:
            width = f"to_days({p.weeks * 7 + p.days})"
            return local_to_millis_sql(f"time_bucket({width}, {local}, {olocal})", tz, dialect)
        # Whole months counted from the origin (DuckDB's time_bucket ignores the origin's day).
        diff = f"((year({local}) - year({olocal})) * 12 + month({local}) - month({olocal}))"
        k = f"({diff} - ((({diff} % {months}) + {months}) % {months}))"
        cand = f"({olocal} + to_months(CAST({k} AS INTEGER)))"
        prev = f"({olocal} + to_months(CAST({k} - {months} AS INTEGER)))"
        return local_to_millis_sql(f"(CASE WHEN {cand} > {local} THEN {prev} ELSE {cand} END)", tz, dialect)
    if _is_utc(tz) and fixed and p.fixed_millis > 0 and 86_400_000 % p.fixed_millis == 0:
        return _mod_floor(ms, p.fixed_millis, 0, dialect)
    if len(fields) != 1:
        if fixed and p.fixed_millis > 0 and _is_utc(tz):
            return _mod_floor(ms, p.fixed_millis, 0, dialect)
        raise ExpressionError(f"timestamp_floor with period {period!r} in zone {tz!r} is not supported")
    unit, n = fields[0]
    t = millis_to_local_sql(ms, tz, dialect)
    y, mo, d, h, mi = (f"year({t})", f"month({t})", f"dayofmonth({t})", f"hour({t})", f"minute({t})")

    def trunc(u: str) -> str:
        return f"date_trunc('{u}', {t})"

    if unit == "millis":
        if n % 1000 or 60_000 % n:
            # Sub-minute steps are zone-independent (zone offsets are whole minutes here).
            return _mod_floor(ms, n, 0, dialect)
        local = trunc("second") if n == 1000 else (
            f"make_timestamp({y}, {mo}, {d}, {h}, {mi}, second({t}) - second({t}) % {n // 1000})"
        )
    elif unit == "year":
        local = trunc("year") if n == 1 else f"make_timestamp({y} - {y} % {n}, 1, 1, 0, 0, 0)"
    elif unit == "month":
        if n == 1:
            local = trunc("month")
        elif n == 3:
            local = trunc("quarter")
        else:
            local = f"make_timestamp({y}, {mo} - ({mo} - 1) % {n}, 1, 0, 0, 0)"
    elif unit == "week":
        if n != 1:
            raise ExpressionError(f"timestamp_floor with period {period!r} is not supported")
        local = trunc("week")
    elif unit == "day":
        local = trunc("day") if n == 1 else f"make_timestamp({y}, {mo}, {d} - ({d} - 1) % {n}, 0, 0, 0)"
    elif unit == "hour":
        local = trunc("hour") if n == 1 else f"make_timestamp({y}, {mo}, {d}, {h} - {h} % {n}, 0, 0)"
    else:  # minute
        local = trunc("minute") if n == 1 else f"make_timestamp({y}, {mo}, {d}, {h}, {mi} - {mi} % {n}, 0)"
    return local_to_millis_sql(local, tz, dialect)


def granularity_floor_sql(gran: Granularity, ms: str, dialect: str = "duckdb") -> str:
    """SQL for :meth:`Granularity.bucket_start` of the epoch-millis expression ``ms`` (the indexer's
    ``queryGranularity`` truncation and segment bucketing); raises :class:`ExpressionError` where the
    dialect cannot say it (a few zoned periods with an origin on Spark)."""
    if gran.is_none:
        return ms
    if gran.is_all:
        return str(gran.bucket_start(0))
    if gran.kind == "duration":
        return _mod_floor(ms, int(gran.duration or 0), int(gran.origin or 0), _check_dialect(dialect))
    assert gran.period is not None
    return time_floor_sql(ms, gran.period.iso(), gran.origin, gran.time_zone, dialect)


def time_shift_sql(ms: str, period: str, step: str, tz: str | None = "UTC", dialect: str = "duckdb") -> str:
    """SQL for Druid's ``timestamp_shift(ms, period, step, tz)`` / ``TIME_SHIFT``."""
    dialect = _check_dialect(dialect)
    tz = _check_tz(tz)
    p = _period(period)
    months = p.years * 12 + p.months
    days = p.weeks * 7 + p.days
    time_ms = ((p.hours * 60 + p.minutes) * 60_000) + p.millis
    if not months and (not days or _is_utc(tz)):
        return f"({ms} + ({step}) * {p.fixed_millis})"
    local = millis_to_local_sql(ms, tz, dialect)
    if dialect == "spark":
        local = f"({local} + make_interval(0, CAST(({step}) * {months} AS INT), 0, CAST(({step}) * {days} AS INT), 0, 0, 0))"
    else:
        if months:
            local = f"({local} + to_months(CAST(({step}) * {months} AS INTEGER)))"
        if days:
            local = f"({local} + to_days(CAST(({step}) * {days} AS INTEGER)))"
    out = local_to_millis_sql(local, tz, dialect)
    return f"({out} + ({step}) * {time_ms})" if time_ms else out


def time_ceil_sql(
    ms: str, period: str, origin: int | None = None, tz: str | None = "UTC", dialect: str = "duckdb"
) -> str:
    """SQL for Druid's ``timestamp_ceil``: ``ms`` itself when on a boundary, else the next bucket start."""
    floor = time_floor_sql(ms, period, origin, tz, dialect)
    nxt = time_shift_sql(floor, period, "1", tz, dialect)
    return f"(CASE WHEN {floor} = {ms} THEN {ms} ELSE {nxt} END)"


_EXTRACT_UNITS = (
    "EPOCH", "MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "DOW", "ISODOW", "DOY",
    "WEEK", "MONTH", "QUARTER", "YEAR", "ISOYEAR", "DECADE", "CENTURY", "MILLENNIUM",
)  # fmt: skip


def time_extract_sql(ms: str, unit: str, tz: str | None = "UTC", dialect: str = "duckdb") -> str:
    """SQL for Druid's ``timestamp_extract(ms, unit, tz)`` (LONG; CENTURY/MILLENNIUM are DOUBLE)."""
    dialect = _check_dialect(dialect)
    u = unit.upper()
    if u not in _EXTRACT_UNITS:
        raise ExpressionError(f"timestamp_extract: unknown unit {unit!r}")
    if u == "EPOCH":
        return _idiv(ms, "1000", dialect)
    if u == "MICROSECOND":  # what Druid returns for MICROSECOND: epoch seconds / 1000
        return _idiv(_idiv(ms, "1000", dialect), "1000", dialect)
    if u == "MILLISECOND":
        return f"((({ms} % 1000) + 1000) % 1000)"
    t = millis_to_local_sql(ms, tz, dialect)
    spark_dow = f"((dayofweek({t}) + 5) % 7 + 1)"
    simple = {
        "SECOND": f"second({t})",
        "MINUTE": f"minute({t})",
        "HOUR": f"hour({t})",
        "DAY": f"dayofmonth({t})",
        "DOY": f"dayofyear({t})",
        "MONTH": f"month({t})",
        "QUARTER": f"quarter({t})",
        "YEAR": f"year({t})",
        "DECADE": _idiv(f"year({t})", "10", dialect),
        "DOW": spark_dow if dialect == "spark" else f"isodow({t})",
        "ISODOW": spark_dow if dialect == "spark" else f"isodow({t})",
        "WEEK": f"weekofyear({t})" if dialect == "spark" else f"week({t})",
        "ISOYEAR": f"year(date_add({t}, 4 - {spark_dow}))" if dialect == "spark" else f"isoyear({t})",
    }
    if u in simple:
        return f"CAST({simple[u]} AS BIGINT)"
    div = 100.0 if u == "CENTURY" else 1000.0
    return f"CAST(ceil(year({t}) / {div}) AS DOUBLE)"


def _offset_sql(ms: str, tz: str, colon: bool, z_for_zero: bool, dialect: str) -> str:
    if _is_utc(tz) or re.fullmatch(r"[+-]\d{1,2}(:?\d{2})?", tz):
        off = joda.format_millis(0, "ZZ" if colon else "Z", tz)
        if z_for_zero and off in ("+00:00", "+0000"):
            off = "Z"
        return string_literal(off, dialect)
    local = millis_to_local_sql(ms, tz, dialect)
    unix = f"unix_millis({local})" if dialect == "spark" else f"epoch_ms({local})"
    off = f"({unix} - {ms})"
    st = _str_type(dialect)
    hh = f"lpad(CAST({_idiv(f'abs({off})', '3600000', dialect)} AS {st}), 2, '0')"
    mm = f"lpad(CAST({_idiv(f'(abs({off}) % 3600000)', '60000', dialect)} AS {st}), 2, '0')"
    parts = [f"(CASE WHEN {off} < 0 THEN '-' ELSE '+' END)", hh] + (["':'"] if colon else []) + [mm]
    body = _concat(parts, dialect)
    if z_for_zero:
        return f"(CASE WHEN {off} = 0 THEN 'Z' ELSE {body} END)"
    return body


_SPARK_ISO = "yyyy-MM-dd'T'HH:mm:ss.SSS"


def time_format_sql(ms: str, pattern: str | None = None, tz: str | None = "UTC", dialect: str = "duckdb") -> str:
    """SQL for Druid's ``timestamp_format(ms, pattern, tz)`` / ``TIME_FORMAT`` with a Joda pattern.

    Without a pattern: ISO with millis, ``Z`` for UTC and ``±HH:MM`` otherwise (Druid's default).
    """
    dialect = _check_dialect(dialect)
    tz = _check_tz(tz)
    t = millis_to_local_sql(ms, tz, dialect)
    if pattern is None:
        body = (
            f"date_format({t}, {string_literal(_SPARK_ISO, dialect)})"
            if dialect == "spark"
            else f"strftime({t}, '%Y-%m-%dT%H:%M:%S.%g')"
        )
        return _concat([body, _offset_sql(ms, tz, True, True, dialect)], dialect)
    try:
        tokens = joda.tokenize(pattern)
    except ValueError as e:
        raise ExpressionError(f"timestamp_format: {e}") from e
    pieces: list[str] = []
    group: list[joda.Token] = []

    def flush() -> None:
        if not group:
            return
        sub = "".join(
            "'" + tk.text.replace("'", "''") + "'" if tk.is_literal else tk.letter * tk.count for tk in group
        )
        try:
            if dialect == "spark":
                pieces.append(f"date_format({t}, {string_literal(joda.joda_to_spark(sub), dialect)})")
            else:
                pieces.append(f"strftime({t}, {string_literal(joda.joda_to_strftime(sub), dialect)})")
        except ValueError as e:
            raise ExpressionError(f"timestamp_format: {e}") from e
        group.clear()

    for tk in tokens:
        if tk.letter == "Z" and tk.count <= 2:
            flush()
            pieces.append(_offset_sql(ms, tz, tk.count == 2, False, dialect))
        elif tk.letter == "Z" or (tk.letter == "z" and _is_utc(tz)):
            flush()
            pieces.append(string_literal("UTC" if _is_utc(tz) else tz, dialect))
        elif tk.letter == "z":
            raise ExpressionError("timestamp_format: zone names ('z') are only supported for UTC")
        elif tk.letter == "S" and dialect == "duckdb" and tk.count not in (3, 6, 9):
            flush()
            ms3 = f"strftime({t}, '%g')"
            pieces.append(f"left({ms3}, {tk.count})" if tk.count < 3 else f"({ms3} || '{'0' * (tk.count - 3)}')")
        else:
            group.append(tk)
    flush()
    return _concat(pieces, dialect) if pieces else "''"


def time_parse_sql(text: str, pattern: str | None = None, tz: str | None = "UTC", dialect: str = "duckdb") -> str:
    """SQL for Druid's ``timestamp_parse(text, pattern, tz)`` / ``TIME_PARSE``: epoch millis or NULL."""
    dialect = _check_dialect(dialect)
    tz = _check_tz(tz)
    if pattern is None:
        if dialect == "spark":
            return local_to_millis_sql(f"try_cast({text} AS TIMESTAMP)", tz, dialect)
        has_offset = (
            f"regexp_matches({text}, '[T ]\\d{{1,2}}(:\\d{{2}}(:\\d{{2}}(\\.\\d+)?)?)?\\s*(Z|[+-]\\d{{2}}(:?\\d{{2}})?)$')"
        )
        return (
            f"(CASE WHEN {has_offset} THEN epoch_ms(TRY_CAST({text} AS TIMESTAMPTZ)) "
            f"ELSE {local_to_millis_sql(f'TRY_CAST({text} AS TIMESTAMP)', tz, dialect)} END)"
        )
    try:
        tokens = joda.tokenize(pattern)
    except ValueError as e:
        raise ExpressionError(f"timestamp_parse: {e}") from e
    if any(tk.letter == "z" or (tk.letter == "Z" and tk.count > 2) for tk in tokens):
        raise ExpressionError("timestamp_parse: parsing zone names/ids is not supported")
    has_offset = any(tk.letter == "Z" for tk in tokens)
    try:
        if dialect == "spark":
            parsed = f"try_to_timestamp({text}, {string_literal(joda.joda_to_spark(pattern), dialect)})"
            return f"unix_millis({parsed})" if has_offset else local_to_millis_sql(parsed, tz, dialect)
        fmt = joda.joda_to_strftime(pattern)
    except ValueError as e:
        raise ExpressionError(f"timestamp_parse: {e}") from e
    if has_offset:
        return f"epoch_ms(try_strptime(regexp_replace({text}, 'Z$', '+00:00'), {string_literal(fmt, dialect)}))"
    return local_to_millis_sql(f"try_strptime({text}, {string_literal(fmt, dialect)})", tz, dialect)


# ---- the compiler ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Compiled:
    """A compiled expression: SQL text and its Druid type (``LONG``/``DOUBLE``/``STRING``/None)."""

    sql: str
    type: str | None
    bool_sql: str | None = None  # a SQL boolean form, when the expression is a predicate


def _operator_type(a: str | None, b: str | None) -> str | None:
    if a is None:
        return b
    if b is None:
        return a
    if a == "STRING" and b == "STRING":
        return "STRING"
    return "LONG" if a == "LONG" and b == "LONG" else "DOUBLE"


def _function_type(a: str | None, b: str | None) -> str | None:
    if a is None:
        return b
    if b is None:
        return a
    if "STRING" in (a, b):
        return "STRING"
    return "LONG" if a == "LONG" and b == "LONG" else "DOUBLE"


_SQL_TYPES = {"LONG": "BIGINT", "DOUBLE": "DOUBLE", "STRING": "VARCHAR"}


class _Compiler:
    def __init__(self, dialect: str, column_types: Mapping[str, str] | None) -> None:
        self.d = _check_dialect(dialect)
        self.types = {k: normalize_type(v) for k, v in (column_types or {}).items()}

    # -- helpers
    def sqltype(self, t: str) -> str:
        if t == "STRING":
            return _str_type(self.d)
        return _SQL_TYPES[t]

    def coerce(self, c: Compiled, to: str | None) -> str:
        if to is None or c.type == to or c.sql == "NULL":
            return c.sql
        if to == "STRING":
            return f"CAST({c.sql} AS {self.sqltype('STRING')})"
        if to == "LONG":
            return self.truncate_to_long(c.sql, from_string=c.type != "DOUBLE")
        if c.type == "LONG":
            return f"CAST({c.sql} AS DOUBLE)"
        return f"TRY_CAST({c.sql} AS DOUBLE)"

    def truncate_to_long(self, sql: str, from_string: bool = False) -> str:
        """Java's (long) cast: truncation toward zero (DuckDB's CAST rounds; Spark's truncates)."""
        if from_string:
            sql = f"TRY_CAST({sql} AS DOUBLE)"
        if self.d == "spark":
            return f"TRY_CAST({sql} AS BIGINT)"
        return f"TRY_CAST(trunc({sql}) AS BIGINT)"

    def num(self, c: Compiled) -> str:
        return self.coerce(c, "DOUBLE") if c.type == "STRING" else c.sql

    def string(self, c: Compiled) -> str:
        return self.coerce(c, "STRING") if c.type not in ("STRING", None) else c.sql

    def boolean(self, c: Compiled) -> str:
        if c.bool_sql is not None:
            return c.bool_sql
        if c.sql == "NULL":
            return "CAST(NULL AS BOOLEAN)"
        if c.type == "STRING":
            return f"(lower({c.sql}) = 'true')"
        return f"({c.sql} > 0)"

    def pred(self, b: str) -> Compiled:
        return Compiled(f"CAST({b} AS BIGINT)", "LONG", b)

    def lit_str(self, s: str) -> str:
        return string_literal(s, self.d)

    # -- nodes
    def compile(self, n: Expr) -> Compiled:
        if isinstance(n, Literal):
            return self.literal(n)
        if isinstance(n, Identifier):
            return self.identifier(n.name)
        if isinstance(n, Unary):
            arg = self.compile(n.arg)
            if n.op == "!":
                return self.pred(f"(NOT {self.boolean(arg)})")
            t = "DOUBLE" if arg.type == "STRING" else arg.type
            return Compiled(f"(- {self.num(arg)})", t)
        if isinstance(n, Binary):
            return self.binary(n)
        return self.call(n)

    def literal(self, n: Literal) -> Compiled:
        if n.value is None:
            return Compiled("NULL", None)
        if n.type == "STRING":
            assert isinstance(n.value, str)
            return Compiled(self.lit_str(n.value), "STRING")
        if n.type == "LONG":
            return Compiled(f"CAST({int(n.value)} AS BIGINT)", "LONG")
        v = float(n.value)  # type: ignore[arg-type]
        if math.isnan(v) or math.isinf(v):
            word = "NaN" if math.isnan(v) else ("-Infinity" if v < 0 else "Infinity")
            return Compiled(f"CAST('{word}' AS DOUBLE)", "DOUBLE")
        return Compiled(f"CAST({v!r} AS DOUBLE)", "DOUBLE")

    def identifier(self, name: str) -> Compiled:
        t = self.types.get(name)
        if name == "__time" and t is None:
            t = "TIMESTAMP"
        q = quote_identifier(name, self.d)
        if t == "TIMESTAMP":
            return Compiled(f"unix_millis({q})" if self.d == "spark" else f"epoch_ms({q})", "LONG")
        return Compiled(q, t)

    def binary(self, n: Binary) -> Compiled:
        a, b = self.compile(n.left), self.compile(n.right)
        op = n.op
        if op in ("&&", "||"):
            word = "AND" if op == "&&" else "OR"
            return self.pred(f"({self.boolean(a)} {word} {self.boolean(b)})")
        t = _operator_type(a.type, b.type)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            sop = {"==": "=", "!=": "<>"}.get(op, op)
            if t == "STRING" or (a.type in ("STRING", None) and b.type in ("STRING", None)):
                return self.pred(f"({a.sql} {sop} {b.sql})")
            return self.pred(f"({self.num(a)} {sop} {self.num(b)})")
        if op == "+" and t == "STRING":
            return Compiled(_concat([a.sql, b.sql], self.d), "STRING")
        if t == "STRING":
            t = "DOUBLE"
        x, y = self.num(a), self.num(b)
        if op == "^":
            out = f"power({x}, {y})"
            return Compiled(f"CAST({out} AS BIGINT)" if t == "LONG" else out, t or "DOUBLE")
        if op == "/":
            if t == "LONG":
                return Compiled(_idiv(x, f"NULLIF({y}, 0)", self.d), "LONG")
            if t == "DOUBLE":
                x = x if a.type == "DOUBLE" else f"CAST({x} AS DOUBLE)"
            return Compiled(f"({x} / NULLIF({y}, 0))", t)
        if op == "%":
            return Compiled(f"({x} % NULLIF({y}, 0))", t)
        return Compiled(f"({x} {op} {y})", t)

    # -- functions
    def call(self, n: Call) -> Compiled:
        fn = _FUNCTIONS.get(n.name)
        if fn is None:
            raise ExpressionError(f"unknown function '{n.name}'")
        lo, hi, impl = fn
        if not (lo <= len(n.args) <= hi):
            want = str(lo) if lo == hi else f"{lo}..{hi if hi < 99 else 'n'}"
            raise ExpressionError(f"function '{n.name}' needs {want} arguments, got {len(n.args)}")
        return impl(self, n.name, n.args)

    def const_str(self, fname: str, node: Expr, what: str) -> str | None:
        if isinstance(node, Literal) and (node.type == "STRING" or node.value is None):
            return node.value  # type: ignore[return-value]
        raise ExpressionError(f"function '{fname}': {what} must be a string literal")

    def const_int(self, fname: str, node: Expr, what: str) -> int:
        if isinstance(node, Literal) and node.type == "LONG":
            return int(node.value)  # type: ignore[arg-type]
        raise ExpressionError(f"function '{fname}': {what} must be a long literal")

    def millis(self, node: Expr) -> str:
        c = self.compile(node)
        return c.sql if c.type == "LONG" else self.coerce(c, "LONG")


Impl = Callable[[_Compiler, str, tuple[Expr, ...]], Compiled]
_FUNCTIONS: dict[str, tuple[int, int, Impl]] = {}


def _fn(name: str, lo: int, hi: int | None = None) -> Callable[[Impl], Impl]:
    def deco(f: Impl) -> Impl:
        for nm in name.split():
            _FUNCTIONS[nm] = (lo, lo if hi is None else hi, f)
        return f

    return deco


# string functions
@_fn("concat", 1, 999)
def _concat_fn(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    return Compiled(_concat([c.string(c.compile(a)) for a in args], c.d), "STRING")


@_fn("upper lower reverse", 1)
def _unary_str(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    return Compiled(f"{n}({c.string(c.compile(args[0]))})", "STRING")


@_fn("strlen", 1)
def _strlen(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    return Compiled(f"CAST(length({c.string(c.compile(args[0]))}) AS BIGINT)", "LONG")


@_fn("substring", 3)
def _substring(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    s = c.string(c.compile(args[0]))
    idx, ln = args[1], args[2]
    i_sql, l_sql = c.millis(idx), c.millis(ln)
    if isinstance(ln, Literal) and ln.type == "LONG":
        body = f"substr({s}, {i_sql} + 1, {l_sql})" if int(ln.value) >= 0 else f"substr({s}, {i_sql} + 1)"  # type: ignore[arg-type]
    else:
        body = f"(CASE WHEN {l_sql} >= 0 THEN substr({s}, {i_sql} + 1, {l_sql}) ELSE substr({s}, {i_sql} + 1) END)"
    # Druid (SQL-compatible mode): null when the index is past the end.
    return Compiled(f"(CASE WHEN {i_sql} < length({s}) THEN {body} END)", "STRING")


@_fn("left right", 2)
def _left_right(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    return Compiled(f"{n}({c.string(c.compile(args[0]))}, {c.millis(args[1])})", "STRING")


@_fn("replace", 3)
def _replace(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    s, a, b = (c.string(c.compile(x)) for x in args)
    return Compiled(f"replace({s}, {a}, {b})", "STRING")


@_fn("repeat", 2)
def _repeat(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    return Compiled(f"repeat({c.string(c.compile(args[0]))}, {c.millis(args[1])})", "STRING")


@_fn("trim ltrim rtrim", 1, 2)
def _trim(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    s = c.string(c.compile(args[0]))
    chars = c.string(c.compile(args[1])) if len(args) > 1 else "' '"
    if c.d == "spark":
        where = {"trim": "BOTH", "ltrim": "LEADING", "rtrim": "TRAILING"}[n]
        return Compiled(f"trim({where} {chars} FROM {s})", "STRING")
    return Compiled(f"{n}({s}, {chars})", "STRING")


@_fn("lpad rpad", 3)
def _pad(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    s, pad = c.string(c.compile(args[0])), c.string(c.compile(args[2]))
    return Compiled(f"{n}({s}, CAST({c.millis(args[1])} AS INTEGER), {pad})", "STRING")


@_fn("strpos", 2, 3)
def _strpos(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    h, nd = c.string(c.compile(args[0])), c.string(c.compile(args[1]))
    if len(args) == 2:
        if c.d == "spark":
            return Compiled(f"CAST(locate({nd}, {h}) - 1 AS BIGINT)", "LONG")
        return Compiled(f"CAST(strpos({h}, {nd}) - 1 AS BIGINT)", "LONG")
    f = c.millis(args[2])
    if c.d == "spark":
        return Compiled(f"CAST(locate({nd}, {h}, CAST({f} AS INT) + 1) - 1 AS BIGINT)", "LONG")
    pos = f"strpos(substr({h}, {f} + 1), {nd})"
    return Compiled(f"CAST(CASE WHEN {pos} = 0 THEN -1 ELSE {pos} + {f} - 1 END AS BIGINT)", "LONG")


@_fn("contains_string icontains_string", 2)
def _contains(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    s, sub = c.string(c.compile(args[0])), c.string(c.compile(args[1]))
    if n == "icontains_string":
        s, sub = f"lower({s})", f"lower({sub})"
    if c.d == "spark":
        return c.pred(f"(instr({s}, {sub}) > 0)")
    return c.pred(f"contains({s}, {sub})")


def _regex_match(c: _Compiler, s: str, p: str) -> str:
    return f"({s} RLIKE {p})" if c.d == "spark" else f"regexp_matches({s}, {p})"


@_fn("regexp_like", 2)
def _regexp_like(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    pat = c.const_str(n, args[1], "the pattern")
    s = c.string(c.compile(args[0]))
    return c.pred(_regex_match(c, s, c.lit_str(pat or "")))


@_fn("regexp_extract", 2, 3)
def _regexp_extract(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    pat = c.lit_str(c.const_str(n, args[1], "the pattern") or "")
    idx = c.const_int(n, args[2], "the group index") if len(args) > 2 else 0
    s = c.string(c.compile(args[0]))
    return Compiled(
        f"(CASE WHEN {_regex_match(c, s, pat)} THEN regexp_extract({s}, {pat}, {idx}) END)", "STRING"
    )


@_fn("like", 2, 3)
def _like(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    pat = c.const_str(n, args[1], "the pattern") or ""
    esc = c.const_str(n, args[2], "the escape") if len(args) > 2 else None
    s = c.string(c.compile(args[0]))
    tail = f" ESCAPE {c.lit_str(esc)}" if esc else ""
    return c.pred(f"({s} LIKE {c.lit_str(pat)}{tail})")


# null handling + conditionals
@_fn("nvl", 2)
def _nvl(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    a, b = c.compile(args[0]), c.compile(args[1])
    t = _function_type(a.type, b.type)
    return Compiled(f"coalesce({c.coerce(a, t)}, {c.coerce(b, t)})", t)


@_fn("isnull notnull", 1)
def _isnull(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    a = c.compile(args[0])
    return c.pred(f"({a.sql} IS {'NOT ' if n == 'notnull' else ''}NULL)")


def _case(c: _Compiler, whens: list[tuple[str, Expr]], default: Expr | None) -> Compiled:
    outs = [c.compile(v) for _, v in whens]
    dflt = c.compile(default) if default is not None else None
    t: str | None = None
    for o in outs + ([dflt] if dflt else []):
        t = _function_type(t, o.type)
    body = " ".join(f"WHEN {w} THEN {c.coerce(o, t)}" for (w, _), o in zip(whens, outs, strict=True))
    tail = f" ELSE {c.coerce(dflt, t)}" if dflt is not None else ""
    return Compiled(f"(CASE {body}{tail} END)", t)


@_fn("if", 3)
def _if(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    return _case(c, [(c.boolean(c.compile(args[0])), args[1])], args[2])


@_fn("case_searched", 2, 999)
def _case_searched(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    pairs = [(c.boolean(c.compile(args[i])), args[i + 1]) for i in range(0, len(args) - 1, 2)]
    return _case(c, pairs, args[-1] if len(args) % 2 else None)


@_fn("case_simple", 3, 999)
def _case_simple(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    subject = c.compile(args[0])
    rest = args[1:]
    pairs = []
    for i in range(0, len(rest) - 1, 2):
        v = c.compile(rest[i])
        t = _operator_type(subject.type, v.type)
        if t == "STRING" or subject.type is None or v.type is None:
            cond = f"({subject.sql} = {v.sql})"
        else:
            cond = f"({c.num(subject)} = {c.num(v)})"
        pairs.append((cond, rest[i + 1]))
    return _case(c, pairs, rest[-1] if len(rest) % 2 else None)


@_fn("cast", 2)
def _cast(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    target = (c.const_str(n, args[1], "the type") or "").upper()
    target = {"FLOAT": "DOUBLE", "BIGINT": "LONG", "VARCHAR": "STRING"}.get(target, target)
    if target not in ("LONG", "DOUBLE", "STRING"):
        raise ExpressionError(f"function 'cast': unsupported type {target!r}")
    a = c.compile(args[0])
    if a.type is None and a.sql != "NULL":
        if target == "STRING":
            return Compiled(f"CAST({a.sql} AS {c.sqltype('STRING')})", "STRING")
        a = Compiled(a.sql, "STRING" if target == "LONG" else "LONG")
        if target == "DOUBLE":
            return Compiled(f"TRY_CAST({a.sql} AS DOUBLE)", "DOUBLE")
    return Compiled(c.coerce(a, target), target)


# math
@_fn("abs", 1)
def _abs(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    a = c.compile(args[0])
    return Compiled(f"abs({c.num(a)})", "DOUBLE" if a.type in ("STRING", None) else a.type)


@_fn("ceil floor exp log log10 sqrt", 1)
def _double_fn(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    a = c.compile(args[0])
    x = c.coerce(a, "DOUBLE") if a.type != "DOUBLE" else a.sql
    name = {"log": "ln"}.get(n, n)
    return Compiled(f"{name}({x})", "DOUBLE")


@_fn("pow", 2)
def _pow(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    a, b = (c.compile(x) for x in args)
    return Compiled(f"power({c.coerce(a, 'DOUBLE')}, {c.coerce(b, 'DOUBLE')})", "DOUBLE")


@_fn("round", 1, 2)
def _round(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    a = c.compile(args[0])
    scale = c.const_int(n, args[1], "the scale") if len(args) > 1 else 0
    if a.type == "LONG":
        if scale >= 0:
            return a
        return Compiled(f"CAST(round({a.sql}, {scale}) AS BIGINT)", "LONG")
    return Compiled(f"round({c.coerce(a, 'DOUBLE')}, {scale})", "DOUBLE")


@_fn("greatest least max min", 1, 999)
def _greatest(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    cs = [c.compile(a) for a in args]
    t: str | None = None
    for x in cs:
        t = _function_type(t, x.type)
    name = {"max": "greatest", "min": "least"}.get(n, n)
    return Compiled(f"{name}({', '.join(c.coerce(x, t) for x in cs)})", t)


@_fn("div", 2)
def _div(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    a, b = (c.compile(x) for x in args)
    if a.type == "LONG" and b.type == "LONG":
        return Compiled(_idiv(a.sql, f"NULLIF({b.sql}, 0)", c.d), "LONG")
    x, y = c.coerce(a, "DOUBLE"), c.coerce(b, "DOUBLE")
    return Compiled(c.truncate_to_long(f"({x} / NULLIF({y}, 0))"), "LONG")


@_fn("parse_long", 1)
def _parse_long(c: _Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    return Compiled(f"TRY_CAST({c.string(c.compile(args[0]))} AS BIGINT)", "LONG")


# time
def _tz_arg(c: _Compiler, fname: str, args: tuple[Expr, ...], i: int) -> str:
    if len(args) <= i:
        return "UTC"
    return c.const_str(fname, args[i], "the time zone") or "UTC"


@_fn("timestamp timestamp_parse", 1, 3)
def _timestamp_parse(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    s = c.string(c.compile(args[0]))
    pattern = c.const_str(n, args[1], "the format") if len(args) > 1 else None
    return Compiled(time_parse_sql(s, pattern, _tz_arg(c, n, args, 2), c.d), "LONG")


@_fn("unix_timestamp", 1, 2)
def _unix_timestamp(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    ts = _timestamp_parse(c, n, args)
    return Compiled(_idiv(ts.sql, "1000", c.d), "LONG")


@_fn("timestamp_format", 1, 3)
def _timestamp_format(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    pattern = c.const_str(n, args[1], "the format") if len(args) > 1 else None
    return Compiled(time_format_sql(c.millis(args[0]), pattern, _tz_arg(c, n, args, 2), c.d), "STRING")


def _origin_arg(c: _Compiler, n: str, args: tuple[Expr, ...]) -> int | None:
    if len(args) <= 2:
        return None
    o = args[2]
    if isinstance(o, Literal) and o.value is None:
        return None
    if isinstance(o, Literal) and o.type == "LONG":
        return int(o.value)  # type: ignore[arg-type]
    if isinstance(o, Literal) and o.type == "STRING":
        try:
            return parse_instant(str(o.value))
        except TimeParseError as e:
            raise ExpressionError(f"function '{n}': bad origin {o.value!r}") from e
    raise ExpressionError(f"function '{n}': the origin must be a literal")


@_fn("timestamp_floor timestamp_ceil", 2, 4)
def _timestamp_floor(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    period = c.const_str(n, args[1], "the period") or ""
    f = time_floor_sql if n == "timestamp_floor" else time_ceil_sql
    return Compiled(f(c.millis(args[0]), period, _origin_arg(c, n, args), _tz_arg(c, n, args, 3), c.d), "LONG")


@_fn("timestamp_shift", 3, 4)
def _timestamp_shift(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    period = c.const_str(n, args[1], "the period") or ""
    step = c.millis(args[2])
    return Compiled(time_shift_sql(c.millis(args[0]), period, step, _tz_arg(c, n, args, 3), c.d), "LONG")


@_fn("timestamp_extract", 2, 3)
def _timestamp_extract(c: _Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    unit = (c.const_str(n, args[1], "the unit") or "").upper()
    sql = time_extract_sql(c.millis(args[0]), unit, _tz_arg(c, n, args, 2), c.d)
    return Compiled(sql, "DOUBLE" if unit in ("CENTURY", "MILLENNIUM") else "LONG")


# ---- entry points ----------------------------------------------------------------------------------


def compile_expression(
    expr: str | Expr, *, dialect: str = "duckdb", column_types: Mapping[str, str] | None = None
) -> Compiled:
    """Compile an expression (text or AST) to SQL plus its Druid output type."""
    node = parse_expression(expr) if isinstance(expr, str) else expr
    return _Compiler(dialect, column_types).compile(node)


def expression_to_sql(
    text: str, *, dialect: str = "duckdb", column_types: Mapping[str, str] | None = None
) -> str:
    """A Druid expression as a SQL expression for ``dialect`` (``duckdb`` or ``spark``).

    ``column_types`` maps column names to Druid/SQL types (``LONG``, ``DOUBLE``, ``STRING``,
    ``TIMESTAMP`` …); it decides e.g. whether ``+`` adds or concatenates and whether ``/`` is integer
    division. ``__time`` is a TIMESTAMP column unless ``column_types`` says otherwise.
    """
    return compile_expression(text, dialect=dialect, column_types=column_types).sql


def expression_to_predicate_sql(
    text: str, *, dialect: str = "duckdb", column_types: Mapping[str, str] | None = None
) -> str:
    """A Druid expression as a SQL boolean (Druid truthiness; NULL stays NULL)."""
    c = _Compiler(dialect, column_types)
    return c.boolean(c.compile(parse_expression(text)))


__all__ += ["expression_to_predicate_sql"]
