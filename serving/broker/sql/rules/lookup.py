"""``LOOKUP(expr, 'name'[, replaceMissingValueWith])`` → the value of ``expr`` in the lookup's table.

Becomes ``COALESCE((SELECT v FROM <table> WHERE k = CAST(expr AS VARCHAR)), replacement)``: a
correlated scalar subquery, which DuckDB plans as a hash join against the lookup table (a range join
for an ``ipRange`` lookup, :func:`serving.lookups.value_sql`). As in Druid, a
key the lookup lacks (or a NULL key) gives the replacement, NULL when none is given."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name, sql_around
from serving.broker.sql.timeexpr import literal_string
from serving.broker.sql.translation_context import TranslationContext
from serving.lookups import value_sql


def lookup(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if anonymous_name(node) != "LOOKUP":
        return node
    args = list(node.expressions)
    if len(args) not in (2, 3):
        raise validation_error("LOOKUP takes 2 or 3 arguments: LOOKUP(expr, 'lookupName'[, replaceMissingValueWith])")
    name = literal_string(args[1], "LOOKUP's lookup name")
    loaded = ctx.catalog.lookups.get(name)
    if loaded is None:
        raise validation_error(f"Lookup [{name}] not found")
    ctx.lookups.add(name)
    found = sql_around(lambda key: value_sql(loaded, key), exp.cast(args[0], exp.DataType.build("VARCHAR")))
    if len(args) == 3 and not isinstance(args[2], exp.Null):
        return exp.Coalesce(this=found, expressions=[exp.cast(args[2], exp.DataType.build("VARCHAR"))])
    return found


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = lookup
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = ()
ACCEPTS = frozenset({"LOOKUP"})
EMITS_CLASSES = (exp.SplitPart, exp.ArgMin)  # serving.lookups.value_sql: the narrowest ipRange
