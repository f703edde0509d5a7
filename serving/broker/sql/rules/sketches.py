"""Druid's DataSketches SQL functions on real sketches (:mod:`radstack.sketches`, Python UDFs).

An aggregate collects its group's values (or sketches) with ``LIST`` and one UDF turns the list into a
sketch — built from raw values, merged when the argument is a sketch column (``COMPLEX<HLLSketch>`` …,
typed ``VARBINARY`` for the planner). Estimates and quantiles read sketches.

| Druid | here |
| --- | --- |
| ``APPROX_COUNT_DISTINCT_DS_HLL(expr[, lgK[, tgtHllType]])`` | ``round(estimate(DRUID_HLL_BUILD(LIST(DISTINCT expr), …)))``, or ``DRUID_HLL_MERGE(LIST(sketch), …)`` over a sketch column (BIGINT) |
| ``DS_HLL(expr[, lgK[, tgtHllType]])`` | the HLL sketch |
| ``HLL_SKETCH_ESTIMATE(sketch[, round])``, ``HLL_SKETCH_UNION([lgK, tgtHllType,] sketch, …)`` | estimate / merged sketch |
| ``APPROX_COUNT_DISTINCT_DS_THETA(expr[, size])``, ``DS_THETA(expr[, size])`` | the same for theta |
| ``THETA_SKETCH_ESTIMATE(sketch)``, ``THETA_SKETCH_UNION/INTERSECT/NOT([size,] sketch, …)`` | estimate / set operation |
| ``APPROX_QUANTILE_DS(expr, fraction[, k])``, ``DS_QUANTILES_SKETCH(expr[, k])`` | quantile / the sketch |
| ``DS_GET_QUANTILE(sketch, fraction)``, ``DS_GET_QUANTILES(sketch, fraction, …)`` | a quantile / an array of them |
"""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.timeexpr import call
from serving.broker.sql.translation_context import TranslationContext

AGGREGATES = frozenset({"APPROX_COUNT_DISTINCT_DS_HLL", "DS_HLL", "APPROX_COUNT_DISTINCT_DS_THETA", "DS_THETA",
                        "APPROX_QUANTILE_DS", "DS_QUANTILES_SKETCH"})
SCALARS = frozenset({"HLL_SKETCH_ESTIMATE", "HLL_SKETCH_UNION", "THETA_SKETCH_ESTIMATE", "THETA_SKETCH_UNION",
                     "THETA_SKETCH_INTERSECT", "THETA_SKETCH_NOT", "DS_GET_QUANTILE", "DS_GET_QUANTILES"})
FUNCTIONS = AGGREGATES | SCALARS


def _is_sketch(e: exp.Expression, ctx: TranslationContext) -> bool:
    t = e.type
    if t is not None and t.is_type(exp.DataType.Type.VARBINARY, exp.DataType.Type.BINARY):
        return True
    if isinstance(e, exp.Column) and (t is None or t.is_type(exp.DataType.Type.UNKNOWN)):
        passed_on = _through_stars(e, ctx)
        return passed_on is not None and passed_on.upper().startswith("COMPLEX<") and passed_on.upper() != "COMPLEX<JSON>"
    return False


def _from_sources(select: exp.Select) -> list[exp.Expression]:
    from_ = select.args.get("from_")
    sources = [from_.this] if isinstance(from_, exp.From) else []
    return sources + [j.this for j in select.args.get("joins") or []]


def _cte_named(node: exp.Expression, name: str) -> exp.CTE | None:
    while node is not None:
        with_ = node.args.get("with_")
        for cte in with_.expressions if isinstance(with_, exp.With) else []:
            if cte.alias == name:
                return cte
        node = node.parent
    return None


