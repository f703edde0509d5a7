"""Druid's semantics for multi-value string dimensions (lists of strings in DuckDB), per SELECT block
that reads one datasource directly:

- **filters match when any value matches**: a predicate of the WHERE clause (``=``, ``<>``, ``IN``,
  ``LIKE``, ``BETWEEN``, comparisons, ``CONTAINS_STRING`` …, over the column or an expression of it)
  becomes ``len(list_filter(col, lambda v: <predicate on v>)) > 0``; ``<>`` and ``NOT IN`` are the
  negation of the any-match, as Druid plans them; ``IS NULL`` holds for rows without values;
- **GROUP BY explodes**: a grouping expression that reads the column groups by each of its values
  (rows without values group under NULL). The block's FROM becomes
  ``(SELECT * REPLACE (UNNEST(…) AS col) FROM ds WHERE <filter>) AS ds`` — the filter applies to the
  whole row before the values are split, so, as in Druid, ``WHERE tags = 'a' GROUP BY tags`` also
  yields the other values of the matching rows. Grouping by an ``MV_*`` function of the column
  (``MV_FILTER_ONLY(tags, ARRAY['a', 'b'])``) explodes the function's result instead — also when it
  makes a multi-value string of a plain one (``STRING_TO_MV(s, ',')``, ``MV_APPEND(s, 'x')``), as Druid
  reads any string as a multi-value one;
- **a plain scan returns the values**: one value as itself, several as their JSON array text (Druid's
  ``sqlStringifyArrays`` rendering) — in the answer: a subquery or CTE passes the column on as a list,
  and the block reading it treats it as a multi-value column again (filters, GROUP BY, rendering).

Functions of the ``MV_``/``ARRAY_`` families are translated by :mod:`serving.broker.sql.rules.arrays`.
Blocks with joins (including ``CROSS JOIN UNNEST``) read the columns as lists, with no implicit
explosion."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.context import TranslationContext
from serving.broker.sql.rules import MULTI_VALUE, aggregates, anonymous_name, block_nodes

_PREDICATES = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike, exp.In, exp.Between,
               exp.RegexpLike, exp.NullSafeEQ, exp.NullSafeNEQ)
_STRING_PREDICATES = frozenset({"CONTAINS_STRING", "ICONTAINS_STRING"})
#: MV_/ARRAY_ functions that read a multi-value column as a whole list (no per-value rewrite inside).
_LIST_FUNCTION_PREFIXES = ("MV_", "ARRAY_", "STRING_TO_")
#: MV_ functions whose result is a list of values (grouping by them explodes the result).
_LIST_RESULTS = frozenset({"MV_FILTER_ONLY", "MV_FILTER_NONE", "MV_SLICE", "MV_APPEND", "MV_PREPEND", "MV_CONCAT",
                           "STRING_TO_MV", "ARRAY_TO_MV"})
_VALUE = "__mv_value"
_NULL_LIST = "CAST([NULL] AS VARCHAR[])"


def multi_value(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    multi = {ds: {c.name for c in cols if c.multi_value} for ds, cols in ctx.catalog.datasources.items()}
    ctes = {cte.alias_or_name: cte.this for cte in tree.find_all(exp.CTE) if isinstance(cte.this, exp.Select)}
    # inner blocks first: a subquery (or CTE) that passes a multi-value column on unrendered makes it a
    # multi-value column of the block that reads it (Druid keeps it multi-value through subqueries)
    for select in reversed(list(tree.find_all(exp.Select))):
        source = select.args.get("from_")
        table = source.this if source is not None else None
        joins = select.args.get("joins") or []
        for src in [table, *(j.this for j in joins)]:
            _mark_passed_on(select, src, ctes)
        if joins:
            continue
        if isinstance(table, exp.Table) and table.name in ctes:
            columns = set(ctes[table.name].meta.get(_PASSED_ON, ()))
        elif isinstance(table, exp.Table) and table.name in ctx.datasources and table.name not in ctx.cte_names:
            columns = multi.get(table.name) or set()
        elif isinstance(table, exp.Subquery) and isinstance(table.this, exp.Select):
            columns = set(table.this.meta.get(_PASSED_ON, ()))
        else:
            continue
        if columns or _reads_list_results(select):
            _Block(select, table, columns).rewrite()
    for select in tree.find_all(exp.Select):
        if _is_output(select):
            _render_list_results(select)
    return tree


def _render_list_results(select: exp.Select) -> None:
    """An answer's ``MV_*`` function results (``MV_APPEND(s, 'x')``, ``STRING_TO_MV(s, ',')``) are
    multi-value strings, rendered as Druid renders them (a VARCHAR: one value as itself, several as their
    JSON array text, none as NULL) — also in blocks that join or unnest."""
    for p in select.expressions:
        target = p.this if isinstance(p, exp.Alias) else p
        if anonymous_name(target) in _LIST_RESULTS:
            name = p.alias if isinstance(p, exp.Alias) else None
            rendered = _rendered(target)
            p.replace(exp.alias_(rendered, name, quoted=True) if name else rendered)


def _mark_passed_on(select: exp.Select, source: exp.Expression | None, ctes: dict[str, exp.Select]) -> None:
    """Mark the block's references to the multi-value columns a subquery or CTE passes on
    (:data:`MULTI_VALUE`), so the array functions read them as lists as they read a table's."""
    if isinstance(source, exp.Table) and source.name in ctes:
        passed, alias = ctes[source.name].meta.get(_PASSED_ON, ()), source.alias_or_name
    elif isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select):
        passed, alias = source.this.meta.get(_PASSED_ON, ()), source.alias_or_name
    else:
        return
    for node in block_nodes(select, select):
        if isinstance(node, exp.Column) and node.name in passed and (not node.table or node.table == alias):
            node.meta[MULTI_VALUE] = True


