"""TIME_SHIFT(ts, period, step[, tz]) and TIMESTAMPADD(unit, count, ts): calendar-aware addition."""

from __future__ import annotations

from sqlglot import exp

from radstack.time.sql import is_utc_zone
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.timeexpr import (
    call,
    from_local,
    from_millis,
    interval,
    literal_string,
    optional_string,
    parse_period,
    str_or_null,
    to_local,
    to_millis,
    unit_interval,
)
from serving.broker.sql.translation_context import TranslationContext

UNITS = {"MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR"}


def time_unit(node: exp.Expression, fn: str) -> str:
    """A Calcite time unit written as a bare word (``HOUR``) or a string (``'HOUR'``)."""
    text = str(node.this if isinstance(node, exp.Literal) else node.name).upper()
    text = text.removeprefix("SQL_TSI_")
    if text not in UNITS:
        raise validation_error(f"Invalid time unit '{text}' for {fn}")
    return text


def _times(step: exp.Expression, iv: exp.Expression) -> exp.Expression:
    return exp.Mul(this=iv, expression=exp.cast(step, exp.DataType.build("BIGINT")))


def time_shift(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    name = anonymous_name(node)
    if name == "TIME_SHIFT":
        args = node.expressions
        if len(args) not in (3, 4):
            raise validation_error("TIME_SHIFT takes 3 or 4 arguments")
        ts, step = args[0], args[2]
        p = parse_period(literal_string(args[1], "TIME_SHIFT period"))
        tz = optional_string(args[3] if len(args) > 3 else None, "TIME_SHIFT time zone") or ctx.time_zone
        if is_utc_zone(tz):
            return exp.paren(exp.Add(this=ts, expression=_times(step, interval(p))), copy=False)
        if not (p.is_calendar or p.weeks or p.days):
            return exp.paren(exp.Add(this=ts, expression=_times(step, interval(p))), copy=False)
        local = exp.Add(this=to_local(ts, tz), expression=_times(step, interval(p)))
        if p.hours or p.minutes or p.millis:
            ctx.udfs.add("DRUID_TIME_SHIFT")
            return from_millis(call("DRUID_TIME_SHIFT", to_millis(ts), exp.Literal.string(p.iso()),
                                    exp.cast(step, exp.DataType.build("BIGINT")), str_or_null(tz)))
        return from_local(local, tz)
    if name == "TIMESTAMPADD":
        args = node.expressions
        if len(args) != 3:
            raise validation_error("TIMESTAMPADD takes 3 arguments")
        unit = time_unit(args[0], "TIMESTAMPADD")
        if unit == "MICROSECOND":
            iv = exp.Interval(this=exp.Literal.string("1 microseconds"))
        else:
            iv = unit_interval(unit)
        return exp.paren(exp.Add(this=args[2], expression=_times(args[1], iv)), copy=False)
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = time_shift
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = ()
ACCEPTS = frozenset({"TIME_SHIFT", "TIMESTAMPADD"})
EMITS = frozenset({"EPOCH_MS", "TIMEZONE"})
EMITS_CLASSES = (exp.Interval,)