def _through_stars(col: exp.Column, ctx: TranslationContext) -> str | None:
    """The Druid type of a datasource column that subqueries or CTEs selecting ``*`` pass on unchanged
    (``FROM (SELECT * FROM ds) AS t``, as Superset's virtual datasets write): stars stay unexpanded, so
    the type annotation does not see through them, and a sketch column would be taken for raw values."""
    select, alias, name = col.find_ancestor(exp.Select), col.table, col.name
    for _ in range(16):  # levels of nesting followed
        if select is None:
            return None
        sources = _from_sources(select)
        named = [s for s in sources if s.alias_or_name == alias] if alias else sources
        if len(named) != 1:
            return None
        source = named[0]
        inner: exp.Expression | None = source.this if isinstance(source, exp.Subquery) else None
        if isinstance(source, exp.Table) and not source.args.get("db"):
            columns = ctx.catalog.datasources.get(source.name)
            if columns is not None:
                return next((c.druid_type for c in columns if c.name == name), None)
            cte = _cte_named(select, source.name)
            inner = cte.this if cte is not None else None
        if not isinstance(inner, exp.Select) or any(e.alias_or_name == name for e in inner.expressions):
            return None  # not a query, or one that names the column itself (annotated, or changed)
        stars = [e for e in inner.expressions
                 if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))]
        star = stars[0] if len(stars) == 1 else None
        modifiers = star.this if isinstance(star, exp.Column) else star
        if star is None or any(modifiers.args.get(k) for k in ("except", "replace", "rename")):
            return None
        select, alias = inner, star.table if isinstance(star, exp.Column) else ""
    return None


def _nan_when_empty(quantile: exp.Expression) -> exp.Expression:
    """A quantile of a group without values: Druid's empty sketch answers NaN."""
    return exp.Coalesce(this=quantile, expressions=[exp.cast(exp.Literal.string("NaN"), exp.DataType.build("DOUBLE"))])


def _int(e: exp.Expression | None, default: int, what: str) -> exp.Expression:
    if e is None:
        return exp.Literal.number(default)
    if isinstance(e, exp.Literal) and not e.is_string and str(e.this).isdigit():
        return e
    raise validation_error(f"{what} must be an integer literal")


def _str(e: exp.Expression | None, default: str, what: str) -> exp.Expression:
    if e is None:
        return exp.Literal.string(default)
    if isinstance(e, exp.Literal) and e.is_string:
        return exp.Literal.string(str(e.this).upper())
    raise validation_error(f"{what} must be a string literal")


def _collected(e: exp.Expression, cast: str | None, *, distinct: bool = False) -> exp.Expression:
    """``LIST`` of a group's values; ``distinct`` where a repeat cannot change the sketch (HLL and theta
    keep a set: adding a value twice is a no-op), so DuckDB hands the UDF each distinct value once.
    Building from raw values costs about 1 µs a value in the UDF, far more than DuckDB's ``DISTINCT``;
    merging sketches does not take it, because there DuckDB's ``DISTINCT`` costs more than the
    vectorised merge when the sketches are mostly unalike (rolled-up rows: benchmarks/bench_data_model.py
    measured ``LIST(DISTINCT)`` at 2.5–3.4× a plain ``LIST`` on 1 M mostly unalike sketches)."""
    value = e if cast is None else exp.cast(e, exp.DataType.build(cast))
    return call("LIST", exp.Distinct(expressions=[value]) if distinct else value)


def _estimate(sketch: exp.Expression, rounded: bool) -> exp.Expression:
    est = call("DRUID_SKETCH_ESTIMATE", sketch)
    if not rounded:
        return est
    return exp.cast(exp.Round(this=est), exp.DataType.build("BIGINT"))


def _push_filter(node: exp.Filter) -> exp.Expression:
    """``agg(x) FILTER (WHERE c)`` after ``agg`` became ``UDF(LIST(x))``: the filter goes to ``LIST``."""
    lists = [n for n in node.this.find_all(exp.Anonymous) if n.name.upper() == "LIST"]
    if len(lists) != 1:
        return node
    lists[0].replace(exp.Filter(this=lists[0].copy(), expression=node.expression.copy()))
    return node.this


