"""Druid orders arrays element by element with a NULL element *before* any value (``[NULL, 2] < [1]``);
DuckDB puts NULL elements last. Where two ARRAY values are compared (``<``, ``<=``, ``>``, ``>=``,
``BETWEEN``) or an ARRAY is an ``ORDER BY`` key, each is compared through a list of
``{n: element IS NOT NULL, v: element}`` pairs, whose order is Druid's: a NULL element has ``n`` false and
sorts first, values compare by ``v``, and a shorter prefix still sorts first. Equality is unchanged (both
treat two NULL elements as equal). Reads the annotated types (run with the typed rules)."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.timeexpr import call
from serving.broker.sql.translation_context import TranslationContext

_ORDERING = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between)
_VAR = "__e"


def _is_array(node: exp.Expression | None) -> bool:
    t = getattr(node, "type", None)
    return t is not None and t.is_type(exp.DataType.Type.ARRAY)


def _order_key(node: exp.Expression) -> exp.Expression:
    element = exp.column(_VAR)
    pair = exp.Struct(expressions=[
        exp.PropertyEQ(this=exp.to_identifier("n"), expression=exp.Not(this=exp.Is(this=element.copy(),
                                                                                     expression=exp.Null()))),
        exp.PropertyEQ(this=exp.to_identifier("v"), expression=element.copy()),
    ])
    return call("LIST_TRANSFORM", node, exp.Lambda(this=pair, expressions=[exp.to_identifier(_VAR)]))


def array_order(node: exp.Expression, _ctx: TranslationContext) -> exp.Expression:
    if isinstance(node, _ORDERING):
        operands = [k for k, v in node.args.items() if isinstance(v, exp.Expression)]
        if all(_is_array(node.args[k]) or isinstance(node.args[k], exp.Null) for k in operands) \
                and any(_is_array(node.args[k]) for k in operands):
            for k in operands:
                if _is_array(node.args[k]):
                    node.set(k, _order_key(node.args[k]))
        return node
    if isinstance(node, exp.Ordered) and _is_array(node.this) and isinstance(node.parent, exp.Order) \
            and isinstance(node.parent.parent, exp.Select | exp.Window):
        node.set("this", _order_key(node.this))
    return node


EMITS = frozenset({"LIST_TRANSFORM"})
EMITS_CLASSES = (exp.Lambda, exp.Struct, exp.PropertyEQ)
