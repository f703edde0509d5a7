"""EARLIEST/LATEST(expr[, maxBytes]) by ``__time`` and EARLIEST_BY/LATEST_BY(expr, ts[, maxBytes]):
DuckDB's ``arg_min_null``/``arg_max_null`` (a NULL value at that time is the answer, as in Druid); ``maxBytes`` truncates strings to that many UTF-8 bytes (never splitting a character) and
is ignored for a number, as in Druid (``EARLIEST(c_long, 100)`` is a BIGINT). Of an ARRAY, Druid answers
the VARCHAR Java writes for a list (``[1, 2, null]``); of a multi-value string, one value as itself and
several as that list text."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name, joined_elements
from serving.broker.sql.rules.arrays import is_multi_value_column
from serving.broker.sql.timeexpr import call
from serving.broker.sql.translation_context import TranslationContext
from serving.broker.sql.type_rules import is_floating, is_integer


def earliest_latest(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    name = anonymous_name(node)
    if name not in ("EARLIEST", "LATEST", "EARLIEST_BY", "LATEST_BY"):
        return node
    args = list(node.expressions)
    by = name.endswith("_BY")
    if by:
        if len(args) not in (2, 3):
            raise validation_error(f"{name} takes 2 or 3 arguments")
        value, ts, max_bytes = args[0], args[1], args[2] if len(args) > 2 else None
    else:
        if len(args) not in (1, 2):
            raise validation_error(f"{name} takes 1 or 2 arguments")
        value, ts, max_bytes = args[0], exp.column("__time", quoted=True), args[1] if len(args) > 1 else None
    # the _NULL forms keep a NULL value at the earliest/latest time (Druid answers it; ARG_MAX skips it)
    fn = "ARG_MIN_NULL" if name.startswith("EARLIEST") else "ARG_MAX_NULL"
    if isinstance(value.type, exp.DataType) and value.type.is_type(exp.DataType.Type.ARRAY):
        value = _java_list_text(value)
    elif is_multi_value_column(value, ctx):  # one value as itself, several as Java's list text, as Druid
        size = call("LEN", value.copy())
        one = exp.EQ(this=size, expression=exp.Literal.number(1))
        several = exp.GT(this=size.copy(), expression=exp.Literal.number(1))
        value = exp.Case(ifs=[exp.If(this=one, true=exp.Bracket(this=value.copy(), expressions=[exp.Literal.number(1)])),
                              exp.If(this=several, true=_java_list_text(value))], default=exp.cast(exp.null(), "VARCHAR"))
    out: exp.Expression = call(fn, value, ts)
    if max_bytes is not None:
        if not (isinstance(max_bytes, exp.Literal) and not max_bytes.is_string):
            raise validation_error(f"{name} maxBytes must be a numeric literal")
        if not (is_integer(value) or is_floating(value)):  # cut to maxBytes of UTF-8, as Druid stores it
            ctx.udfs.add("DRUID_CHOP_BYTES")
            out = call("DRUID_CHOP_BYTES", out, max_bytes)
    return out


def _java_list_text(array: exp.Expression) -> exp.Expression:
    """``[1, 2, null]``: the elements' text joined by ``", "`` in brackets, NULL when the array is."""
    joined = joined_elements(array, exp.Literal.string(", "))
    return exp.DPipe(this=exp.DPipe(this=exp.Literal.string("["), expression=joined), expression=exp.Literal.string("]"))


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = earliest_latest
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = ()
ACCEPTS = frozenset({"EARLIEST", "LATEST", "EARLIEST_BY", "LATEST_BY"})
EMITS = frozenset({"ARG_MAX_NULL", "ARG_MIN_NULL", "DRUID_CHOP_BYTES", "ARRAY_TO_STRING", "LIST_TRANSFORM"})
EMITS_CLASSES = (exp.Lambda, exp.DPipe)
