"""The implicit conversions Druid (Calcite) makes where DuckDB refuses or errors at run time:

* a comparison of a number with a string literal (``long_col = 'true'``, ``x IN ('1', 'a')``) compares
  with the literal read as a number, NULL when it is not one (Druid: no row matches; DuckDB: a
  conversion error for the whole query); text compared with a number — a literal or a number-typed
  expression (a join ``t1.c_long = t2.c`` on unnested strings) — is read as a number (a
  ``JSON_VALUE``'s ``true``/``false`` as 1/0);
* text compared with a DATE or TIMESTAMP (also in ``BETWEEN``) is read as one (TPC-H's text dates);
* ``x IN ('a', 999)`` over text compares the text with ``'999'`` (a number in the list is its text);
* ``LIKE`` and the string functions (``CHARACTER_LENGTH``, ``UPPER``, ``LPAD`` …) on a number or a
  TIMESTAMP use its text (``added LIKE '1%'``, ``CHARACTER_LENGTH(unnested_long)``; a double as Java
  writes it, a TIMESTAMP as ``CAST(… AS VARCHAR)`` writes it);
* ``SUM`` / ``AVG`` and numeric functions (``ATAN``, ``ABS``, ``ROUND`` …) of text read it as a number
  (``SUM(unnested_string)``): DOUBLE, NULL where the text is not a number; ``BIT_AND`` / ``BIT_OR`` /
  ``BIT_XOR`` read it as a long;
* arithmetic with a text operand reads it as the other operand's number type (``c + c_long`` is a
  BIGINT, ``c - c`` over two texts a DOUBLE), as Calcite coerces it;
* a TIMESTAMP collected into an array or a string (``ARRAY[__time]``, ``ARRAY_AGG(__time)``,
  ``STRING_AGG(__time, '|')``) is its epoch millis: Druid's arrays have no TIMESTAMP element.
"""

from __future__ import annotations

from sqlglot import exp

from radstack.time.sql import is_utc_zone
from radstack.value_sql import numeric_cast_sql
from serving.broker.sql.rules import MULTI_VALUE_RESULTS, anonymous_name, sql_around
from serving.broker.sql.timeexpr import call, to_millis
from serving.broker.sql.translation_context import TranslationContext
from serving.broker.sql.type_rules import (
    NUMERIC_FUNCTIONS,
    is_floating,
    is_integer,
    is_text,
    is_timestamp,
)

_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_NUMERIC_AGGREGATES = (exp.Sum, exp.Avg)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)
#: string functions whose first operand (``this``) Druid converts to text when it is a number
_STRING_FUNCTIONS = (exp.Length, exp.Upper, exp.Lower, exp.Trim, exp.Substring, exp.Left, exp.Right, exp.Reverse,
                     exp.Repeat, exp.Pad, exp.Replace, exp.Initcap, exp.RegexpLike, exp.RegexpExtract,
                     exp.RegexpReplace)
#: Druid's string functions kept as anonymous calls, by name: the first argument converts
_STRING_NAMES = frozenset({"STRLEN", "BTRIM", "CONTAINS_STRING", "ICONTAINS_STRING"})
_BITWISE_AGGREGATES = frozenset({"BIT_AND", "BIT_OR", "BIT_XOR"})


#: functions whose result is a multi-value string made on the fly (Druid's SQL type VARCHAR)

def _list_valued(e: exp.Expression) -> bool:
    """A multi-value string made on the fly, which ``||`` writes into its text as Druid does (Java's
    ``[A, B]``; DuckDB's list text is the same) — not an ARRAY (Druid refuses: "Parameters must be of the
    same type") nor a multi-value column (its values map one by one)."""
    return anonymous_name(e) in MULTI_VALUE_RESULTS


def text_number(src: exp.Expression, integer: bool) -> exp.Expression:
    """Text → a number as Druid converts it: trimmed, NULL when it is not a number, a decimal truncated
    toward zero for an integer type (``CAST('1.9' AS BIGINT)`` is 1; DuckDB refuses both)."""
    if isinstance(src, exp.Literal) and src.is_string:
        return number_literal(str(src.this), integer)
    number = sql_around(lambda slot: numeric_cast_sql(slot, "string", "long" if integer else "double"), src)
    number.type = exp.DataType.build("BIGINT" if integer else "DOUBLE")  # for the typed rules after this one
    return number


