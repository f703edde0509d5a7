"""Small builders for DuckDB time expressions used by the rewrite rules."""

from __future__ import annotations

from sqlglot import exp

from radstack.time.intervals import Period, TimeParseError, format_instant
from serving.broker.sql.errors import validation_error


def call(name: str, *args: exp.Expression) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=list(args))


def ts_literal(ms: int) -> exp.Expression:
    """A TIMESTAMP constant for epoch millis ``ms``."""
    text = format_instant(ms).replace("T", " ").rstrip("Z")
    return exp.cast(exp.Literal.string(text), exp.DataType.build("TIMESTAMP"))


def to_millis(ts: exp.Expression) -> exp.Expression:
    return call("EPOCH_MS", ts)


def from_millis(ms: exp.Expression) -> exp.Expression:
    return call("EPOCH_MS", exp.cast(ms, exp.DataType.build("BIGINT")))


def is_null(node: exp.Expression | None) -> bool:
    return node is None or isinstance(node, exp.Null)


def literal_string(node: exp.Expression | None, what: str) -> str:
    """The value of a string literal argument (Druid requires literals for periods, patterns, zones)."""
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    raise validation_error(f"{what} must be a string literal")


def optional_string(node: exp.Expression | None, what: str) -> str | None:
    return None if is_null(node) else literal_string(node, what)


def parse_period(text: str) -> Period:
    try:
        return Period.parse(text)
    except TimeParseError as e:
        raise validation_error(f"Invalid period '{text}': {e}") from e


def interval(period: Period) -> exp.Expression:
    """A DuckDB INTERVAL equal to ``period`` (weeks as 7 days)."""
    parts = []
    for value, unit in ((period.years, "years"), (period.months, "months"),
                        (period.weeks * 7 + period.days, "days"), (period.hours, "hours"),
                        (period.minutes, "minutes")):
        if value:
            parts.append(f"{value} {unit}")
    if period.millis:
        parts.append(f"{period.millis} milliseconds")
    return exp.Interval(this=exp.Literal.string(" ".join(parts) or "0 seconds"))


def unit_interval(unit: str, count: int = 1) -> exp.Expression:
    unit = unit.lower()
    if unit == "quarter":
        unit, count = "month", count * 3
    if unit == "week":
        unit, count = "day", count * 7
    return exp.Interval(this=exp.Literal.string(f"{count} {unit}s"))


def to_local(ts: exp.Expression, tz: str) -> exp.Expression:
    """UTC TIMESTAMP → wall-clock TIMESTAMP in ``tz``."""
    return call("TIMEZONE", exp.Literal.string(tz), call("TIMEZONE", exp.Literal.string("UTC"), ts))


def from_local(ts: exp.Expression, tz: str) -> exp.Expression:
    """Wall-clock TIMESTAMP in ``tz`` → UTC TIMESTAMP."""
    return call("TIMEZONE", exp.Literal.string("UTC"), call("TIMEZONE", exp.Literal.string(tz), ts))


def str_or_null(value: str | None) -> exp.Expression:
    return exp.Null() if value is None else exp.Literal.string(value)
