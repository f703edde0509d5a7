"""``ARRAY_AGG(expr[, size])`` and ``STRING_AGG(expr, sep[, size])`` honour their size, as Druid's
``maxSizeBytes`` (default 1024): an aggregate whose accumulated array would serialize larger fails the
query with a 400 (Druid: "Unable to serialize …, size … is larger than max …"), instead of building a
value of any size. The serialized size is Druid's: 5 bytes of header, then 9 per number (NULL: 1) or 4
plus the UTF-8 length per string (STRING_AGG accumulates its values as strings).

The aggregate is wrapped where it ends: around its ``FILTER``/``OVER`` when it has one."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.dialect import MAX_SIZE_BYTES
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.timeexpr import call
from serving.broker.sql.translation_context import TranslationContext
from serving.broker.sql.type_rules import is_floating, is_integer

DEFAULT_MAX_SIZE_BYTES = 1024
_VAR = "__agg_v"


def _max_size(agg: exp.Expression) -> int:
    raw = agg.meta.get(MAX_SIZE_BYTES)
    if raw is None and isinstance(agg, exp.GroupConcat):
        raw = agg.args.get("on_overflow")
    if raw is None:
        return DEFAULT_MAX_SIZE_BYTES
    if isinstance(raw, exp.Literal) and not raw.is_string and str(raw.this).isdigit():
        return int(str(raw.this))
    name = "ARRAY_AGG" if isinstance(agg, exp.ArrayAgg) else "STRING_AGG"
    raise validation_error(f"The size of {name} must be a non-negative integer literal, got [{raw.sql()}]")


def _values(agg: exp.Expression) -> exp.Expression:
    inner = agg.this
    if isinstance(inner, exp.Order):
        inner = inner.this
    if isinstance(inner, exp.Distinct):
        inner = inner.expressions[0]
    return inner


def _estimate(result: exp.Expression, numeric: bool) -> exp.Expression:
    v = exp.to_identifier(_VAR)
    size = exp.Literal.number(9) if numeric else exp.Add(
        this=exp.Literal.number(4), expression=call("OCTET_LENGTH", call("ENCODE", exp.cast(exp.column(_VAR), "VARCHAR"))))
    per = exp.Case(ifs=[exp.If(this=exp.Is(this=exp.column(_VAR), expression=exp.Null()),
                               true=exp.Literal.number(1 if numeric else 4))], default=size)
    total = call("LIST_SUM", call("LIST_TRANSFORM", result, exp.Lambda(this=per, expressions=[v])))
    return exp.Add(this=exp.Literal.number(5), expression=call("COALESCE", total, exp.Literal.number(0)))


def _checked(whole: exp.Expression, agg: exp.Expression) -> exp.Expression:
    limit = _max_size(agg)
    values = _values(agg)
    numeric = isinstance(agg, exp.ArrayAgg) and (
        is_integer(values) or is_floating(values) or anonymous_name(values) == "EPOCH_MS"  # __time as millis
        or (isinstance(values, exp.Cast) and values.to.is_type(*exp.DataType.NUMERIC_TYPES)))
    as_list = whole.copy()
    if isinstance(agg, exp.GroupConcat):  # STRING_AGG: the same values, as strings, in a list beside it
        inner = as_list if isinstance(as_list, exp.GroupConcat) else as_list.find(exp.GroupConcat)
        assert inner is not None
        text = exp.cast(_values(inner).copy(), "VARCHAR")
        distinct = isinstance(inner.this, exp.Distinct) or (
            isinstance(inner.this, exp.Order) and isinstance(inner.this.this, exp.Distinct))
        listed = exp.ArrayAgg(this=exp.Distinct(expressions=[text]) if distinct else text)
        if as_list is inner:
            as_list = listed
        else:
            inner.replace(listed)
    size = _estimate(as_list, numeric)
    message = exp.DPipe(this=exp.DPipe(this=exp.Literal.string(
        f"Unable to serialize [{'ARRAY_AGG' if isinstance(agg, exp.ArrayAgg) else 'STRING_AGG'}], size ["), expression=exp.cast(size.copy(), "VARCHAR")),
        expression=exp.Literal.string(f"] is larger than max [{limit}]"))
    over = exp.GT(this=size, expression=exp.Literal.number(limit))
    return exp.Case(ifs=[exp.If(this=over, true=call("ERROR", message))], default=whole.copy())


def _aggregate_in(node: exp.Expression) -> exp.Expression | None:
    inner = node
    while isinstance(inner, exp.Filter | exp.Window):
        inner = inner.this
    return inner if isinstance(inner, exp.ArrayAgg | exp.GroupConcat) else None


def aggregate_sizes(node: exp.Expression, _ctx: TranslationContext) -> exp.Expression:
    agg = _aggregate_in(node)
    if agg is None or agg.meta.get("druid_size_checked"):
        return node
    if isinstance(node.parent, exp.Filter | exp.Window):
        return node  # wrapped where the FILTER/OVER ends
    agg.meta["druid_size_checked"] = True
    return _checked(node, agg)


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = aggregate_sizes
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (exp.ArrayAgg, exp.Filter, exp.GroupConcat)
EMITS = frozenset({"ERROR", "LIST_SUM", "LIST_TRANSFORM", "OCTET_LENGTH", "ENCODE", "COALESCE"})
EMITS_CLASSES = (exp.Lambda,)
