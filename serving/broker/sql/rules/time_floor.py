"""TIME_FLOOR / TIME_CEIL (periods, origin, zone) and ``FLOOR|CEIL(ts TO unit)``.

UTC periods of one field whose size divides the next field (PT1H, PT5M, PT15M, P1D, P1W, P1M, P3M,
P1Y, …) become ``DATE_TRUNC`` / ``TIME_BUCKET``; zones use DuckDB's ICU conversion for one-unit periods;
everything else (origins, odd periods) calls the ``druid_time_floor`` UDF, which follows Druid's
PeriodGranularity through :mod:`radstack.time.granularity`.
"""

from __future__ import annotations

from sqlglot import exp

from radstack.time.intervals import Period, TimeParseError, parse_instant
from serving.broker.sql.context import TranslationContext
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.timeexpr import (
    call,
    from_local,
    from_millis,
    is_null,
    is_utc,
    literal_string,
    optional_string,
    parse_period,
    str_or_null,
    to_local,
    to_millis,
    unit_interval,
)

_UNIT_OF_PERIOD = {"P1Y": "year", "P3M": "quarter", "P1M": "month", "P1W": "week", "P1D": "day",
                   "PT1H": "hour", "PT1M": "minute", "PT1S": "second"}
_FLOOR_UNITS = {"MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR",
                "DECADE", "CENTURY", "MILLENNIUM"}


def _single_unit(p: Period) -> str | None:
    return _UNIT_OF_PERIOD.get(p.iso())


def _bucket_step(p: Period) -> str | None:
    """A DuckDB interval for one-field sub-day periods that tile their parent field (PT5M, PT6H)."""
    if p.is_calendar or p.weeks or p.days:
        return None
    fields = [(p.hours, 24, "hours"), (p.minutes, 60, "minutes")]
    nonzero = [f for f in fields if f[0]] + ([(p.millis, 60_000, "ms")] if p.millis else [])
    if len(nonzero) != 1:
        return None
    value, parent, unit = nonzero[0]
    if unit == "ms":
        if value % 1000 or 60 % (value // 1000):
            return None
        return f"{value // 1000} seconds"
    return f"{value} {unit}" if parent % value == 0 else None


def _floor(ts: exp.Expression, p: Period, unit: str | None) -> exp.Expression:
    if unit:
        return call("DATE_TRUNC", exp.Literal.string(unit), ts)
    step = _bucket_step(p)
    assert step is not None
    return call("TIME_BUCKET", exp.Interval(this=exp.Literal.string(step)), ts)


def _ceil_of(ts: exp.Expression, floored: exp.Expression, step: exp.Expression) -> exp.Expression:
    return exp.Case(ifs=[exp.If(this=exp.EQ(this=floored.copy(), expression=ts.copy()), true=ts.copy())],
                    default=exp.Add(this=floored, expression=step))


def _origin_ms(node: exp.Expression | None) -> int | None:
    if is_null(node):
        return None
    if isinstance(node, exp.Literal) and node.is_string:
        try:
            return parse_instant(str(node.this))
        except TimeParseError as e:
            raise validation_error(f"Invalid origin '{node.this}'") from e
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal):
        try:
            return parse_instant(str(node.this.this))
        except TimeParseError as e:
            raise validation_error(f"Invalid origin '{node.this.this}'") from e
    raise validation_error("TIME_FLOOR origin must be a literal timestamp")


def _time_floor(node: exp.Anonymous, ctx: TranslationContext, ceil: bool) -> exp.Expression:
    args = node.expressions
    fn = "TIME_CEIL" if ceil else "TIME_FLOOR"
    if len(args) < 2 or len(args) > 4:
        raise validation_error(f"{fn} takes 2 to 4 arguments")
    ts = args[0]
    period_text = literal_string(args[1], f"{fn} period")
    p = parse_period(period_text)
    origin = _origin_ms(args[2] if len(args) > 2 else None)
    tz = optional_string(args[3] if len(args) > 3 else None, f"{fn} time zone") or ctx.time_zone
    unit = _single_unit(p)
    if origin is None and (unit or (is_utc(tz) and _bucket_step(p))):
        local = ts if is_utc(tz) else to_local(ts, tz)
        floored = _floor(local, p, unit)
        if ceil:
            step = unit_interval(unit) if unit else exp.Interval(this=exp.Literal.string(_bucket_step(p)))
            floored = _ceil_of(local, floored, step)
        return floored if is_utc(tz) else from_local(floored, tz)
    name = "DRUID_TIME_CEIL" if ceil else "DRUID_TIME_FLOOR"
    ctx.udfs.add(name)
    origin_arg: exp.Expression = exp.Null() if origin is None else exp.Literal.number(origin)
    return from_millis(call(name, to_millis(ts), exp.Literal.string(p.iso()), origin_arg, str_or_null(tz)))


def _floor_to(node: exp.Floor | exp.Ceil, ctx: TranslationContext) -> exp.Expression:
    unit = str(node.args["to"].name).upper()
    if unit not in _FLOOR_UNITS:
        raise validation_error(f"Unsupported time unit {unit} in {'CEIL' if isinstance(node, exp.Ceil) else 'FLOOR'}")
    ts = node.this
    tz = ctx.time_zone
    local = ts if is_utc(tz) else to_local(ts, tz)
    floored = call("DATE_TRUNC", exp.Literal.string(unit.lower()), local)
    if isinstance(node, exp.Ceil):
        step = exp.Interval(this=exp.Literal.string({"MILLISECOND": "1 milliseconds", "DECADE": "10 years",
                                                     "CENTURY": "100 years", "MILLENNIUM": "1000 years"}
                                                    .get(unit, "")))
        if unit not in ("MILLISECOND", "DECADE", "CENTURY", "MILLENNIUM"):
            step = unit_interval(unit)
        floored = _ceil_of(local, floored, step)
    return floored if is_utc(tz) else from_local(floored, tz)


def time_floor(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    name = anonymous_name(node)
    if name == "TIME_FLOOR":
        return _time_floor(node, ctx, ceil=False)  # type: ignore[arg-type]
    if name == "TIME_CEIL":
        return _time_floor(node, ctx, ceil=True)  # type: ignore[arg-type]
    if isinstance(node, exp.Floor | exp.Ceil) and node.args.get("to") is not None:
        return _floor_to(node, ctx)
    return node
