"""Result types as Druid gives them (the rules of :mod:`serving.broker.sql.type_rules`), for functions
whose DuckDB translation would type them otherwise:

- lengths, positions and ``TIMESTAMPDIFF`` are ``INTEGER`` (Calcite), not DuckDB's ``BIGINT``;
- ``MOD(a, b)`` takes the type of ``b`` (``MOD(long_column, 3)`` is ``INTEGER``);
- ``CEIL``/``FLOOR`` of an integer is that integer (LONG), not DuckDB's DOUBLE;
- ``GREATEST``/``LEAST`` of integers is ``BIGINT``.
"""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.context import TranslationContext
from serving.broker.sql.function_reference import FUNCTIONS
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.type_rules import integer_arithmetic, is_integer

#: Druid functions whose SQL type is INTEGER, as anonymous calls and as the typed nodes sqlglot parses.
_INTEGER_NAMES = frozenset(f.name for f in FUNCTIONS.values() if f.returns == "INTEGER")
_INTEGER_NODES = (exp.Length, exp.StrPosition, exp.ArraySize)
_INT = exp.DataType.build("INTEGER")
_BIGINT = exp.DataType.build("BIGINT")


def result_types(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if isinstance(node, _INTEGER_NODES) or anonymous_name(node) in _INTEGER_NAMES:
        return exp.Cast(this=node.copy(), to=_INT.copy())
    if isinstance(node, exp.Mod) and is_integer(node.this) and is_integer(node.expression):
        to = node.expression.type.copy()  # type: ignore[union-attr]
        return exp.Cast(this=node.copy(), to=to)
    if isinstance(node, exp.Ceil | exp.Floor) and not node.args.get("to") and not node.args.get("decimals") \
            and is_integer(node.this):
        return exp.Cast(this=node.this.copy(), to=node.this.type.copy())  # type: ignore[union-attr]
    if isinstance(node, exp.Greatest | exp.Least) and integer_arithmetic(node.this, *node.expressions):
        return exp.Cast(this=node.copy(), to=_BIGINT.copy())
    return node
