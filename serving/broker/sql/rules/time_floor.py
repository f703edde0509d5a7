"""TIME_FLOOR / TIME_CEIL (periods, origin, zone) and ``FLOOR|CEIL(ts TO unit)``.

Rendered by :mod:`radstack.time.floor`, the one definition of a granularity floor shared with native
queries, the indexer and the Spark jobs; the few forms DuckDB SQL cannot say call the
``druid_time_floor`` UDF, which is :meth:`radstack.time.granularity.Granularity.bucket_start` itself.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from radstack.sql_text import ExpressionError
from radstack.time.floor import time_ceil_sql, timestamp_floor_sql
from radstack.time.granularity import Granularity
from radstack.time.intervals import TimeParseError, parse_instant
from radstack.time.sql import check_zone, is_utc_zone
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.timeexpr import (
    call,
    from_millis,
    is_null,
    literal_string,
    optional_string,
    parse_period,
    str_or_null,
    to_millis,
)
from serving.broker.sql.translation_context import TranslationContext
from serving.broker.sql.type_rules import is_timestamp

# FLOOR/CEIL(ts TO unit) is TIME_FLOOR/TIME_CEIL with the unit's period (MILLISECOND floors nothing).
_PERIOD_OF_UNIT = {"SECOND": "PT1S", "MINUTE": "PT1M", "HOUR": "PT1H", "DAY": "P1D", "WEEK": "P1W",
                   "MONTH": "P1M", "QUARTER": "P3M", "YEAR": "P1Y", "DECADE": "P10Y", "CENTURY": "P100Y",
                   "MILLENNIUM": "P1000Y"}
_ARG = "__rs_floor_arg"


def _render(ts: exp.Expression, period: str, origin: int | None, tz: str, ceil: bool,
            ctx: TranslationContext) -> exp.Expression:
    """``ts`` floored (or ceiled) as :mod:`radstack.time.floor` renders it; the ``DRUID_TIME_FLOOR``
    UDF (``Granularity.bucket_start`` itself) where DuckDB SQL cannot say it."""
    try:
        check_zone(tz)
    except ExpressionError as e:
        raise validation_error(f"Invalid time zone '{tz}'") from e
    try:
        if ceil:
            sql = f"epoch_ms(CAST({time_ceil_sql(f'epoch_ms({_ARG})', period, origin, tz)} AS BIGINT))"
        else:
            spec = {"type": "period", "period": period, "timeZone": tz, "origin": origin}
            sql = timestamp_floor_sql(Granularity.parse({k: v for k, v in spec.items() if v is not None}), _ARG)
    except ExpressionError:
        name = "DRUID_TIME_CEIL" if ceil else "DRUID_TIME_FLOOR"
        ctx.udfs.add(name)
        origin_arg: exp.Expression = exp.Null() if origin is None else exp.Literal.number(origin)
        return from_millis(call(name, to_millis(ts), exp.Literal.string(period), origin_arg, str_or_null(tz)))
    tree = sqlglot.parse_one(sql, read="duckdb")
    for col in list(tree.find_all(exp.Column)):
        if col.name == _ARG:
            col.replace(ts.copy())
    return tree


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
    period = parse_period(literal_string(args[1], f"{fn} period")).iso()
    origin = _origin_ms(args[2] if len(args) > 2 else None)
    tz = optional_string(args[3] if len(args) > 3 else None, f"{fn} time zone") or ctx.time_zone or "UTC"
    return _render(args[0], period, origin, tz, ceil, ctx)


def _floor_to(node: exp.Floor | exp.Ceil, ctx: TranslationContext) -> exp.Expression:
    unit = str(node.args["to"].name).upper()
    ceil = isinstance(node, exp.Ceil)
    if unit == "MILLISECOND":
        return node.this
    if unit not in _PERIOD_OF_UNIT:
        raise validation_error(f"Unsupported time unit {unit} in {'CEIL' if ceil else 'FLOOR'}")
    return _render(node.this, _PERIOD_OF_UNIT[unit], None, ctx.time_zone or "UTC", ceil, ctx)


def time_floor(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    name = anonymous_name(node)
    if name == "TIME_FLOOR":
        return _time_floor(node, ctx, ceil=False)  # type: ignore[arg-type]
    if name == "TIME_CEIL":
        return _time_floor(node, ctx, ceil=True)  # type: ignore[arg-type]
    if isinstance(node, exp.Floor | exp.Ceil) and node.args.get("to") is not None:
        return _floor_to(node, ctx)
    if isinstance(node, exp.DateTrunc | exp.TimestampTrunc) and not is_utc_zone(ctx.time_zone):
        # DATE_TRUNC in the session's sqlTimeZone, as Druid truncates (DuckDB's own is UTC)
        unit = str(node.args["unit"].name).upper()
        if unit in _PERIOD_OF_UNIT:
            return _render(node.this, _PERIOD_OF_UNIT[unit], None, ctx.time_zone, False, ctx)
    if isinstance(node, exp.Cast) and node.to.is_type(exp.DataType.Type.DATE) and is_timestamp(node.this) \
            and not is_utc_zone(ctx.time_zone):
        # a TIMESTAMP as a DATE is its day in the session's sqlTimeZone (Druid's DATE is that day's start)
        return _render(node.this, "P1D", None, ctx.time_zone, False, ctx)
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = time_floor
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (exp.Cast, exp.Ceil, exp.DateTrunc, exp.TimestampTrunc, exp.Floor)
ACCEPTS = frozenset({"TIME_FLOOR", "TIME_CEIL"})
EMITS = frozenset({"DATE_TRUNC", "EPOCH_MS", "MAKE_TIMESTAMP", "TIMEZONE", "TIME_BUCKET", "TO_MONTHS"})
EMITS_CLASSES = (exp.UnixToTime, exp.DateBin, exp.ToDays, exp.Year, exp.Month, exp.Interval,)
