"""Post-aggregators → SQL over the aggregated row.

Computed in an outer ``SELECT`` over the aggregation, so ``having`` and ``limitSpec`` can use them.
``arithmetic`` follows Druid: the result is a double, ``/`` by zero gives 0 (``quotient`` is plain
division), a null input gives null; ``doubleGreatest``/``Least`` skip nulls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from serving.broker.native.aggregators import QUANTILES
from serving.broker.native.query_context import q
from serving.errors import invalid_input, unsupported

if TYPE_CHECKING:
    from serving.broker.native.query_context import QueryContext


@dataclass(frozen=True)
class PostAggregator:
    name: str
    sql: str
    type: str  # DOUBLE | LONG | STRING | FLOAT


def parse_post_aggregators(
    specs: list[Any], known: dict[str, str], ctx: QueryContext
) -> list[PostAggregator]:
    """``known``: name → Druid type of the aggregators (and dimensions) already in the row."""
    env: dict[str, tuple[str, str]] = {n: (q(n), t) for n, t in known.items()}
    out = []
    for spec in specs:
        if not isinstance(spec, dict):
            raise invalid_input(f"Invalid post-aggregator {spec!r}")
        name = spec.get("name")
        if not name:
            raise invalid_input(f"Post-aggregator of type [{spec.get('type')}] needs a 'name'")
        sql, typ = _sql(spec, env, ctx)
        out.append(PostAggregator(name, sql, typ))
        env[name] = (f"({sql})", typ)
    return out


def _ref(env: dict[str, tuple[str, str]], name: Any) -> tuple[str, str]:
    if name not in env:
        raise invalid_input(f"Post-aggregator references unknown field [{name}]")
    return env[name]


def _sql(spec: dict[str, Any], env: dict[str, tuple[str, str]], ctx: QueryContext) -> tuple[str, str]:
    typ = spec.get("type")
    if typ in ("fieldAccess", "finalizingFieldAccess", "hyperUniqueCardinality"):
        sql, t = _ref(env, spec.get("fieldName"))
        if typ == "finalizingFieldAccess" and t == QUANTILES:
            return f"DRUID_QUANTILES_N({sql})", "LONG"
        return sql, t
    if typ in ("quantilesDoublesSketchToQuantile", "quantilesDoublesSketchToQuantiles"):
        field = spec.get("field")
        if not isinstance(field, dict):
            raise invalid_input(f"{typ} post-aggregator needs 'field'")
        sketch, t = _sql(field, env, ctx)
        if t != QUANTILES:
            raise invalid_input(f"{typ}: field must be a quantilesDoublesSketch aggregator")
        if typ == "quantilesDoublesSketchToQuantile":
            fraction = spec.get("fraction")
            if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 <= fraction <= 1:
                raise invalid_input(f"{typ} needs a 'fraction' from 0 to 1")
            return f"DRUID_QUANTILE({sketch}, CAST({float(fraction)!r} AS DOUBLE))", "DOUBLE"
        fractions = spec.get("fractions")
        if not isinstance(fractions, list) or not fractions or not all(
                isinstance(f, int | float) and not isinstance(f, bool) and 0 <= f <= 1 for f in fractions):
            raise invalid_input(f"{typ} needs 'fractions' from 0 to 1")
        arr = ", ".join(f"CAST({float(f)!r} AS DOUBLE)" for f in fractions)
        return f"DRUID_QUANTILES({sketch}, [{arr}])", "ARRAY<DOUBLE>"
    if typ in ("HLLSketchEstimate", "thetaSketchEstimate"):  # sketch aggregators hold their estimate
        field = spec.get("field")
        if not isinstance(field, dict):
            raise invalid_input(f"{typ} post-aggregator needs 'field'")
        sql, _ = _sql(field, env, ctx)
        if spec.get("round"):
            return f"CAST(round({sql}) AS BIGINT)", "LONG"
        return sql, "DOUBLE"
    if typ == "constant":
        v = spec.get("value")
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise invalid_input("constant post-aggregator needs a numeric 'value'")
        return (repr(v) if isinstance(v, float) else f"CAST({v} AS BIGINT)"), ("DOUBLE" if isinstance(v, float) else "LONG")
    if typ == "arithmetic":
        fn = spec.get("fn")
        fields = spec.get("fields") or []
        if len(fields) < 2:
            raise invalid_input("arithmetic post-aggregator needs at least two fields")
        parts = [f"CAST({_sql(f, env, ctx)[0]} AS DOUBLE)" for f in fields]
        acc = parts[0]
        for p in parts[1:]:
            if fn in ("+", "-", "*"):
                acc = f"({acc} {fn} {p})"
            elif fn == "/":
                acc = f"(CASE WHEN {acc} IS NULL THEN NULL WHEN {p} = 0 THEN 0.0 ELSE {acc} / {p} END)"
            elif fn == "quotient":
                acc = f"({acc} / {p})"
            elif fn == "pow":
                acc = f"pow({acc}, {p})"
            else:
                raise invalid_input(f"Unknown arithmetic function [{fn}]")
        return acc, "DOUBLE"
    if typ in ("doubleGreatest", "doubleLeast", "longGreatest", "longLeast"):
        fields = spec.get("fields") or []
        if not fields:
            raise invalid_input(f"{typ} post-aggregator needs 'fields'")
        cast = "DOUBLE" if typ.startswith("double") else "BIGINT"
        fn = "greatest" if typ.endswith("Greatest") else "least"
        args = ", ".join(f"CAST({_sql(f, env, ctx)[0]} AS {cast})" for f in fields)
        return f"{fn}({args})", ("DOUBLE" if cast == "DOUBLE" else "LONG")
    if typ == "expression":
        expr = spec.get("expression")
        if expr is None:
            raise invalid_input("expression post-aggregator needs 'expression'")
        types = {n: t for n, (_, t) in env.items()}
        sql = ctx.expression_sql(str(expr), types)
        sql = _inline_refs(sql, env)
        out_type = str(spec.get("outputType") or "DOUBLE").upper()
        if spec.get("outputType"):
            sql_type = {"LONG": "BIGINT", "DOUBLE": "DOUBLE", "FLOAT": "FLOAT", "STRING": "VARCHAR"}[out_type]
            sql = f"CAST({sql} AS {sql_type})"
            return sql, out_type
        return sql, "INFER"
    if typ == "javascript":
        raise unsupported("JavaScript post-aggregators are disabled")
    raise unsupported(f"Post-aggregator type [{typ}] is not supported")


def _inline_refs(sql: str, env: dict[str, tuple[str, str]]) -> str:
    """Expressions may name earlier post-aggregators, which are not columns yet: inline them."""
    for name, (expr, _) in env.items():
        quoted = q(name)
        if expr != quoted and quoted in sql:
            sql = sql.replace(quoted, expr)
    return sql
