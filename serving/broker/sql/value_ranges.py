"""Calcite's range simplification of a condition, as Druid plans one over a multi-value column.

Before a filter reaches Druid's native layer, Calcite (``RexSimplify``) gathers the comparisons of one
column with literals (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``, ``IN``, ``BETWEEN``, ``IS [NOT] NULL``,
and their ``NOT``) that sit side by side in an AND or an OR into one set of ranges (its ``Sarg``):
an AND intersects them, an OR unites them, a ``NOT`` is pushed down to the comparisons and turns their
ranges over; an AND's ranges also decide the comparisons of that column inside its other terms (``tags =
'a' AND (tags = 'b' OR country = 'DE')`` is ``tags = 'a' AND country = 'DE'``). Druid then matches each
resulting range as one filter: a row matches when *any one* of its values is in the range.

Calcite reasons as if the column held one value, so over a multi-value column the answer changes, and
Druid 33 answers so: ``tags = 'a' AND tags = 'b'`` is FALSE (no row, although ``['a', 'b']`` has both),
``tags = 'a' AND tags <> 'b'`` is ``tags = 'a'``, ``NOT (tags = 'a' AND tags = 'b')`` is ``tags IS NOT
NULL``, ``tags BETWEEN 'b' AND 'c' AND tags <> 'c'`` is one value in ``['b', 'c')``, and ``tags < 'b' OR
tags > 'c'`` is ``NOT (tags BETWEEN 'b' AND 'c')`` (the form with fewer ranges). This module rewrites a
condition the same way, for the multi-value columns only (over a single value the rewrite changes
nothing); ``rules/multi_value.py`` calls it and then matches each predicate over the values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import portion
from sqlglot import exp

#: a meta key: this AND of two bounds is one range, matched against each value as one predicate
ONE_RANGE = "druid_one_range"

_FULL = portion.open(-portion.inf, portion.inf)
# a NULL value against a comparison is unknown; against IS NULL true, IS NOT NULL false
_FALSE, _UNKNOWN, _TRUE = 0, 1, 2
_FLIPPED = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ, exp.NEQ: exp.NEQ}


@dataclass
class _Term:
    """The values of one column a group of comparisons admits, and what it says of a NULL."""

    column: exp.Column
    ranges: portion.Interval
    nulls: int
    turned: bool = False  # a NOT turned it over (Calcite writes the complement: NOT (x < 'b') is x >= 'b')

    def negated(self) -> _Term:
        nulls = {_TRUE: _FALSE, _FALSE: _TRUE}.get(self.nulls, _UNKNOWN)
        return _Term(self.column, _FULL - self.ranges, nulls, turned=not self.turned)


@dataclass
class _Junction:
    kind: type[exp.And] | type[exp.Or]
    parts: list[_Node] = field(default_factory=list)


_Node = _Term | _Junction | exp.Expression


def simplify_ranges(condition: exp.Expression, is_multi: Callable[[exp.Expression], bool],
                    given: exp.Expression | None = None) -> exp.Expression:
    """``condition`` with the comparisons of each multi-value column gathered as Calcite gathers them;
    ``given``, the filter of the subquery the condition reads (Calcite merges the two filters into one),
    narrows its comparisons of the same columns (by name)."""
    if not any(is_multi(c) for c in condition.find_all(exp.Column)):
        return condition
    tree = _read(condition, is_multi, negate=False)
    known: dict[str, _Term] = {}
    if given is not None:
        names = {_column_key(t.column) for t in _terms(tree)}
        outer = _read(given, lambda n: isinstance(n, exp.Column) and n.name in names, negate=False)
        conjuncts = outer.parts if isinstance(outer, _Junction) and outer.kind is exp.And else [outer]
        by_column: dict[str, list[_Term]] = {}
        for t in conjuncts:
            if isinstance(t, _Term):
                by_column.setdefault(_column_key(t.column), []).append(t)
        known = {k: _merge(ts, exp.And) for k, ts in by_column.items()}
        tree = _narrowed(tree, known)
    if not known and not _worth_it(tree):
        return condition
    # narrowed again after the simplification: an OR of the column's comparisons became one range
    return _emit(_narrowed(_simplify(tree, known), known))


def _narrowed(tree: _Node, known: dict[str, _Term]) -> _Node:
    """The conjuncts of ``tree`` intersected with what the merged filter already requires of the column."""
    def narrow(t: _Node) -> _Node:
        g = known.get(_column_key(t.column)) if isinstance(t, _Term) else None
        if not isinstance(t, _Term) or g is None or g.nulls == _TRUE:
            return t
        return _Term(t.column, t.ranges & g.ranges, min(t.nulls, g.nulls))

    if isinstance(tree, _Junction) and tree.kind is exp.And:
        return _Junction(exp.And, [narrow(p) for p in tree.parts])
    return narrow(tree)


def _column_key(column: exp.Column) -> str:
    return column.name


def _worth_it(node: _Node) -> bool:
    """Only where Calcite would change something: a junction with two comparisons of one column, or a
    range a NOT turned over."""
    if isinstance(node, _Term):
        return node.turned
    if not isinstance(node, _Junction):
        return False
    keys = [_column_key(p.column) for p in node.parts if isinstance(p, _Term)]
    nested = [_column_key(t.column) for p in node.parts if isinstance(p, _Junction) for t in _terms(p)]
    return len(keys) != len(set(keys)) or bool(set(keys) & set(nested)) or any(_worth_it(p) for p in node.parts)


def _terms(node: _Node) -> list[_Term]:
    if isinstance(node, _Term):
        return [node]
    if isinstance(node, _Junction):
        return [t for p in node.parts for t in _terms(p)]
    return []


# ---- reading the condition ---------------------------------------------------------------------------

def _read(node: exp.Expression, is_multi: Callable[[exp.Expression], bool], *, negate: bool) -> _Node:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Not):
        return _read(node.this, is_multi, negate=not negate)
    if isinstance(node, exp.And | exp.Or):
        kind: type[exp.And] | type[exp.Or] = node.__class__
        if negate:
            kind = exp.Or if kind is exp.And else exp.And
        parts: list[_Node] = []
        for side in (node.this, node.expression):
            part = _read(side, is_multi, negate=negate)
            if isinstance(part, _Junction) and part.kind is kind:
                parts.extend(part.parts)
            else:
                parts.append(part)
        return _Junction(kind, parts)
    term = _comparison(node, is_multi)
    if term is not None:
        return term.negated() if negate else term
    return exp.Not(this=exp.paren(node.copy())) if negate else node.copy()


def _string(node: exp.Expression | None) -> str | None:
    return str(node.this) if isinstance(node, exp.Literal) and node.is_string else None


def _comparison(node: exp.Expression, is_multi: Callable[[exp.Expression], bool]) -> _Term | None:
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null) and is_multi(node.this):
        return _Term(node.this.copy(), portion.empty(), _TRUE)
    if isinstance(node, exp.In) and is_multi(node.this) and not node.args.get("query"):
        values = [_string(v) for v in node.expressions]
        if not values or any(v is None for v in values):
            return None
        ranges = portion.empty()
        for v in values:
            ranges |= portion.singleton(v)
        return _Term(node.this.copy(), ranges, _UNKNOWN)
    if isinstance(node, exp.Between) and is_multi(node.this):
        low, high = _string(node.args.get("low")), _string(node.args.get("high"))
        if low is None or high is None:
            return None
        return _Term(node.this.copy(), portion.closed(low, high) if low <= high else portion.empty(), _UNKNOWN)
    kind = type(node)
    if kind not in _FLIPPED:
        return None
    left, right = node.this, node.expression
    if is_multi(right) and _string(left) is not None:
        left, right, kind = right, left, _FLIPPED[kind]
    value = _string(right)
    if not is_multi(left) or value is None:
        return None
    ranges = {
        exp.EQ: portion.singleton(value),
        exp.NEQ: _FULL - portion.singleton(value),
        exp.LT: portion.open(-portion.inf, value),
        exp.LTE: portion.openclosed(-portion.inf, value),
        exp.GT: portion.open(value, portion.inf),
        exp.GTE: portion.closedopen(value, portion.inf),
    }[kind]
    return _Term(left.copy(), ranges, _UNKNOWN)


# ---- simplifying ---------------------------------------------------------------------------------------

def _merge(terms: list[_Term], kind: type[exp.And] | type[exp.Or]) -> _Term:
    out = terms[0]
    for t in terms[1:]:
        if kind is exp.And:
            out = _Term(out.column, out.ranges & t.ranges, min(out.nulls, t.nulls))
        else:
            out = _Term(out.column, out.ranges | t.ranges, max(out.nulls, t.nulls))
    return out


def _decided(term: _Term, known: dict[str, _Term]) -> bool | None:
    """What a comparison inside an AND's other term is, given the ranges the AND already requires."""
    given = known.get(_column_key(term.column))
    if given is None or given.nulls == _TRUE:
        return None
    if (given.ranges & term.ranges).empty:
        return False
    if given.ranges in term.ranges:
        return True
    return None


