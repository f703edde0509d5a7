"""Result types as Druid gives them (the rules of :mod:`serving.broker.sql.type_rules`), for functions
whose DuckDB translation would type them otherwise:

- lengths, positions and ``TIMESTAMPDIFF`` are ``INTEGER`` (Calcite), not DuckDB's ``BIGINT``;
- ``MOD(a, b)`` takes the type of ``b`` (``MOD(long_column, 3)`` is ``INTEGER``);
- ``CEIL``/``FLOOR`` of an integer is that integer (LONG), not DuckDB's DOUBLE;
- ``GREATEST``/``LEAST`` of integers is ``BIGINT``, of floating values ``DOUBLE``; ``SUM`` of floating
  values is ``DOUBLE``;
- ``FLOOR``/``CEIL``/``TRUNCATE`` of DECIMALs (``added * 0.5``) stay ``DECIMAL`` (``SAFE_DIVIDE`` and
  ``ROUND``: rules/arithmetic.py).
"""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.function_reference import FUNCTIONS
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.translation_context import TranslationContext
from serving.broker.sql.type_rules import (
    DECIMAL_RESULT,
    integer_arithmetic,
    is_decimal,
    is_floating,
    is_integer,
)

#: Druid functions whose SQL type is INTEGER, as anonymous calls and as the typed nodes sqlglot parses.
_INTEGER_NAMES = frozenset(f.name for f in FUNCTIONS.values() if f.returns == "INTEGER")
_INTEGER_NODES = (exp.Length, exp.StrPosition, exp.ArraySize)
_INT = exp.DataType.build("INTEGER")
_BIGINT = exp.DataType.build("BIGINT")
_DOUBLE = exp.DataType.build("DOUBLE")


def result_types(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if isinstance(node, _INTEGER_NODES) or anonymous_name(node) in _INTEGER_NAMES:
        return exp.Cast(this=node.copy(), to=_INT.copy())
    if isinstance(node, exp.Mod) and is_integer(node.this) and is_integer(node.expression):
        to = node.expression.type.copy()  # type: ignore[union-attr]
        return exp.Cast(this=node.copy(), to=to)
    if isinstance(node, exp.Ceil | exp.Floor) and not node.args.get("to") and not node.args.get("decimals") \
            and is_integer(node.this):
        return exp.Cast(this=node.this.copy(), to=node.this.type.copy())  # type: ignore[union-attr]
    if isinstance(node, exp.Greatest | exp.Least):
        operands = [node.this, *node.expressions]
        if integer_arithmetic(*operands):
            return exp.Cast(this=node.copy(), to=_BIGINT.copy())
        if any(is_floating(o) for o in operands):
            return exp.Cast(this=node.copy(), to=_DOUBLE.copy())
    # DuckDB would keep a DECIMAL sum DECIMAL; the cast goes around SUM(…) FILTER (…) OVER (…) as a whole
    if isinstance(node, exp.Filter | exp.Window | exp.Sum) and not isinstance(node.parent, exp.Filter | exp.Window):
        inner = node
        while isinstance(inner, exp.Filter | exp.Window):
            inner = inner.this
        if isinstance(inner, exp.Sum) and is_floating(inner.this):
            return exp.Cast(this=node.copy(), to=_DOUBLE.copy())
    if isinstance(node, exp.Ceil | exp.Floor | exp.Trunc) and not node.args.get("to") and is_decimal(node.this):
        return exp.Cast(this=node.copy(), to=exp.DataType.build(DECIMAL_RESULT))
    return node
