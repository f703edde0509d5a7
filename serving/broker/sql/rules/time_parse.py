"""TIME_PARSE(str[, pattern[, tz]]) → TIMESTAMP, NULL when the text does not parse. Literal arguments
are folded at translation time (Superset sends ``TIME_PARSE('2020-01-01T00:00:00')``); other calls use
the ``druid_time_parse`` UDF (Joda patterns, ISO by default, via :mod:`radstack.time.joda`)."""

from __future__ import annotations

from sqlglot import exp

from radstack.time.joda import parse_to_millis
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.timeexpr import call, from_millis, optional_string, str_or_null, ts_literal
from serving.broker.sql.translation_context import TranslationContext


def time_parse(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if anonymous_name(node) != "TIME_PARSE":
        return node
    args = node.expressions
    if not 1 <= len(args) <= 3:
        raise validation_error("TIME_PARSE takes 1 to 3 arguments")
    pattern = optional_string(args[1] if len(args) > 1 else None, "TIME_PARSE pattern")
    tz = optional_string(args[2] if len(args) > 2 else None, "TIME_PARSE time zone") or ctx.time_zone
    text = args[0]
    if isinstance(text, exp.Literal) and text.is_string:
        try:
            ms = parse_to_millis(str(text.this), pattern, tz)
        except ValueError as e:
            raise validation_error(f"Invalid TIME_PARSE pattern '{pattern}': {e}") from e
        return exp.cast(exp.Null(), exp.DataType.build("TIMESTAMP")) if ms is None else ts_literal(ms)
    if isinstance(text, exp.Null):
        return exp.cast(exp.Null(), exp.DataType.build("TIMESTAMP"))
    ctx.udfs.add("DRUID_TIME_PARSE")
    return from_millis(call("DRUID_TIME_PARSE", exp.cast(text, exp.DataType.build("VARCHAR")),
                            str_or_null(pattern), str_or_null(tz)))


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = time_parse
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = ()
ACCEPTS = frozenset({"TIME_PARSE"})
EMITS = frozenset({"EPOCH_MS", "REGEXP_MATCHES", "TIMEZONE", "TRY_STRPTIME"})