def _simplify(node: _Node, known: dict[str, _Term]) -> _Node:
    if isinstance(node, _Term):
        decided = _decided(node, known)
        return node if decided is None else (exp.true() if decided else exp.false())
    if not isinstance(node, _Junction):
        return node
    direct: dict[str, list[_Term]] = {}
    for p in node.parts:
        if isinstance(p, _Term):
            direct.setdefault(_column_key(p.column), []).append(p)
    inner = dict(known)
    if node.kind is exp.And:
        inner.update({k: _merge(ts, exp.And) for k, ts in direct.items()})
    # a comparison is decided by what the enclosing ANDs require, never by its own siblings
    parts = [_simplify(p, known if isinstance(p, _Term) else inner) for p in node.parts]
    grouped: dict[str, list[_Term]] = {}
    others: list[_Node] = []
    for p in parts:
        if isinstance(p, _Term):
            grouped.setdefault(_column_key(p.column), []).append(p)
        elif isinstance(p, _Junction) and p.kind is node.kind:
            others.extend(p.parts)
        else:
            others.append(p)
    merged: list[_Node] = [_merge(ts, node.kind) for ts in grouped.values()]
    out: list[_Node] = []
    absorbing, neutral = (exp.false(), exp.true()) if node.kind is exp.And else (exp.true(), exp.false())
    for p in merged + others:
        if isinstance(p, exp.Boolean):
            if p.this == absorbing.this:
                return absorbing
            continue
        if isinstance(p, _Term) and _constant(p) is not None:
            value = _constant(p)
            if value == absorbing.this:
                return absorbing
            if value == neutral.this:
                continue
        out.append(p)
    if not out:
        return neutral
    return out[0] if len(out) == 1 else _Junction(node.kind, out)