def value_text(src: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    """A number or a TIMESTAMP as Druid writes it as text: a double as Java does (``2.434E8``; a decimal
    literal, and arithmetic on one, is a double in Druid: ``123.450`` is ``123.45``), an integer as digits,
    a TIMESTAMP as ``2000-01-02 03:04:05`` (in the session's ``sqlTimeZone``)."""
    if is_timestamp(src) and not is_utc_zone(ctx.time_zone):  # wall-clock time in the session's zone
        ctx.udfs.add("DRUID_TIME_FORMAT")
        text = call("DRUID_TIME_FORMAT", to_millis(src), exp.Literal.string("yyyy-MM-dd HH:mm:ss"),
                    exp.Literal.string(ctx.time_zone))
    elif is_timestamp(src):
        text = call("STRFTIME", src, exp.Literal.string("%Y-%m-%d %H:%M:%S"))
    elif not is_floating(src):
        text = exp.cast(src, "VARCHAR")
    else:
        udf = "DRUID_FLOAT_TEXT" if src.type.is_type(exp.DataType.Type.FLOAT) else "DRUID_DOUBLE_TEXT"
        ctx.udfs.add(udf)
        text = call(udf, exp.cast(src, "FLOAT" if udf == "DRUID_FLOAT_TEXT" else "DOUBLE"))
    text.type = exp.DataType.build("VARCHAR")
    return text


def _is_number(node: exp.Expression | None) -> bool:
    return is_integer(node) or is_floating(node)


def number_literal(text: str, integer: bool) -> exp.Expression:
    """A string literal read as Druid reads it as a number (trimmed; an integer target truncates a
    decimal), or a typed NULL."""
    s = text.strip()
    try:
        value = float(s)
    except ValueError:
        return exp.cast(exp.Null(), "BIGINT" if integer else "DOUBLE")
    finite = value == value and abs(value) != float("inf")
    if integer:
        if s.lstrip("+-").isdigit():
            return exp.Literal.number(int(s))
        return exp.Literal.number(int(value)) if finite else exp.cast(exp.Null(), "BIGINT")
    return exp.Literal.number(repr(value)) if finite else exp.cast(exp.Literal.string(s), "DOUBLE")


def _numeric_side(lit: exp.Expression, other: exp.Expression) -> exp.Expression | None:
    if isinstance(lit, exp.Literal) and lit.is_string and _is_number(other):
        return number_literal(str(lit.this), is_integer(other))
    return None


def _text_as_number(text: exp.Expression, number: exp.Expression) -> exp.Expression | None:
    """A text expression compared with a number — a literal or a typed number (``t1.c_long = t2.c`` with
    ``c`` unnested from strings) — read as a number, NULL when it is not one (Druid: no match; DuckDB:
    a conversion error for the whole query); a JSON_VALUE's ``true``/``false`` is 1/0, as Druid types a
    JSON boolean a long."""
    json_value = isinstance(text, exp.JSONValue) and not isinstance(text.args.get("returning"), exp.DataType)
    numeric = (isinstance(number, exp.Literal) and not number.is_string) or (
        _is_number(number) and not isinstance(number, exp.Literal))
    if not (numeric and (is_text(text) or json_value)):
        return None
    as_number = exp.TryCast(this=text.copy(), to=exp.DataType.build("DOUBLE"))
    if not json_value:
        return as_number
    lowered = exp.Lower(this=text.copy())
    return exp.Case(ifs=[exp.If(this=exp.EQ(this=lowered, expression=exp.Literal.string("true")), true=exp.Literal.number(1)),
                         exp.If(this=exp.EQ(this=lowered.copy(), expression=exp.Literal.string("false")),
                                true=exp.Literal.number(0))], default=as_number)


def _time_type(node: exp.Expression | None) -> exp.DataType | None:
    t = getattr(node, "type", None)
    if isinstance(t, exp.DataType) and (t.is_type(exp.DataType.Type.DATE) or is_timestamp(node)):
        return t
    return None


def _text_as_time(text: exp.Expression, other: exp.Expression) -> exp.Expression | None:
    """A text column compared with a DATE or TIMESTAMP (``o_orderdate >= DATE '1996-04-01'`` over TPC-H's
    text dates) is read as one, as Calcite casts it; NULL when it is not a date (TRY_CAST)."""
    to = _time_type(other)
    if to is None or not is_text(text) or isinstance(text, exp.Literal):
        return None
    return exp.TryCast(this=text.copy(), to=to.copy())


def _arithmetic(node: exp.Expression) -> exp.Expression:
    """``c + c_long`` with ``c`` text: ``c`` read as the other operand's type (two texts: DOUBLE)."""
    left, right = node.this, node.expression
    for key, side, other in (("this", left, right), ("expression", right, left)):
        if is_text(side) and (_is_number(other) or is_text(other)):
            node.set(key, text_number(side, integer=is_integer(other)))
    return node


def implicit_casts(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if isinstance(node, exp.Between) and is_text(node.this) and not isinstance(node.this, exp.Literal):
        bound = next((b for b in (node.args.get("low"), node.args.get("high")) if _time_type(b) is not None), None)
        if bound is not None:
            node.set("this", _text_as_time(node.this, bound))
        return node
    if isinstance(node, _COMPARISONS):
        left, right = node.this, node.expression
        # the first conversion that applies, in this order: a string literal on the right, on the left,
        # then text compared with a number, on the left, on the right, then text compared with a date
        for convert, side, other, key in ((_numeric_side, right, left, "expression"), (_numeric_side, left, right, "this"),
                                          (_text_as_number, left, right, "this"),
                                          (_text_as_number, right, left, "expression"),
                                          (_text_as_time, left, right, "this"),
                                          (_text_as_time, right, left, "expression")):
            new = convert(side, other)
            if new is not None:
                node.set(key, new)
                break
        return node
    if isinstance(node, exp.In) and _is_number(node.this):
        values = node.expressions
        if any(isinstance(v, exp.Literal) and v.is_string for v in values):
            node.set("expressions", [_numeric_side(v, node.this) or v for v in values])
        return node
    if isinstance(node, exp.In) and is_text(node.this):
        values = node.expressions
        if any(isinstance(v, exp.Literal) and not v.is_string for v in values):
            node.set("expressions", [exp.Literal.string(v.name) if isinstance(v, exp.Literal) and not v.is_string
                                     else v for v in values])
        return node
    if isinstance(node, (exp.Like, exp.ILike, *_STRING_FUNCTIONS)) and (_is_number(node.this) or is_timestamp(node.this)):
        node.set("this", value_text(node.this, ctx))
        return node
    if isinstance(node, exp.DPipe | exp.Concat):  # 'x' || 2.50 is 'x2.5': a number's text as Druid writes it
        parts = [node.this, node.expression] if isinstance(node, exp.DPipe) else [node.this, *node.expressions]
        for part in parts:
            if part is not None and is_floating(part):
                part.replace(value_text(part.copy(), ctx))
            elif part is not None and _list_valued(part):  # a list is written into the text: 'x[A, B]'
                part.replace(exp.cast(part.copy(), "VARCHAR"))
        return node
    if anonymous_name(node) in _STRING_NAMES and node.expressions and _is_number(node.expressions[0]):
        node.expressions[0].replace(value_text(node.expressions[0].copy(), ctx))
        return node
    if anonymous_name(node) in _BITWISE_AGGREGATES and node.expressions and is_text(node.expressions[0]):
        node.expressions[0].replace(text_number(node.expressions[0].copy(), integer=True))
        return node
    if isinstance(node, _ARITHMETIC):
        return _arithmetic(node)
    if isinstance(node, _NUMERIC_AGGREGATES) and is_text(node.this):
        node.set("this", exp.TryCast(this=node.this, to=exp.DataType.build("DOUBLE")))
        return node
    if isinstance(node, NUMERIC_FUNCTIONS):
        for key, value in list(node.args.items()):  # ATAN(unnested_text): the text read as a number
            if isinstance(value, exp.Expression) and is_text(value) and not (isinstance(value, exp.Literal)):
                node.set(key, exp.TryCast(this=value, to=exp.DataType.build("DOUBLE")))
        return node
    if isinstance(node, exp.Array) and any(is_timestamp(e) for e in node.expressions):
        node.set("expressions", [to_millis(e) if is_timestamp(e) else e for e in node.expressions])
        return node
    if isinstance(node, exp.ArrayAgg | exp.GroupConcat):
        inner = node.this.expressions[0] if isinstance(node.this, exp.Distinct) else node.this
        if is_timestamp(inner):
            inner.replace(to_millis(inner.copy()))
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
EMITS = frozenset({"DRUID_DOUBLE_TEXT", "DRUID_FLOAT_TEXT", "STRFTIME"})
EMITS_CLASSES = (exp.RegexpFullMatch, exp.Trunc, exp.Trim)  # radstack.value_sql.numeric_cast_sql
