"""Rewrite rules, one per module (sqlglot optimizer style): each takes a node and the translation
context and returns the node or its replacement. :func:`apply_bottom_up` runs one over a tree with
children rewritten before their parents; a replacement without a type of its own keeps the type the
annotation gave the node it replaces (``JSON_VALUE(… RETURNING VARCHAR ARRAY)`` is still an ARRAY once
translated, for ``ARRAY_CONTAINS`` around it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlglot import exp

from serving.broker.sql.errors import validation_error
from serving.broker.sql.timeexpr import call
from serving.broker.sql.translation_context import TranslationContext

Rule = Callable[[exp.Expression, TranslationContext], exp.Expression]
#: meta key: a column reference that is a multi-value column passed on by a subquery or CTE (a list)
MULTI_VALUE = "druid_multi_value"
#: functions whose result is a multi-value string made on the fly (not an ARRAY, not a column's values)
MULTI_VALUE_RESULTS = frozenset({"STRING_TO_MV", "ARRAY_TO_MV", "MV_APPEND", "MV_PREPEND", "MV_CONCAT", "MV_SLICE",
                                 "MV_FILTER_ONLY", "MV_FILTER_NONE"})
#: functions whose result is a list: those above, and the ARRAY-valued ones
LIST_VALUED = MULTI_VALUE_RESULTS | frozenset(
    {"MV_TO_ARRAY", "STRING_TO_ARRAY", "ARRAY_CONCAT_AGG"}
    | {f"ARRAY_{op}" for op in ("APPEND", "PREPEND", "CONCAT", "SLICE", "FILTER_ONLY", "FILTER_NONE")})

#: Array functions sqlglot parses into typed nodes: their Druid names (arguments in ``arg_types`` order).
ARRAY_NODES: dict[type[exp.Expression], str] = {
    exp.ArraySize: "ARRAY_LENGTH", exp.ArrayContains: "ARRAY_CONTAINS", exp.ArrayToString: "ARRAY_TO_STRING",
    exp.StringToArray: "STRING_TO_ARRAY", exp.ArrayAppend: "ARRAY_APPEND", exp.ArrayPrepend: "ARRAY_PREPEND",
    exp.ArrayConcat: "ARRAY_CONCAT", exp.ArraySlice: "ARRAY_SLICE", exp.ArrayConcatAgg: "ARRAY_CONCAT_AGG",
}


_SLOT = "__radstack_operand__"


def sql_around(build: Callable[[str], str], operand: exp.Expression) -> exp.Expression:
    """SQL written as text around a tree (``build`` gets a placeholder for ``operand``), parsed back with
    ``operand``'s own nodes in the placeholder's places — not a reprint of them, so the rules still to run
    (``JSON_VALUE``'s, in a later pass) see them as nodes."""
    tree = exp.maybe_parse(build(f'"{_SLOT}"'), dialect="duckdb")
    return tree.transform(lambda n: operand.copy() if isinstance(n, exp.Column) and n.name == _SLOT
                          and not n.table else n)


def values_or_null(values: exp.Expression) -> exp.Expression:
    """A multi-value row's values as Druid reads them: its list, or one NULL value when it has none —
    the tree form of :func:`radstack.value_sql.values_or_null_sql` (``LEN``, not the LENGTH DuckDB's
    parser would make of it)."""
    some = exp.GT(this=call("LEN", values.copy()), expression=exp.Literal.number(0))
    return exp.Case(ifs=[exp.If(this=some, true=values.copy())],
                    default=exp.maybe_parse("CAST([NULL] AS VARCHAR[])", dialect="duckdb"))


def druid_function_name(node: exp.Expression) -> str | None:
    """The Druid function a call is: an anonymous call's name, or an array node's (``ARRAY_LENGTH``)."""
    return anonymous_name(node) or ARRAY_NODES.get(type(node))


def apply_bottom_up(tree: exp.Expression, rules: list[Rule], ctx: TranslationContext) -> exp.Expression:
    nodes = list(tree.walk())
    for node in reversed(nodes):
        new = node
        for rule in rules:
            new = rule(new, ctx)
        if new is not node:
            if new.type is None and node.type is not None:
                new.type = node.type  # a rewrite keeps the value's type for the rules of its parents
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


def anonymous_name(node: exp.Expression) -> str | None:
    return str(node.name).upper() if isinstance(node, exp.Anonymous) else None


def call_args(node: exp.Expression, counts: tuple[int, ...], name: str) -> list[exp.Expression]:
    """The arguments of the call ``node``; Druid's 400 when there are not ``counts`` of them."""
    args = list(node.expressions)
    if len(args) not in counts:
        raise validation_error(f"{name} takes {' or '.join(map(str, counts))} arguments")
    return args


#: Druid aggregate functions that arrive as anonymous calls.
ANON_AGGREGATES = frozenset({
    "APPROX_COUNT_DISTINCT_DS_HLL", "APPROX_COUNT_DISTINCT_DS_THETA", "APPROX_QUANTILE_DS", "EARLIEST", "LATEST",
    "EARLIEST_BY", "LATEST_BY", "LISTAGG", "BIT_AND", "BIT_OR", "BIT_XOR", "DS_HLL", "DS_THETA", "DS_QUANTILES_SKETCH",
})


def block_nodes(node: exp.Expression, root: exp.Select) -> Iterator[exp.Expression]:
    """The nodes of the SELECT block ``root`` from ``node`` down, not descending into nested queries."""
    yield node
    for child in node.iter_expressions():
        if isinstance(child, exp.Select | exp.Subquery | exp.Union) and child is not root:
            continue
        yield from block_nodes(child, root)


def is_aggregate(node: exp.Expression) -> bool:
    return isinstance(node, exp.AggFunc) or anonymous_name(node) in ANON_AGGREGATES


def aggregates(select: exp.Select) -> bool:
    """Whether a SELECT block aggregates (GROUP BY, or an aggregate function of its own)."""
    if select.args.get("group"):
        return True
    return any(is_aggregate(n) for n in block_nodes(select, select))


def concatenated_arrays(arrays: exp.Expression, distinct: bool) -> exp.Expression:
    """``ARRAY_CONCAT_AGG``: the values of a group's arrays in one (``distinct``: once each, sorted, a NULL
    element first, as Druid's sorted set gives them); NULL when no row had an array, ``[]`` when the
    rows' arrays were empty, as Druid 33 answers."""
    values = call("FLATTEN", call("LIST", arrays.copy()))
    if distinct:
        flat = values
        values = call("LIST_SORT", call("LIST_DISTINCT", flat.copy()))
        has_null = exp.LT(this=call("LIST_COUNT", flat.copy()), expression=call("LEN", flat.copy()))
        values = exp.Case(ifs=[exp.If(this=has_null, true=call("LIST_PREPEND", exp.null(), values.copy()))],
                          default=values)
    none = exp.EQ(this=exp.Count(this=arrays.copy()), expression=exp.Literal.number(0))
    return exp.Case(ifs=[exp.If(this=none, true=exp.null())], default=values)


def joined_elements(array: exp.Expression, separator: exp.Expression) -> exp.Expression:
    """An array's elements as text joined by ``separator``, a NULL element written ``null`` (as Druid
    joins them; DuckDB's ``array_to_string`` skips it)."""
    var = exp.to_identifier("__joined")
    text = exp.Coalesce(this=exp.cast(exp.column(var), "VARCHAR"), expressions=[exp.Literal.string("null")])
    return call("ARRAY_TO_STRING", call("LIST_TRANSFORM", array, exp.Lambda(this=text, expressions=[var])), separator)


def answers_the_query(select: exp.Select) -> bool:
    """Whether the block's rows are the query's answer (the top SELECT, or a branch of a top UNION)."""
    parent = select.parent
    while isinstance(parent, exp.SetOperation | exp.Subquery) and not (
            isinstance(parent, exp.Subquery) and parent.alias):
        parent = parent.parent
    return parent is None
