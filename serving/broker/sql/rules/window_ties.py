"""Window functions over rows that tie on the window's ORDER BY, ordered as Druid orders them.

Druid computes a window over its input in the order its grouping left it (ascending by the GROUP BY
keys, NULLs first) and sorts stably by the window's ORDER BY, so rows that tie keep the grouping order;
DuckDB's sort leaves ties in any order, which changes ``ROW_NUMBER``, ``FIRST_VALUE``, ``LAG`` … and
every ``ROWS`` frame. Where the block groups (or reads a subquery that does), the grouping keys break
the ties:

* a ``ROWS`` frame: the keys are appended to the window's ORDER BY (a ROWS frame has no peers to keep);
* otherwise (``RANGE`` and the default frame, where ties are peers of one frame): the order-sensitive
  function gets DuckDB's own ordering argument (``FIRST_VALUE(x ORDER BY <window keys>, <grouping
  keys>)``), which orders values inside the frame without changing it.

Also Druid's check: ``RANK``, ``DENSE_RANK``, ``PERCENT_RANK`` and ``CUME_DIST`` need an ORDER BY.
"""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import validation_error
from serving.broker.sql.translation_context import TranslationContext

_ORDERED_VALUES = (exp.FirstValue, exp.LastValue, exp.NthValue, exp.Lag, exp.Lead, exp.RowNumber, exp.Ntile)
_PEER_BASED = (exp.Rank, exp.DenseRank, exp.PercentRank, exp.CumeDist)
_DONE = "druid_window_ties"


def _definition(window: exp.Window, select: exp.Select | None) -> exp.Window:
    """The window that holds the ORDER BY and frame: ``window`` itself or the named one it uses."""
    name = window.args.get("alias")
    if name is not None and select is not None:
        for w in select.args.get("windows") or []:
            if isinstance(w.this, exp.Identifier) and w.this.name == name.name:
                return w
    return window


def _grouping_keys(select: exp.Select) -> list[exp.Expression]:
    group = select.args.get("group")
    keys: list[exp.Expression] = []
    for e in (group.expressions if group is not None else []):
        if isinstance(e, exp.Literal) and e.is_int:  # GROUP BY 1
            i = int(e.this) - 1
            if not 0 <= i < len(select.expressions):
                return keys
            p = select.expressions[i]
            e = p.this if isinstance(p, exp.Alias) else p
        keys.append(e)
    return keys


def _tie_keys(select: exp.Select) -> list[exp.Expression]:
    """The keys whose order Druid's input has: this block's grouping keys, or those of the subquery it
    reads (as that subquery's output columns, up to the first key it does not output)."""
    if select.args.get("group") is not None:
        return [k.copy() for k in _grouping_keys(select)]
    source = select.args.get("from_")
    inner = source.this if source is not None else None
    if select.args.get("joins") or not isinstance(inner, exp.Subquery) or not isinstance(inner.this, exp.Select):
        return []
    sub = inner.this
    outputs = {(p.this if isinstance(p, exp.Alias) else p).sql(): p.alias_or_name for p in sub.expressions}
    keys = []
    for k in _grouping_keys(sub):
        name = outputs.get(k.sql())
        if not name:
            break
        keys.append(exp.column(name, table=inner.alias or None, quoted=True))
    return keys


def window_ties(node: exp.Expression, _ctx: TranslationContext) -> exp.Expression:
    if not isinstance(node, exp.Window) or node.meta.get(_DONE) or not isinstance(node.parent_select, exp.Select):
        return node
    if isinstance(node.this, exp.Identifier):  # a named window's definition, not a use
        return node
    node.meta[_DONE] = True
    select = node.parent_select
    definition = _definition(node, select)
    order = definition.args.get("order")
    ordered = list(order.expressions) if order is not None else []
    fn = node.this
    if isinstance(fn, _PEER_BASED) and not ordered:
        raise validation_error(f"{fn.sql_name()} requires ORDER BY clause in window specification "
                               "(RANK or DENSE_RANK functions require ORDER BY clause in window specification)")
    if isinstance(fn, _PEER_BASED):
        return node
    present = {o.this.sql() for o in ordered}
    ties = [k for k in _tie_keys(select) if k.sql() not in present]
    if not ties:
        return node
    extra = [exp.Ordered(this=k, desc=False, nulls_first=True) for k in ties]
    spec = definition.args.get("spec")
    if spec is not None and str(spec.args.get("kind") or "").upper() == "ROWS":
        if not definition.meta.get(_DONE + "_rows"):
            definition.meta[_DONE + "_rows"] = True
            definition.set("order", exp.Order(expressions=[o.copy() for o in ordered] + extra))
        return node
    if isinstance(fn, _ORDERED_VALUES):
        keys = [o.copy() for o in ordered] + extra
        if isinstance(fn, exp.Lag | exp.Lead):  # the ordering wraps the last argument given
            last = next(a for a in ("default", "offset", "this") if fn.args.get(a) is not None)
            fn.set(last, exp.Order(this=fn.args[last].copy(), expressions=keys))
        elif isinstance(fn, exp.RowNumber):
            fn.set("this", exp.Order(expressions=keys))
        else:
            fn.set("this", exp.Order(this=fn.this.copy(), expressions=keys))
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = window_ties
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (exp.Window,)
