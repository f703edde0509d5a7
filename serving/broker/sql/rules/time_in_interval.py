"""TIME_IN_INTERVAL(ts, 'start/end'): start inclusive, end exclusive; the interval must be a literal. An
instant written without a zone is wall-clock time in the session's ``sqlTimeZone``, as Druid reads it."""

from __future__ import annotations

from datetime import datetime

from sqlglot import exp

from radstack.time.intervals import Interval, TimeParseError
from radstack.time.joda import zone
from radstack.time.sql import is_utc_zone
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.timeexpr import literal_string, ts_literal
from serving.broker.sql.translation_context import TranslationContext


def time_in_interval(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if anonymous_name(node) != "TIME_IN_INTERVAL":
        return node
    args = node.expressions
    if len(args) != 2:
        raise validation_error("TIME_IN_INTERVAL takes 2 arguments")
    text = literal_string(args[1], "TIME_IN_INTERVAL interval")
    try:
        iv = Interval.parse(text if is_utc_zone(ctx.time_zone) else _zoned(text, ctx.time_zone))
    except (TimeParseError, ValueError) as e:
        raise validation_error(f"Invalid interval '{text}' for TIME_IN_INTERVAL") from e
    ts = args[0]
    lower = exp.GTE(this=ts.copy(), expression=ts_literal(iv.start))
    upper = exp.LT(this=ts.copy(), expression=ts_literal(iv.end))
    return exp.paren(exp.And(this=lower, expression=upper), copy=False)


def _zoned(text: str, tz: str) -> str:
    """The interval with each instant that names no zone given the session zone's offset there."""
    sides = []
    for side in text.split("/"):
        try:
            local = datetime.fromisoformat(side.strip())
        except ValueError:
            sides.append(side)  # a period, or a zoned or odd form Interval.parse reads itself
            continue
        sides.append(local.replace(tzinfo=zone(tz)).isoformat() if local.tzinfo is None else side)
    return "/".join(sides)


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = time_in_interval
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = ()
ACCEPTS = frozenset({"TIME_IN_INTERVAL"})
