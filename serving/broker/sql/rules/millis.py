"""MILLIS_TO_TIMESTAMP, TIMESTAMP_TO_MILLIS, and CURRENT_TIMESTAMP / CURRENT_DATE fixed at the query's
start (as Druid does, in ``sqlTimeZone``)."""

from __future__ import annotations

from sqlglot import exp

from radstack.time.granularity import Granularity
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.timeexpr import from_millis, to_millis, ts_literal
from serving.broker.sql.translation_context import TranslationContext


def millis(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    name = anonymous_name(node)
    if name in ("MILLIS_TO_TIMESTAMP", "TIMESTAMP_TO_MILLIS"):
        if len(node.expressions) != 1:
            raise validation_error(f"{name} takes 1 argument")
        arg = node.expressions[0]
        return from_millis(arg) if name == "MILLIS_TO_TIMESTAMP" else to_millis(arg)
    if isinstance(node, exp.CurrentTimestamp):
        return ts_literal(ctx.now_ms)
    if isinstance(node, exp.CurrentDate):
        day = Granularity.parse({"type": "period", "period": "P1D", "timeZone": ctx.time_zone})
        return exp.cast(ts_literal(day.bucket_start(ctx.now_ms)), exp.DataType.build("DATE"))
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = millis
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (exp.CurrentDate, exp.CurrentTimestamp)
ACCEPTS = frozenset({"MILLIS_TO_TIMESTAMP", "TIMESTAMP_TO_MILLIS"})
EMITS = frozenset({"EPOCH_MS"})
