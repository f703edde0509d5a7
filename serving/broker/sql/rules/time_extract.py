"""TIME_EXTRACT(ts, unit[, tz]) and EXTRACT(unit FROM ts) with Druid's unit meanings (Joda fields:
DOW is ISO, 1 = Monday; EPOCH in seconds; MILLISECOND of the second; CENTURY/MILLENNIUM rounded up)."""

from __future__ import annotations

from sqlglot import exp

from radstack.time.sql import is_utc_zone
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.timeexpr import literal_string, optional_string, to_local, to_millis
from serving.broker.sql.translation_context import TranslationContext

_PLAIN = {"SECOND": "second", "MINUTE": "minute", "HOUR": "hour", "DAY": "day", "DOW": "isodow",
          "ISODOW": "isodow", "DOY": "doy", "WEEK": "week", "MONTH": "month", "QUARTER": "quarter",
          "YEAR": "year", "ISOYEAR": "isoyear"}
UNITS = set(_PLAIN) | {"EPOCH", "MICROSECOND", "MILLISECOND", "DECADE", "CENTURY", "MILLENNIUM"}


def _extract(part: str, ts: exp.Expression) -> exp.Expression:
    return exp.Extract(this=exp.var(part), expression=ts)


def _big(n: int) -> exp.Expression:
    return exp.Literal.number(n)


def extract_unit(ts: exp.Expression, unit: str, tz: str) -> exp.Expression:
    unit = unit.upper()
    if unit not in UNITS:
        raise validation_error(f"Invalid unit '{unit}' for TIME_EXTRACT")
    if unit in ("EPOCH", "MICROSECOND"):
        secs = exp.IntDiv(this=to_millis(ts), expression=_big(1000))
        return secs if unit == "EPOCH" else exp.IntDiv(this=secs, expression=_big(1000))
    local = ts if is_utc_zone(tz) else to_local(ts, tz)
    if unit in _PLAIN:
        return _extract(_PLAIN[unit], local)
    if unit == "MILLISECOND":
        return exp.Mod(this=_extract("millisecond", local), expression=_big(1000))
    year = _extract("year", local)
    if unit == "DECADE":
        return exp.IntDiv(this=year, expression=_big(10))
    div = 100.0 if unit == "CENTURY" else 1000.0
    return exp.Ceil(this=exp.Div(this=year, expression=exp.Literal.number(div)))


def time_extract(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if anonymous_name(node) == "TIME_EXTRACT":
        args = node.expressions
        if len(args) not in (2, 3):
            raise validation_error("TIME_EXTRACT takes 2 or 3 arguments")
        unit = literal_string(args[1], "TIME_EXTRACT unit")
        tz = optional_string(args[2] if len(args) > 2 else None, "TIME_EXTRACT time zone") or ctx.time_zone
        return exp.paren(extract_unit(args[0], unit, tz), copy=False)
    if isinstance(node, exp.Extract):
        unit = str(node.this.name).upper()
        result = extract_unit(node.expression, unit, ctx.time_zone)
        return result if isinstance(result, exp.Extract) else exp.paren(result, copy=False)
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = time_extract
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (exp.Extract,)
ACCEPTS = frozenset({"TIME_EXTRACT"})
EMITS = frozenset({"CEIL", "DRUID_TIME_EXTRACT", "EPOCH_MS", "FLOOR", "TIMEZONE"})
