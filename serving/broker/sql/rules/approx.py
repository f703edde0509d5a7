"""Approximate aggregates: APPROX_COUNT_DISTINCT → DuckDB's HyperLogLog; COUNT(DISTINCT x) is
approximate too unless context ``useApproximateCountDistinct`` is false (Druid's default is true);
APPROX_QUANTILE(x, p) → DuckDB's t-digest ``approx_quantile`` as DOUBLE. The DataSketches variants
(``…_DS_HLL``, ``…_DS_THETA``, ``APPROX_QUANTILE_DS``) are real sketches: rules/sketches.py."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name, call_args
from serving.broker.sql.timeexpr import call
from serving.broker.sql.translation_context import TranslationContext


def _acd(arg: exp.Expression) -> exp.Expression:
    return call("APPROX_COUNT_DISTINCT", arg)


def approx(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if isinstance(node, exp.ApproxDistinct):
        return _acd(node.this)
    if anonymous_name(node) == "APPROX_COUNT_DISTINCT_BUILTIN":  # Druid's own HLL: an estimate, as here
        (arg,) = call_args(node, (1,), "APPROX_COUNT_DISTINCT_BUILTIN")
        return _acd(arg)
    if isinstance(node, exp.Count) and isinstance(node.this, exp.Distinct) and ctx.approximate_count_distinct:
        cols = node.this.expressions
        if len(cols) == 1:
            return _acd(cols[0])
        return node
    if isinstance(node, exp.ApproxQuantile):
        args = [node.this, node.args.get("quantile")]
        if len(args) < 2 or args[1] is None:
            raise validation_error("APPROX_QUANTILE needs an expression and a probability")
        q = call("APPROX_QUANTILE", args[0], args[1])
        return exp.cast(q, exp.DataType.build("DOUBLE"))
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = approx
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (exp.ApproxDistinct, exp.ApproxQuantile, exp.Count)
ACCEPTS = frozenset({"APPROX_COUNT_DISTINCT_BUILTIN"})
EMITS = frozenset({"APPROX_COUNT_DISTINCT", "APPROX_QUANTILE"})