#: the multi-value columns a subquery or CTE block passes on as lists (a meta key of its SELECT)
_PASSED_ON = "druid_multi_value_out"


def _is_output(select: exp.Select) -> bool:
    """Whether the block's rows are the query's answer (the top SELECT, or a branch of a top UNION)."""
    parent = select.parent
    while isinstance(parent, exp.SetOperation | exp.Subquery) and not (
            isinstance(parent, exp.Subquery) and parent.alias):
        parent = parent.parent
    return parent is None


def _consumed(node: exp.Expression, top: exp.Expression) -> bool:
    """Whether an ``MV_``/``ARRAY_`` function between ``node`` and ``top`` takes ``node``'s list whole
    (``MV_TO_STRING(MV_APPEND(s, 'x'), ',')`` groups by the joined text, not by each value)."""
    parent = node.parent
    while parent is not None and node is not top:
        name = anonymous_name(parent)
        if name is not None and name.startswith(_LIST_FUNCTION_PREFIXES):
            return True
        if parent is top:
            return False
        node, parent = parent, parent.parent
    return False


def _reads_list_results(select: exp.Select) -> bool:
    """Whether the block calls an ``MV_`` function that makes a multi-value string of a plain one
    (``STRING_TO_MV``, ``MV_APPEND(s, 'x')`` …): grouped by, its values explode as a column's would."""
    return any(anonymous_name(n) in _LIST_RESULTS for n in block_nodes(select, select))