def _constant(term: _Term) -> bool | None:
    if term.ranges.empty and term.nulls != _TRUE:
        return False
    if term.ranges == _FULL and term.nulls == _TRUE:
        return True
    return None


# ---- writing it back -----------------------------------------------------------------------------------

def _emit(node: _Node) -> exp.Expression:
    if isinstance(node, _Junction):
        parts = [exp.paren(_emit(p), copy=False) for p in node.parts]
        return exp.and_(*parts, copy=False) if node.kind is exp.And else exp.or_(*parts, copy=False)
    if isinstance(node, _Term):
        return _emit_term(node)
    return node


def _emit_term(term: _Term) -> exp.Expression:
    col = term.column
    constant = _constant(term)
    if constant is not None:
        return exp.true() if constant else exp.false()
    alternatives: list[exp.Expression] = []
    if term.nulls == _TRUE:
        alternatives.append(exp.Is(this=col.copy(), expression=exp.Null()))
    if term.ranges == _FULL:
        values: exp.Expression | None = exp.Not(this=exp.Is(this=col.copy(), expression=exp.Null()))
    elif term.ranges.empty:
        values = None
    else:
        complement = _FULL - term.ranges
        negate = _points(complement) or (not _points(term.ranges) and len(complement) < len(term.ranges))
        values = _ranges(col, complement if negate else term.ranges)
        if negate:
            values = exp.Not(this=exp.paren(values, copy=False))
    if values is not None:
        alternatives.append(values)
    return alternatives[0] if len(alternatives) == 1 else exp.or_(*alternatives, copy=False)


def _points(ranges: portion.Interval) -> bool:
    return not ranges.empty and all(a.lower == a.upper for a in ranges)


def _ranges(col: exp.Column, ranges: portion.Interval) -> exp.Expression:
    points = [exp.Literal.string(a.lower) for a in ranges if a.lower == a.upper]
    out: list[exp.Expression] = []
    if len(points) == 1:
        out.append(exp.EQ(this=col.copy(), expression=points[0]))
    elif points:
        out.append(exp.In(this=col.copy(), expressions=points))
    for a in ranges:
        if a.lower != a.upper:
            out.append(_range(col, a))
    return out[0] if len(out) == 1 else exp.paren(exp.or_(*out, copy=False), copy=False)


def _range(col: exp.Column, a: portion.Interval) -> exp.Expression:
    bounds: list[exp.Expression] = []
    if a.lower != -portion.inf:
        kind = exp.GTE if a.left == portion.CLOSED else exp.GT
        bounds.append(kind(this=col.copy(), expression=exp.Literal.string(a.lower)))
    if a.upper != portion.inf:
        kind = exp.LTE if a.right == portion.CLOSED else exp.LT
        bounds.append(kind(this=col.copy(), expression=exp.Literal.string(a.upper)))
    if len(bounds) == 1:
        return bounds[0]
    if a.left == portion.CLOSED and a.right == portion.CLOSED:
        return exp.Between(this=col.copy(), low=exp.Literal.string(a.lower), high=exp.Literal.string(a.upper))
    both = exp.And(this=bounds[0], expression=bounds[1])
    both.meta[ONE_RANGE] = True  # one range: matched against each value whole (rules/multi_value.py)
    return exp.paren(both, copy=False)
