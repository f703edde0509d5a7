"""Integer arithmetic as in Druid (Calcite), by the rules of :mod:`serving.broker.sql.type_rules`:
``BIGINT / BIGINT`` truncates (DuckDB's ``//``), arithmetic typed DECIMAL is computed in doubles as Druid
does (and typed DECIMAL), ``DIV(a, b)`` is integer division, and
``SAFE_DIVIDE`` over two LONGs is a LONG (NULL when the divisor is 0; over DOUBLEs 0 / 0 is 0); ``ROUND``
of a DOUBLE rounds its decimal text half up, as Java's ``BigDecimal`` does."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.translation_context import TranslationContext
from serving.broker.sql.type_rules import (
    DECIMAL_ARITHMETIC,
    DECIMAL_RESULT,
    decimal_operands,
    integer_arithmetic,
    is_decimal,
    is_floating,
    is_timestamp,
)

#: Calcite's forms for '+' and '-' (a timestamp takes an interval, never another timestamp)
_DATETIME_FORMS = {
    "-": ["'<NUMERIC> - <NUMERIC>'", "'<DATETIME_INTERVAL> - <DATETIME_INTERVAL>'", "'<DATETIME> - <DATETIME_INTERVAL>'"],
    "+": ["'<NUMERIC> + <NUMERIC>'", "'<DATETIME_INTERVAL> + <DATETIME_INTERVAL>'", "'<DATETIME> + <DATETIME_INTERVAL>'",
          "'<DATETIME_INTERVAL> + <DATETIME>'"],
    "*": ["'<NUMERIC> * <NUMERIC>'", "'<DATETIME_INTERVAL> * <NUMERIC>'", "'<NUMERIC> * <DATETIME_INTERVAL>'"],
    "/": ["'<NUMERIC> / <NUMERIC>'", "'<DATETIME_INTERVAL> / <NUMERIC>'"],
}
_OPERATORS = {exp.Sub: "-", exp.Add: "+", exp.Mul: "*", exp.Div: "/"}


def arithmetic(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div) and is_timestamp(node.this) \
            and is_timestamp(node.expression):
        # Calcite refuses arithmetic between two timestamps (TIMESTAMPDIFF counts between them)
        op = _OPERATORS[type(node)]
        kinds = [f"<{'DATE' if t.type.this == exp.DataType.Type.DATE else 'TIMESTAMP(3)'}>"
                 for t in (node.this, node.expression)]
        raise validation_error(f"Cannot apply '{op}' to arguments of type '{kinds[0]} {op} {kinds[1]}'. "
                               f"Supported form(s): " + "\n".join(_DATETIME_FORMS[op]))
    if isinstance(node, exp.Div) and integer_arithmetic(node.this, node.expression):
        return exp.IntDiv(this=node.this, expression=node.expression)
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div) and decimal_operands(node.this, node.expression):
        return _decimal_as_double(node)
    if isinstance(node, exp.SafeDivide):
        x, y = exp.paren(node.this.copy(), copy=False), exp.paren(node.expression.copy(), copy=False)
        zero = exp.EQ(this=y.copy(), expression=exp.Literal.number(0))
        if integer_arithmetic(node.this, node.expression):
            quotient = exp.IntDiv(this=x, expression=y)
            return exp.paren(exp.Case(ifs=[exp.If(this=zero, true=exp.null())], default=quotient), copy=False)
        # floating: 0 / 0 is 0 in Druid, anything else over 0 NULL
        both = exp.and_(zero.copy(), exp.EQ(this=x.copy(), expression=exp.Literal.number(0)))
        quotient = exp.Div(this=x, expression=y)
        safe = exp.Case(ifs=[exp.If(this=both, true=exp.cast(exp.Literal.number(0), "DOUBLE")),
                             exp.If(this=zero, true=exp.null())], default=quotient)
        if decimal_operands(node.this, node.expression):  # DECIMAL in, DECIMAL out (Calcite)
            return exp.cast(safe, DECIMAL_RESULT)
        return exp.paren(safe, copy=False)
    if isinstance(node, exp.Round) and is_floating(node.this):
        return _round_half_up(node)
    if anonymous_name(node) == "DIV":
        if len(node.expressions) != 2:
            raise validation_error("DIV takes 2 arguments")
        a, b = node.expressions
        return exp.paren(exp.IntDiv(this=a, expression=b), copy=False)
    return node


def _decimal_as_double(node: exp.Binary) -> exp.Expression:
    """Arithmetic Calcite types DECIMAL (decimal literals and integers) computed as Druid computes it, in
    doubles (``0.1 + 0.2`` is 0.30000000000000004, not DuckDB's exact 0.3), and typed DECIMAL again."""
    as_double = node.__class__(this=exp.cast(exp.paren(node.this.copy(), copy=False), "DOUBLE"),
                               expression=exp.cast(exp.paren(node.expression.copy(), copy=False), "DOUBLE"))
    out = decimal_of_double(as_double)
    out.meta[DECIMAL_ARITHMETIC] = True  # still DECIMAL for the rules of its parents (CEIL, ROUND …)
    return out


def decimal_of_double(x: exp.Expression) -> exp.Expression:
    """A double as a DECIMAL result that writes the same double: through its shortest text where that
    fits the scale (DuckDB's DOUBLE → DECIMAL cast is off in the last digits: 3.3000000000000003 would
    come back 3.3000000000000007), else the plain cast."""
    x = exp.paren(x, copy=False)
    fits = exp.and_(exp.LT(this=exp.Abs(this=x.copy()), expression=exp.Literal.number("1e19")),
                    exp.or_(exp.EQ(this=x.copy(), expression=exp.Literal.number(0)),
                            exp.GTE(this=exp.Abs(this=x.copy()), expression=exp.Literal.number("1e-3"))))
    via_text = exp.cast(exp.cast(x.copy(), "VARCHAR"), DECIMAL_RESULT)
    return exp.Case(ifs=[exp.If(this=fits, true=via_text)], default=exp.cast(x.copy(), DECIMAL_RESULT))


def _round_half_up(node: exp.Round) -> exp.Expression:
    """``ROUND(double, n)`` as Druid computes it: ``BigDecimal.valueOf(x).setScale(n, HALF_UP)``, i.e. the
    double's shortest decimal text rounded half away from zero (``ROUND(0.15, 1)`` is 0.2; DuckDB rounds the
    binary value, 0.1499…, to 0.1). Values beyond DECIMAL(38, 18) (and NaN, ±Infinity) round as DuckDB does."""
    digits = node.args.get("decimals") or exp.Literal.number(0)
    text = exp.cast(node.this.copy(), "VARCHAR")
    exact = exp.TryCast(this=text, to=exp.DataType.build("DECIMAL(38, 18)"))
    rounded = exp.Round(this=exact, decimals=digits.copy())
    fallback = exp.Round(this=node.this.copy(), decimals=digits.copy())
    target = DECIMAL_RESULT if is_decimal(node.this) else "DOUBLE"  # Calcite: ROUND(DECIMAL) is DECIMAL
    return exp.cast(exp.Coalesce(this=exp.cast(rounded, target), expressions=[fallback]), target)


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
ACCEPTS = frozenset({"DIV"})