def sketches(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if isinstance(node, exp.Filter) and any(n.name.upper().startswith("DRUID_")
                                            for n in node.this.find_all(exp.Anonymous)):
        return _push_filter(node)
    name = anonymous_name(node)
    if name not in FUNCTIONS:
        return node
    args = list(node.expressions)
    if not args:
        raise validation_error(f"{name} needs an argument")
    udf = _translate(name, args, ctx)
    ctx.udfs.update(n.name.upper() for n in udf.find_all(exp.Anonymous) if n.name.upper().startswith("DRUID_"))
    return udf


def _translate(name: str, args: list[exp.Expression], ctx: TranslationContext) -> exp.Expression:
    first = args[0]
    if name in ("APPROX_COUNT_DISTINCT_DS_HLL", "DS_HLL"):
        lg_k, tgt = _int(args[1] if len(args) > 1 else None, 12, "lgK"), _str(args[2] if len(args) > 2 else None,
                                                                                 "HLL_4", "tgtHllType")
        merge = _is_sketch(first, ctx)
        sketch = call("DRUID_HLL_MERGE" if merge else "DRUID_HLL_BUILD",
                      _collected(first, None if merge else "VARCHAR", distinct=not merge), lg_k, tgt)
        return sketch if name == "DS_HLL" else _estimate(sketch, True)
    if name in ("APPROX_COUNT_DISTINCT_DS_THETA", "DS_THETA"):
        size = _int(args[1] if len(args) > 1 else None, 16384, "size")
        merge = _is_sketch(first, ctx)
        sketch = call("DRUID_THETA_MERGE" if merge else "DRUID_THETA_BUILD",
                      _collected(first, None if merge else "VARCHAR", distinct=not merge), size)
        return sketch if name == "DS_THETA" else _estimate(sketch, True)
    if name in ("APPROX_QUANTILE_DS", "DS_QUANTILES_SKETCH"):
        has_fraction = name == "APPROX_QUANTILE_DS"
        if has_fraction and len(args) < 2:
            raise validation_error("APPROX_QUANTILE_DS needs an expression and a fraction")
        k = _int(args[2 if has_fraction else 1] if len(args) > (2 if has_fraction else 1) else None, 128, "k")
        merge = _is_sketch(first, ctx)
        sketch = call("DRUID_QUANTILES_MERGE" if merge else "DRUID_QUANTILES_BUILD",
                      _collected(first, None if merge else "DOUBLE"), k)
        if not has_fraction:
            return sketch
        return _nan_when_empty(call("DRUID_QUANTILE", sketch, exp.cast(args[1], exp.DataType.build("DOUBLE"))))
    if name == "HLL_SKETCH_ESTIMATE":
        rounded = len(args) > 1 and isinstance(args[1], exp.Boolean) and bool(args[1].this)
        return _estimate(first, rounded)
    if name == "THETA_SKETCH_ESTIMATE":
        return _estimate(first, False)
    if name == "HLL_SKETCH_UNION":
        lg_k, tgt = exp.Literal.number(12), exp.Literal.string("HLL_4")
        if isinstance(first, exp.Literal) and not first.is_string:
            lg_k, args = first, args[1:]
            if args and isinstance(args[0], exp.Literal) and args[0].is_string:
                tgt, args = _str(args[0], "HLL_4", "tgtHllType"), args[1:]
        return call("DRUID_HLL_MERGE", exp.Array(expressions=args), lg_k, tgt)
    if name in ("THETA_SKETCH_UNION", "THETA_SKETCH_INTERSECT", "THETA_SKETCH_NOT"):
        size = exp.Literal.number(16384)
        if isinstance(first, exp.Literal) and not first.is_string:
            size, args = first, args[1:]
        op = name.rsplit("_", 1)[1]
        return call("DRUID_THETA_SET", exp.Literal.string(op), exp.Array(expressions=args), size)
    if name == "DS_GET_QUANTILE":
        if len(args) != 2:
            raise validation_error("DS_GET_QUANTILE takes a sketch and a fraction")
        return _nan_when_empty(call("DRUID_QUANTILE", first, exp.cast(args[1], exp.DataType.build("DOUBLE"))))
    # DS_GET_QUANTILES(sketch, fraction, …)
    fractions = [exp.cast(a, exp.DataType.build("DOUBLE")) for a in args[1:]]
    return call("DRUID_QUANTILES", first, exp.Array(expressions=fractions))


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = sketches
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (exp.Filter,)
ACCEPTS = FUNCTIONS
EMITS = frozenset({"LIST"})
