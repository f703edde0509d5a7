"""The implicit conversions Druid (Calcite) makes where DuckDB refuses or errors at run time:

* a comparison of a number with a string literal (``long_col = 'true'``, ``x IN ('1', 'a')``) compares
  with the literal read as a number, NULL when it is not one (Druid: no row matches; DuckDB: a
  conversion error for the whole query); text compared with a number — a literal or a number-typed
  expression (a join ``t1.c_long = t2.c`` on unnested strings) — is read as a number (a
  ``JSON_VALUE``'s ``true``/``false`` as 1/0);
* text compared with a DATE or TIMESTAMP (also in ``BETWEEN``) is read as one (TPC-H's text dates);
* ``LIKE`` on a number matches its text (``added LIKE '1%'``);
* ``SUM`` / ``AVG`` and numeric functions (``ATAN``, ``ABS``, ``ROUND`` …) of text read it as a number
  (``SUM(unnested_string)``): DOUBLE, NULL where the text is not a number;
* a TIMESTAMP collected into an array or a string (``ARRAY[__time]``, ``ARRAY_AGG(__time)``,
  ``STRING_AGG(__time, '|')``) is its epoch millis: Druid's arrays have no TIMESTAMP element.
"""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.context import TranslationContext
from serving.broker.sql.timeexpr import to_millis
from serving.broker.sql.type_rules import NUMERIC_FUNCTIONS, is_floating, is_integer, is_text, is_timestamp

_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_NUMERIC_AGGREGATES = (exp.Sum, exp.Avg)


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


def implicit_casts(node: exp.Expression, _ctx: TranslationContext) -> exp.Expression:
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
    if isinstance(node, exp.Like | exp.ILike) and _is_number(node.this):
        node.set("this", exp.cast(node.this, "VARCHAR"))
        return node
    if isinstance(node, _NUMERIC_AGGREGATES) and is_text(node.this):
        node.set("this", exp.TryCast(this=node.this, to=exp.DataType.build("DOUBLE")))
        return node
    if isinstance(node, NUMERIC_FUNCTIONS) and not isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
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
