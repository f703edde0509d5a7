"""``ARRAY_QUANTILE(array, rank)``: the quantile of an array's numbers as Druid computes it — NULL elements
left out, the rest sorted, interpolated linearly at ``rank × (n − 1)`` (``lower + (index − ⌊index⌋) ×
(upper − lower)``, in doubles); NULL for an array without numbers, a NULL array or an array of strings.
The rank must be a literal (Druid's 400), and one outside [0, 1] is refused (Druid's NaN is no value
of a DOUBLE column)."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name, call_args, sql_around
from serving.broker.sql.rules.arrays import element_kind
from serving.broker.sql.translation_context import TranslationContext

_NAME = "ARRAY_QUANTILE"


def array_quantile(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if anonymous_name(node) != _NAME:
        return node
    array, rank = call_args(node, (2,), _NAME)
    literal = rank.this if isinstance(rank, exp.Neg) else rank
    if not (isinstance(literal, exp.Literal) and not literal.is_string):
        raise validation_error(f"Argument to function '{_NAME}' must be a literal")
    r = -float(literal.this) if isinstance(rank, exp.Neg) else float(literal.this)
    if not 0 <= r <= 1:
        raise validation_error(f"{_NAME} rank [{r}] is outside [0, 1]: the quantile is NaN, which is not a DOUBLE value")
    if element_kind(array) == "STRING":
        return exp.cast(exp.null(), "DOUBLE")

    def quantile(a: str) -> str:
        i = f"(CAST({r!r} AS DOUBLE) * (len(s) - 1))"  # s: the sorted numbers, bound by the outer lambda
        lower = f"CAST(floor({i}) AS BIGINT)"
        pick = (f"CASE WHEN len(s) = 0 THEN NULL WHEN {i} <= 0 THEN s[1] WHEN {i} >= len(s) - 1 THEN s[len(s)] "
                f"ELSE s[{lower} + 1] + ({i} - {lower}) * (s[{lower} + 2] - s[{lower} + 1]) END")
        # an array whose elements are not all numbers (strings) has no quantile: NULL, as Druid answers
        numbers = "list_sort(list_filter(TRY_CAST(v AS DOUBLE[]), x -> x IS NOT NULL))"
        whole = "list_count(v) = list_count(TRY_CAST(v AS DOUBLE[]))"
        return (f"list_transform([{a}], v -> CASE WHEN {whole} THEN list_transform([{numbers}], s -> {pick})[1] END)[1]")

    return sql_around(quantile, array)


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = array_quantile
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = ()
ACCEPTS = frozenset({_NAME})
EMITS = frozenset({"LIST_TRANSFORM", "LIST_COUNT"})
EMITS_CLASSES = (exp.Lambda, exp.Bracket, exp.ArraySort, exp.ArrayFilter, exp.Transform)