class _Block:
    def __init__(self, select: exp.Select, table: exp.Table | exp.Subquery, columns: set[str]) -> None:
        self.select = select
        self.table = table
        self.columns = columns
        self.alias = table.alias_or_name

    def is_multi(self, node: exp.Expression) -> bool:
        return (isinstance(node, exp.Column) and node.name in self.columns
                and (not node.table or node.table == self.alias))

    def _multi_in(self, node: exp.Expression) -> list[exp.Column]:
        """The multi-value columns ``node`` reads per value (not those inside MV_/ARRAY_ functions)."""
        out: list[exp.Column] = []

        def walk(n: exp.Expression) -> None:
            if self.is_multi(n):
                out.append(n)  # type: ignore[arg-type]
                return
            name = anonymous_name(n)
            if name is not None and name.startswith(_LIST_FUNCTION_PREFIXES):
                return
            if isinstance(n, exp.Select | exp.Subquery | exp.Lambda):
                return
            for child in n.iter_expressions():
                walk(child)

        walk(node)
        return out

    # ---- filters ------------------------------------------------------------------------------

    def any_match(self, predicate: exp.Expression, depth: int = 0) -> exp.Expression:
        """``predicate`` true for at least one value of each multi-value column it reads."""
        body = predicate.copy()
        cols = self._multi_in(body)
        if not cols:
            return body
        name, var = cols[0].name, f"{_VALUE}{depth}"
        for c in cols:
            if c.name == name:
                c.replace(exp.column(var))
        body = self.any_match(body, depth + 1)  # the next column, if it reads several
        lam = exp.Lambda(this=body, expressions=[exp.to_identifier(var)])
        filtered = exp.Anonymous(this="LIST_FILTER", expressions=[exp.column(name, table=self.alias or None), lam])
        return exp.GT(this=exp.Anonymous(this="LEN", expressions=[filtered]), expression=exp.Literal.number(0))

    def rewrite_filter(self, where: exp.Expression) -> None:
        root = self.select.root()
        for node in list(block_nodes(where, self.select)):
            if node.root() is not root:
                continue  # inside a predicate already replaced
            is_predicate = isinstance(node, _PREDICATES) or anonymous_name(node) in _STRING_PREDICATES
            if not is_predicate or not self._multi_in(node):
                continue
            if isinstance(node, exp.NEQ):  # Druid: NOT (any value equals)
                new: exp.Expression = exp.Not(this=exp.paren(self.any_match(
                    exp.EQ(this=node.this.copy(), expression=node.expression.copy()))))
            else:
                new = self.any_match(node)
            node.replace(exp.paren(new))

    # ---- GROUP BY ----------------------------------------------------------------------------

    def grouping(self) -> list[exp.Expression]:
        group = self.select.args.get("group")
        exprs = list(group.expressions) if group is not None else []
        if self.select.args.get("distinct"):
            exprs += [e.this if isinstance(e, exp.Alias) else e for e in self.select.expressions]
        out = []
        for e in exprs:
            if isinstance(e, exp.Literal) and e.is_int:  # GROUP BY 1
                i = int(e.this) - 1
                if 0 <= i < len(self.select.expressions):
                    p = self.select.expressions[i]
                    e = p.this if isinstance(p, exp.Alias) else p
            out.append(e)
        return out

    def explode(self) -> None:
        where = self.select.args.get("where")
        lists: list[exp.Expression] = []  # MV_ functions to explode (replaced in the block by a column)
        cols: list[str] = []
        for g in self.grouping():
            found = [n for n in g.walk() if anonymous_name(n) in _LIST_RESULTS and not _consumed(n, g)]
            if found:
                lists += [f for f in found if all(f.sql() != x.sql() for x in lists)]
                continue
            cols += [c.name for c in self._multi_in(g) if c.name not in cols]
        if not lists and not cols:
            return
        inner = exp.select(exp.Star()).from_(self.table.copy())
        if where is not None:
            inner.set("where", where.copy())
            self.select.set("where", None)
        for name in cols:  # one level per column: several exploded columns give every combination
            inner = self._level(inner, exp.Star(replace=[self._unnest(exp.column(name), name)]))
        for i, fn in enumerate(lists):
            alias = f"__mv{i}"
            text = fn.sql()
            values = fn.copy()
            for node in list(block_nodes(self.select, self.select)):
                if anonymous_name(node) is not None and node.sql() == text:
                    node.replace(exp.column(alias))
            inner = self._level(inner, exp.Star(), self._unnest(values, alias))
        self.select.set("from_", exp.From(this=self._as_table(inner)))

    def _as_table(self, select: exp.Select) -> exp.Subquery:
        return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(self.alias, quoted=True)))

    def _level(self, inner: exp.Select, *items: exp.Expression) -> exp.Select:
        star = inner.expressions[0]
        if len(inner.expressions) == 1 and isinstance(star, exp.Star) and not star.args.get("replace"):
            inner.set("expressions", list(items))  # the first level: no extra subquery
            return inner
        return exp.select(*items).from_(self._as_table(inner))

    @staticmethod
    def _unnest(values: exp.Expression, name: str) -> exp.Expression:
        """``UNNEST`` of the values, one NULL when there are none (the row groups under NULL)."""
        null_list = exp.maybe_parse(_NULL_LIST, dialect="duckdb")
        some = exp.GT(this=exp.Anonymous(this="LEN", expressions=[values.copy()]), expression=exp.Literal.number(0))
        listed = exp.Case(ifs=[exp.If(this=some, true=values)], default=null_list)
        return exp.Alias(this=exp.Unnest(expressions=[listed]), alias=exp.to_identifier(name, quoted=True))

    # ---- scans ----------------------------------------------------------------------------------

    def render_scan(self) -> None:
        """Values of a plain scan: one value as itself, several as their JSON array text — in the
        answer; a subquery or CTE passes its multi-value columns on as lists, marked for its reader."""
        if not _is_output(self.select):
            passed = []
            for p in self.select.expressions:
                target = p.this if isinstance(p, exp.Alias) else p
                if self.is_multi(target):
                    passed.append(p.alias_or_name)
                elif isinstance(target, exp.Star):
                    passed += sorted(self.columns)
            self.select.meta[_PASSED_ON] = passed
            return
        new = []
        for p in self.select.expressions:
            target = p.this if isinstance(p, exp.Alias) else p
            if self.is_multi(target):
                name = p.alias if isinstance(p, exp.Alias) else target.name
                new.append(exp.alias_(_rendered(target), name, quoted=True))
            elif isinstance(target, exp.Star):
                replace = [exp.alias_(_rendered(exp.column(c, table=self.alias or None)), c, quoted=True)
                           for c in sorted(self.columns)]
                new.append(exp.Star(replace=replace))
            else:
                new.append(p)
        self.select.set("expressions", new)

    def rewrite(self) -> None:
        where = self.select.args.get("where")
        if where is not None:
            self.rewrite_filter(where)
        grouped = aggregates(self.select) or bool(self.select.args.get("distinct"))
        if grouped:
            self.explode()
        else:
            self.render_scan()


def _rendered(col: exp.Expression) -> exp.Expression:
    """A multi-value string's values as Druid answers them: one as itself, several as their JSON array
    text, none as NULL — its values are strings (``MV_APPEND(long_array, 'x')`` answers ``["1","x"]``)."""
    col = exp.cast(col.copy(), exp.DataType.build("VARCHAR[]", dialect="duckdb"))
    first = exp.Anonymous(this="LIST_EXTRACT", expressions=[col.copy(), exp.Literal.number(1)])
    as_json = exp.cast(exp.Anonymous(this="TO_JSON", expressions=[col.copy()]), exp.DataType.build("VARCHAR"))
    size = exp.Anonymous(this="LEN", expressions=[col.copy()])
    one = exp.EQ(this=size, expression=exp.Literal.number(1))
    none = exp.EQ(this=size.copy(), expression=exp.Literal.number(0))
    return exp.Case(ifs=[exp.If(this=one, true=first), exp.If(this=none, true=exp.cast(exp.Null(), "VARCHAR"))],
                    default=as_json)


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
EMITS = frozenset({"LEN", "LIST_EXTRACT", "LIST_FILTER", "TO_JSON"})
