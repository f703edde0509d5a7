"""Druid's semantics for multi-value string dimensions (lists of strings in DuckDB), per SELECT block
that reads one datasource directly:

- **filters match when any value matches**: a predicate of the WHERE clause (``=``, ``<>``, ``IN``,
  ``LIKE``, ``BETWEEN``, comparisons, ``CONTAINS_STRING`` …, over the column or an expression of it)
  becomes ``len(list_filter(col, lambda v: <predicate on v>)) > 0``; ``<>`` and ``NOT IN`` are the
  negation of the any-match, as Druid plans them, with SQL's three values over the values (unknown
  when no value matches but one is NULL); ``IS NULL`` holds for rows without values or with a NULL
  value (``IS NOT NULL`` for the others);
- **GROUP BY explodes**: a grouping expression that reads the column groups by each of its values
  (rows without values group under NULL). The block's FROM becomes
  ``(SELECT * REPLACE (UNNEST(…) AS col) FROM ds WHERE <filter>) AS ds`` — the filter applies to the
  whole row before the values are split, so, as in Druid, ``WHERE tags = 'a' GROUP BY tags`` also
  yields the other values of the matching rows. A block whose aggregates all ignore repeats
  (``COUNT(DISTINCT tags)``, ``APPROX_COUNT_DISTINCT``, ``ARRAY_AGG(DISTINCT …)``, ``MIN``/``MAX``) reads
  the column's values the same way: Druid counts values, not lists. Grouping by an ``MV_*`` function of the column
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

from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import (
    MULTI_VALUE,
    MULTI_VALUE_RESULTS,
    aggregates,
    anonymous_name,
    answers_the_query,
    block_nodes,
    is_aggregate,
    values_or_null,
)
from serving.broker.sql.timeexpr import call
from serving.broker.sql.translation_context import TranslationContext
from serving.broker.sql.value_ranges import ONE_RANGE, simplify_ranges

_PREDICATES = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike, exp.In, exp.Between,
               exp.RegexpLike, exp.NullSafeEQ, exp.NullSafeNEQ)
_STRING_PREDICATES = frozenset({"CONTAINS_STRING", "ICONTAINS_STRING"})
#: MV_/ARRAY_ functions that read a multi-value column as a whole list (no per-value rewrite inside).
_LIST_FUNCTION_PREFIXES = ("MV_", "ARRAY_", "STRING_TO_")
#: MV_ functions whose result is a list of values (grouping by them explodes the result).
_VALUE = "__mv_value"
_EACH = "__mv_each"
#: a meta key: this reference to a multi-value column reads the list whole (the rule wrote it)
_ONE_VALUE = "druid_mv_one_value"
#: a meta key: a block's filter before its predicates are matched per value (Calcite's reading of it)
_FILTER = "druid_mv_filter"
#: functions whose result is a string: over a multi-value column in a scan, Druid applies them per value
_STRING_RESULTS = (exp.DPipe, exp.Concat, exp.Upper, exp.Lower, exp.Substring, exp.Replace, exp.Trim, exp.Pad,
                   exp.Coalesce, exp.Reverse, exp.Left, exp.Right, exp.Initcap)
_STRING_RESULT_NAMES = frozenset({"LOOKUP", "REGEXP_EXTRACT", "REGEXP_REPLACE", "BTRIM", "LTRIM", "RTRIM", "LPAD",
                                  "RPAD", "NVL", "REPEAT", "STRING_FORMAT", "TEXTCAT"})


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
        if answers_the_query(select):
            _render_list_results(select)
    return tree


def _render_list_results(select: exp.Select) -> None:
    """An answer's ``MV_*`` function results (``MV_APPEND(s, 'x')``, ``STRING_TO_MV(s, ',')``) are
    multi-value strings, rendered as Druid renders them (a VARCHAR: one value as itself, several as their
    JSON array text, none as NULL) — also in blocks that join or unnest."""
    for p in select.expressions:
        target = p.this if isinstance(p, exp.Alias) else p
        if anonymous_name(target) in MULTI_VALUE_RESULTS:
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


def _consumed(node: exp.Expression, top: exp.Expression, *, by_text: bool = True) -> bool:
    """Whether an ``MV_``/``ARRAY_`` function between ``node`` and ``top`` takes ``node``'s list whole
    (``MV_TO_STRING(MV_APPEND(s, 'x'), ',')`` groups by the joined text, not by each value) — or, with
    ``by_text``, a concatenation writes it into its text (a list made on the fly, not a column's values)."""
    parent = node.parent
    while parent is not None and node is not top:
        name = anonymous_name(parent)
        if name is not None and name.startswith(_LIST_FUNCTION_PREFIXES):
            return True
        if by_text and isinstance(parent, exp.DPipe | exp.Concat):  # 'x' || STRING_TO_MV(…): the list as text
            return True
        if parent is top:
            return False
        node, parent = parent, parent.parent
    return False


def _reads_list_results(select: exp.Select) -> bool:
    """Whether the block calls an ``MV_`` function that makes a multi-value string of a plain one
    (``STRING_TO_MV``, ``MV_APPEND(s, 'x')`` …): grouped by, its values explode as a column's would."""
    return any(anonymous_name(n) in MULTI_VALUE_RESULTS for n in block_nodes(select, select))


class _Block:
    def __init__(self, select: exp.Select, table: exp.Table | exp.Subquery, columns: set[str]) -> None:
        self.select = select
        self.table = table
        self.columns = columns
        self.alias = table.alias_or_name
        #: columns the whole block reads per value (every aggregate of an ungrouped block reads values)
        self.also_explode: tuple[str, ...] = ()

    def is_multi(self, node: exp.Expression) -> bool:
        return (isinstance(node, exp.Column) and node.name in self.columns
                and (not node.table or node.table == self.alias) and not node.meta.get(_ONE_VALUE))

    def single_values(self) -> None:
        """A length of a multi-value column (``CHAR_LENGTH(tags)``) is a number of the row, not of each
        value, in Druid: of its one value, NULL when it has several or none — also grouped (Druid 33)."""
        for node in list(block_nodes(self.select, self.select)):
            if not (isinstance(node, exp.Length) or anonymous_name(node) == "STRLEN"):
                continue
            arg = node.this if isinstance(node, exp.Length) else (node.expressions[0] if node.expressions else None)
            if arg is None or not self.is_multi(arg):
                continue
            col = arg.copy()
            col.meta[_ONE_VALUE] = True
            one = exp.EQ(this=call("LEN", col.copy()), expression=exp.Literal.number(1))
            arg.replace(exp.Case(ifs=[exp.If(this=one, true=call("LIST_EXTRACT", col, exp.Literal.number(1)))]))

    def row_null_tests(self) -> None:
        """``tags IS NULL`` as a value of the SELECT list or a grouping (not a filter) is a test of the
        row in Druid 33: true when it has no values (NULL or ``[]``), false for ``['b', NULL]``; the row is
        not split into its values for it."""
        group = self.select.args.get("group")
        tops = [*self.select.expressions, *(group.expressions if group is not None else [])]
        for top in tops:
            for node in list(top.walk()):
                if not (isinstance(node, exp.Is) and isinstance(node.expression, exp.Null) and self.is_multi(node.this)):
                    continue
                up, condition = node.parent, False
                while up is not None and up is not top.parent:
                    condition = condition or isinstance(up, exp.Where | exp.If | exp.Filter)
                    up = up.parent
                if condition:
                    continue
                col = node.this.copy()
                col.meta[_ONE_VALUE] = True
                no_values = exp.EQ(this=exp.Coalesce(this=call("LEN", col), expressions=[exp.Literal.number(0)]),
                                   expression=exp.Literal.number(0))
                node.replace(exp.paren(no_values))

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
        """``predicate`` over the values of each multi-value column it reads, with SQL's three values as
        Druid ORs them: true when a value matches, unknown when none does but one is unknown (a NULL
        value: ``NOT (tags = 'a')`` does not hold for ``[NULL, 'b']``), else false; a row without values
        is read as one NULL value, as Druid reads it (``COALESCE(tags, 'x') = 'x'`` holds there)."""
        body = predicate.copy()
        cols = self._multi_in(body)
        if not cols:
            return body
        name, var = cols[0].name, f"{_VALUE}{depth}"
        for c in cols:
            if c.name == name:
                c.replace(exp.column(var))
        body = self.any_match(body, depth + 1)  # the next column, if it reads several
        values = values_or_null(exp.column(name, table=self.alias or None))

        def some(cond: exp.Expression) -> exp.Expression:
            lam = exp.Lambda(this=cond, expressions=[exp.to_identifier(var)])
            filtered = exp.Anonymous(this="LIST_FILTER", expressions=[values.copy(), lam])
            return exp.GT(this=exp.Anonymous(this="LEN", expressions=[filtered]), expression=exp.Literal.number(0))

        unknown = exp.Is(this=exp.paren(body.copy()), expression=exp.Null())
        return exp.Case(ifs=[exp.If(this=some(body), true=exp.true()), exp.If(this=some(unknown), true=exp.null())],
                        default=exp.false())

    def predicate(self, node: exp.Expression) -> exp.Expression | None:
        """A predicate over multi-value columns as Druid evaluates it, or None when ``node`` is none."""
        negated = isinstance(node, exp.Like | exp.ILike) and bool(node.args.get("negate"))
        is_predicate = (isinstance(node, _PREDICATES) or anonymous_name(node) in _STRING_PREDICATES
                        or bool(node.meta.get(ONE_RANGE)))
        is_null = isinstance(node, exp.Is) and isinstance(node.expression, exp.Null)
        if not (is_predicate or is_null) or not self._multi_in(node):
            return None
        if isinstance(node, exp.In) and isinstance(node.args.get("query"), exp.Subquery) and self.is_multi(node.this):
            # IN (SELECT …): a value among the subquery's (a subquery cannot sit in the per-value lambda)
            found = exp.Array(expressions=[node.args["query"].this.copy()])
            return exp.Anonymous(this="LIST_HAS_ANY", expressions=[node.this.copy(), found])
        if negated:  # NOT LIKE: NOT (any value is like), as Druid plans it
            positive = node.copy()
            positive.set("negate", None)
            return exp.Not(this=exp.paren(self.any_match(positive)))
        if isinstance(node, exp.NEQ):  # Druid: NOT (any value equals)
            return exp.Not(this=exp.paren(self.any_match(
                exp.EQ(this=node.this.copy(), expression=node.expression.copy()))))
        return self.any_match(node)

    def rewrite_predicates(self, where: exp.Expression) -> None:
        root = self.select.root()
        for node in list(block_nodes(where, self.select)):
            if node.root() is not root:
                continue  # inside a predicate already replaced
            new = self.predicate(node)
            if new is not None:
                node.replace(exp.paren(new))

    def rewrite_conditions(self) -> None:
        """Conditions inside the SELECT list — an aggregate's ``FILTER (WHERE …)``, a ``CASE WHEN`` —
        over multi-value columns the block does not split into values: matched as filters are."""
        for holder in self._select_conditions():
            self.rewrite_predicates(holder.this)

    def _select_conditions(self) -> list[exp.Expression]:
        """The nodes whose ``this`` is a condition inside the SELECT list: an aggregate's ``FILTER (WHERE
        …)`` (its Where) and a ``CASE WHEN`` (its If)."""
        out: list[exp.Expression] = []
        for p in self.select.expressions:
            for node in p.walk():
                if isinstance(node, exp.Filter) and isinstance(node.expression, exp.Where):
                    out.append(node.expression)
                elif isinstance(node, exp.If) and node.this is not None:
                    out.append(node)
        return out

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

    def _value_column(self, node: exp.Expression) -> exp.Column | None:
        """The multi-value column an aggregate that ignores repeats reads (``COUNT(DISTINCT tags)``,
        ``APPROX_COUNT_DISTINCT(tags)``, ``ARRAY_AGG(DISTINCT tags)``, ``MIN``/``MAX``), else None."""
        arg = node.this
        if isinstance(node, exp.Count | exp.ArrayAgg | exp.GroupConcat) and isinstance(arg, exp.Distinct) \
                and len(arg.expressions) == 1:
            arg = arg.expressions[0]
        elif not isinstance(node, exp.ApproxDistinct | exp.Min | exp.Max):
            return None
        return arg if self.is_multi(arg) else None  # type: ignore[return-value]

    def _read_column(self, agg: exp.Expression) -> exp.Column:
        """The multi-value column a values' aggregate reads."""
        col = self._value_column(agg)
        if col is None:  # ARRAY_AGG(tags) / STRING_AGG(tags, …)
            col = agg.this.this if isinstance(agg.this, exp.Order) else agg.this
        return col  # type: ignore[return-value]

    def _collects_values(self, node: exp.Expression) -> bool:
        """``ARRAY_AGG(tags)`` / ``STRING_AGG(tags, sep)`` without DISTINCT: Druid collects the rows' values
        in one list (a row without values adds a NULL), not one element per row."""
        arg = node.this.this if isinstance(node.this, exp.Order) else node.this
        return isinstance(node, exp.ArrayAgg | exp.GroupConcat) and not isinstance(arg, exp.Distinct) \
            and self.is_multi(arg)

    def split_value_aggregates(self) -> None:
        """Aggregates over a multi-value column's values (``COUNT(DISTINCT tags)``, ``ARRAY_AGG(tags)`` …)
        beside aggregates over rows (``COUNT(*)``): each of the former is computed in its own block over the values — the same
        FROM, WHERE and grouping, the column exploded — and read back by the group's keys (a correlated
        scalar subquery, which DuckDB joins), so it counts values as Druid does while ``COUNT(*)`` still
        counts rows. Not when a grouping expression reads a multi-value column (every aggregate then
        counts the exploded rows, as in Druid)."""
        if self.distinct_values() or self.select.args.get("distinct"):
            return
        groups = self.grouping()
        if any(self._multi_in(g) or any(anonymous_name(n) in MULTI_VALUE_RESULTS for n in g.walk()) for g in groups):
            return
        aliases = {p.alias: p.this for p in self.select.expressions if isinstance(p, exp.Alias)}
        groups = [aliases[g.name].copy() if isinstance(g, exp.Column) and not g.table and g.name in aliases
                  and g.name not in self.columns else g for g in groups]
        units, reads = [], []
        every = [node for node in block_nodes(self.select, self.select) if is_aggregate(node)]
        for node in every:
            if self._value_column(node) is not None or self._collects_values(node):
                units.append(node.parent if isinstance(node.parent, exp.Filter) else node)
                reads.append(self._read_column(node).name)
        if units and not groups and len(units) == len(every):  # one row of values' aggregates: split the rows
            self.also_explode = tuple(reads)
            return
        where = self.select.args.get("where")
        for i, unit in enumerate(units):
            keys = [exp.alias_(g.copy(), f"__mv_k{j}", quoted=True) for j, g in enumerate(groups)]
            values = exp.select(*keys, exp.alias_(unit.copy(), "__mv_v", quoted=True)).from_(self.table.copy())
            if where is not None:
                values.set("where", where.copy())
            if groups:
                values.set("group", exp.Group(expressions=[g.copy() for g in groups]))
            agg = unit.this if isinstance(unit, exp.Filter) else unit
            _Block(values, values.args["from_"].this, self.columns).explode(also=(self._read_column(agg).name,))
            alias = f"__mv_values{i}"
            lookup = exp.select(exp.column("__mv_v", table=alias, quoted=True)).from_(
                exp.Subquery(this=values, alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True))))
            if groups:
                lookup.set("where", exp.Where(this=exp.and_(*[
                    exp.NullSafeEQ(this=exp.column(f"__mv_k{j}", table=alias, quoted=True), expression=g.copy())
                    for j, g in enumerate(groups)])))
            found: exp.Expression = exp.Subquery(this=lookup)
            if isinstance(agg, exp.Count | exp.ApproxDistinct):  # a group with no values counts 0
                found = call("COALESCE", found, exp.Literal.number(0))
            unit.replace(found)

    def distinct_values(self) -> list[str]:
        """The multi-value columns a block counts distinct values of (``COUNT(DISTINCT tags)``,
        ``APPROX_COUNT_DISTINCT(tags)``, ``ARRAY_AGG(DISTINCT tags)``, ``MIN``/``MAX``) when every aggregate
        of the block ignores repeats: then the block reads each value as a row (Druid counts values, not
        lists), as a GROUP BY of the column would."""
        found: list[str] = []
        for node in block_nodes(self.select, self.select):
            if not is_aggregate(node):
                continue
            if not isinstance(node, exp.Count | exp.ArrayAgg | exp.GroupConcat | exp.ApproxDistinct | exp.Min
                              | exp.Max) or (isinstance(node, exp.Count | exp.ArrayAgg | exp.GroupConcat) and not (
                                  isinstance(node.this, exp.Distinct) and len(node.this.expressions) == 1)):
                return []  # COUNT(*), SUM …: every row counts once, so the lists stay whole
            col = self._value_column(node)
            if col is not None and col.name not in found:
                found.append(col.name)
        return found

    def explode(self, also: tuple[str, ...] = ()) -> set[str]:
        """Split the block's rows by the values of the columns it reads per value (``also``: these too)."""
        where = self.select.args.get("where")
        lists: list[exp.Expression] = []  # MV_ functions to explode (replaced in the block by a column)
        cols: list[str] = list(dict.fromkeys([*self.distinct_values(), *also]))
        for g in self.grouping():
            found = [n for n in g.walk() if anonymous_name(n) in MULTI_VALUE_RESULTS and not _consumed(n, g)]
            if found:
                lists += [f for f in found if all(f.sql() != x.sql() for x in lists)]
                continue
            cols += [c.name for c in self._multi_in(g) if c.name not in cols]
        if not lists and not cols:
            return set()
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
        return set(cols)

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
        return exp.Alias(this=exp.Unnest(expressions=[values_or_null(values)]), alias=exp.to_identifier(name, quoted=True))

    # ---- scans ----------------------------------------------------------------------------------

    def render_scan(self) -> None:
        """Values of a plain scan: one value as itself, several as their JSON array text — in the
        answer; a subquery or CTE passes its multi-value columns on as lists, marked for its reader."""
        if not answers_the_query(self.select):
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
            elif (mapped := self._mapped(target)) is not None:
                new.append(exp.alias_(_rendered(mapped), p.alias_or_name, quoted=True))
            elif isinstance(target, exp.Star):
                replace = [exp.alias_(_rendered(exp.column(c, table=self.alias or None)), c, quoted=True)
                           for c in sorted(self.columns)]
                new.append(exp.Star(replace=replace))
            else:
                new.append(p)
        self.select.set("expressions", new)

    def _mapped(self, target: exp.Expression) -> exp.Expression | None:
        """A string function of one multi-value column in a scan (``tags || 'x'``, ``UPPER(tags)``,
        ``NVL(tags, 'none')``) applies to each value, as Druid maps it: the list of its results (a row
        without values gives the function of NULL). None for anything else (a number-valued function of
        the values is one value per row in Druid, or its error)."""
        if not isinstance(target, _STRING_RESULTS) and anonymous_name(target) not in _STRING_RESULT_NAMES:
            return None
        cols = self._multi_in(target)
        if not cols or len({c.name for c in cols}) != 1:
            return None
        each = exp.to_identifier(_EACH)
        body, alone = target.copy(), target.copy()
        for tree, value in ((body, exp.column(_EACH)), (alone, exp.cast(exp.null(), "VARCHAR"))):
            for node in list(tree.walk()):
                if self.is_multi(node) and not _consumed(node, tree, by_text=False):
                    node.replace(value.copy())
        # a NULL value stays NULL (Druid passes no NULL value to the function); a row without values is
        # the function of NULL (NVL(tags, 'none') is 'none' there)
        per_value = exp.Case(ifs=[exp.If(this=exp.Is(this=exp.column(_EACH), expression=exp.null()),
                                         true=exp.cast(exp.null(), "VARCHAR"))], default=body)
        some = exp.GT(this=call("LEN", cols[0].copy()), expression=exp.Literal.number(0))
        return exp.Case(ifs=[exp.If(this=some, true=call("LIST_TRANSFORM", cols[0].copy(),
                                                             exp.Lambda(this=per_value, expressions=[each])))],
                        default=exp.Array(expressions=[alone]))

    def simplify_ranges(self) -> None:
        """The comparisons of each multi-value column gathered into ranges as Calcite gathers them (so as
        Druid answers: ``tags = 'a' AND tags = 'b'`` is FALSE), in the WHERE clause and the conditions of
        the SELECT list (``FILTER (WHERE …)``, ``CASE WHEN``)."""
        where = self.select.args.get("where")
        if where is not None:
            where.set("this", simplify_ranges(where.this, self.is_multi, self._merged_filter()))
        for holder in self._select_conditions():
            holder.set("this", simplify_ranges(holder.this, self.is_multi))

    def _merged_filter(self) -> exp.Expression | None:
        """The filter of the subquery this block reads, when Calcite merges it with the block's own (a
        plain filtering subquery: no grouping, DISTINCT, LIMIT, window or join)."""
        inner = self.table.this if isinstance(self.table, exp.Subquery) else None
        if not isinstance(inner, exp.Select) or inner.meta.get(_FILTER) is None:
            return None
        if any(inner.args.get(k) for k in ("group", "distinct", "limit", "offset", "joins", "having")) \
                or aggregates(inner) or any(isinstance(n, exp.Window) for n in inner.find_all(exp.Window)):
            return None
        return inner.meta[_FILTER]

    def refuse_windows(self) -> None:
        """Druid 33 has no window over a multi-value column (its windows read rows of single values)."""
        if not any(isinstance(n, exp.Window) for p in self.select.expressions for n in p.walk()):
            return
        for p in self.select.expressions:
            cols = self._multi_in(p)
            if cols:
                raise validation_error(f"Encountered a multi value column [{cols[0].name}]. Window processing does "
                                       "not support MVDs. Consider using UNNEST or MV_TO_ARRAY.")

    def rewrite(self) -> None:
        self.refuse_windows()
        self.simplify_ranges()
        where = self.select.args.get("where")
        if where is not None:  # as Calcite reads it, for a block that reads this one (_merged_filter)
            self.select.meta[_FILTER] = where.this.copy()
        if where is not None:
            self.rewrite_predicates(where)
        self.single_values()
        self.row_null_tests()
        grouped = aggregates(self.select) or bool(self.select.args.get("distinct"))
        if grouped:
            self.split_value_aggregates()
            exploded = self.explode(also=self.also_explode)
            whole = self.columns - exploded
            if whole:  # conditions over the columns the block reads as whole lists
                lists = _Block(self.select, self.table, whole)
                lists.rewrite_conditions()
                lists.count_rows_with_values()
        else:
            self.render_scan()

    def count_rows_with_values(self) -> None:
        """``COUNT(tags)``: the rows whose values are all non-NULL (none of Druid's ``IS NULL``)."""
        for node in list(block_nodes(self.select, self.select)):
            if isinstance(node, exp.Count) and self.is_multi(node.this):
                is_null = self.any_match(exp.Is(this=node.this.copy(), expression=exp.Null()))
                counted = exp.Case(ifs=[exp.If(this=exp.Not(this=exp.paren(is_null)), true=exp.Literal.number(1))])
                node.set("this", counted)


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
EMITS = frozenset({"LEN", "LIST_EXTRACT", "LIST_FILTER", "LIST_HAS_ANY", "TO_JSON"})
