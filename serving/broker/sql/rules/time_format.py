"""TIME_FORMAT(ts[, pattern[, tz]]): Joda patterns. The ISO default and zone-free patterns in UTC
become DuckDB ``strftime``; zones and offsets go through the ``druid_time_format`` UDF."""

from __future__ import annotations

from sqlglot import exp

from radstack.time.joda import joda_to_strftime, tokenize
from radstack.time.sql import is_utc_zone
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.timeexpr import call, optional_string, str_or_null, to_millis
from serving.broker.sql.translation_context import TranslationContext


def time_format(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if anonymous_name(node) != "TIME_FORMAT":
        return node
    args = node.expressions
    if not 1 <= len(args) <= 3:
        raise validation_error("TIME_FORMAT takes 1 to 3 arguments")
    pattern = optional_string(args[1] if len(args) > 1 else None, "TIME_FORMAT pattern")
    tz = optional_string(args[2] if len(args) > 2 else None, "TIME_FORMAT time zone") or ctx.time_zone
    if is_utc_zone(tz):
        if pattern is None:
            return call("STRFTIME", args[0], exp.Literal.string("%Y-%m-%dT%H:%M:%S.%gZ"))
        try:
            if not any(t.letter in ("Z", "z") for t in tokenize(pattern)):
                return call("STRFTIME", args[0], exp.Literal.string(joda_to_strftime(pattern)))
        except ValueError:
            pass
    ctx.udfs.add("DRUID_TIME_FORMAT")
    return call("DRUID_TIME_FORMAT", to_millis(args[0]), str_or_null(pattern), str_or_null(tz))


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = time_format
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = ()
ACCEPTS = frozenset({"TIME_FORMAT"})
EMITS = frozenset({"EPOCH_MS", "STRFTIME", "TIMEZONE"})
