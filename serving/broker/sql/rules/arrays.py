"""Druid's multi-value (``MV_*``) and array (``ARRAY_*``) functions on DuckDB lists.

A multi-value string column is a list of strings here (docs/druid-sql.md), so both families map to
DuckDB's list functions; Druid's 0-based offsets become DuckDB's 1-based positions, and a position
that does not exist gives NULL.

| Druid | DuckDB |
| --- | --- |
| ``MV_LENGTH``/``ARRAY_LENGTH(a)`` | ``len(a)`` |
| ``MV_OFFSET``/``ARRAY_OFFSET(a, i)``, ``MV_ORDINAL``/``ARRAY_ORDINAL(a, i)`` | ``list_extract(a, i + 1)`` / ``(a, i)`` |
| ``MV_OFFSET_OF``/``ARRAY_OFFSET_OF(a, v)``, ``…ORDINAL_OF`` | ``list_position(a, v) - 1`` / ``list_position`` |
| ``MV_CONTAINS``/``ARRAY_CONTAINS(a, v or array)`` | ``list_has_all(a, [v])`` |
| ``MV_OVERLAP``/``ARRAY_OVERLAP(a, b)`` | ``list_has_any`` |
| ``MV_TO_STRING``/``ARRAY_TO_STRING(a, sep)`` | ``array_to_string`` |
| ``STRING_TO_MV``/``STRING_TO_ARRAY(s, sep)`` | ``string_split_regex`` (``sep`` a regular expression, RE2 syntax), trailing empty strings dropped as Java's ``split`` does |
| ``MV_TO_ARRAY(a)`` | ``a`` |
| ``MV_APPEND``/``ARRAY_APPEND``, ``…PREPEND``, ``…CONCAT``, ``…SLICE(a, s, e)`` | ``list_append`` … ``list_resize(list_slice(a, s + 1, e), e - s)`` (padded with NULLs as Java's ``copyOfRange``) |
| ``MV_FILTER_ONLY(a, ARRAY[…])``, ``MV_FILTER_NONE`` | ``list_filter`` with ``list_contains`` |
| ``ARRAY_AGG(expr[, size])``, ``ARRAY_AGG(DISTINCT expr)``, ``ARRAY_CONCAT_AGG`` | ``list``, ``list(DISTINCT …)``, ``flatten(list(…))`` |
"""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import ARRAY_NODES as TYPED
from serving.broker.sql.rules import (
    LIST_VALUED,
    MULTI_VALUE,
    anonymous_name,
    concatenated_arrays,
    joined_elements,
    values_or_null,
)
from serving.broker.sql.timeexpr import call, to_millis
from serving.broker.sql.translation_context import TranslationContext
from serving.broker.sql.type_rules import druid_type, is_timestamp

_ARITY: dict[str, tuple[int, ...]] = {
    "LENGTH": (1,), "OFFSET": (2,), "ORDINAL": (2,), "OFFSET_OF": (2,), "ORDINAL_OF": (2,), "CONTAINS": (2,),
    "OVERLAP": (2,), "TO_STRING": (2,), "TO_ARRAY": (1,), "APPEND": (2,), "PREPEND": (2,), "CONCAT": (2,),
    "SLICE": (2, 3), "FILTER_ONLY": (2,), "FILTER_NONE": (2,),
}
FUNCTIONS = frozenset({f"MV_{k}" for k in _ARITY} | {f"ARRAY_{k}" for k in _ARITY if k not in ("TO_ARRAY",)}
                      | {"STRING_TO_MV", "STRING_TO_ARRAY", "ARRAY_CONCAT_AGG", "ARRAY_TO_MV", "SCALAR_IN_ARRAY"})
_VAR = "__array_value"
_LIST = "druid_list"  # meta key: a node this rule wrote that is a list
#: The functions of this rule whose result is an array (or a multi-value string, a list here).

def _anonymous(node: exp.Expression) -> exp.Expression:
    """A typed array node as the anonymous call of its Druid name."""
    args: list[exp.Expression] = []
    for key in node.arg_types:
        v = node.args.get(key)
        if isinstance(v, list):
            args += [x for x in v if isinstance(x, exp.Expression)]
        elif isinstance(v, exp.Expression):
            args.append(v)
    return call(TYPED[type(node)], *args)


def _plus(e: exp.Expression, n: int) -> exp.Expression:
    return exp.paren(exp.Add(this=exp.cast(e, exp.DataType.build("BIGINT")), expression=exp.Literal.number(n)))


def _is_list(e: exp.Expression) -> bool:
    """Whether ``e`` is an array here: a literal array, a column typed ARRAY, or what this rule wrote."""
    return isinstance(e, exp.Array) or druid_type(e) == "ARRAY" or bool(e.meta.get(_LIST))


def _as_list(e: exp.Expression) -> exp.Expression:
    """A scalar where an array may stand (``ARRAY_CONTAINS(a, 'x')``) as the array of it."""
    return e if _is_list(e) else exp.Array(expressions=[e])


def _values(e: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    """An argument where Druid expects an array or multi-value string: a single-valued STRING is the
    array of its one value there (NULL stays NULL), as Druid reads a plain string column. A multi-value
    column (typed VARCHAR in the catalog, a list in DuckDB) is already a list."""
    if druid_type(e) != "STRING" or e.meta.get(_LIST):
        return e
    if isinstance(e, exp.Column) and (e.meta.get(MULTI_VALUE) or e.name in _multi_value_columns(ctx)):
        return e
    missing = exp.If(this=exp.Is(this=e.copy(), expression=exp.null()), true=exp.cast(exp.null(), "VARCHAR[]"))
    return exp.Case(ifs=[missing], default=exp.Array(expressions=[e.copy()]))


def is_multi_value_column(e: exp.Expression, ctx: TranslationContext) -> bool:
    return (isinstance(e, exp.Column) and druid_type(e) == "STRING" and not e.meta.get(_MV_VALUES)
            and bool(e.meta.get(MULTI_VALUE) or e.name in _multi_value_columns(ctx)))


def _multi_value_columns(ctx: TranslationContext) -> set[str]:
    """The multi-value columns of the catalog's datasources (built once per catalog, not per argument)."""
    return ctx.catalog.memo(("multi_value_columns",), lambda: {
        c.name for cols in ctx.catalog.datasources.values() for c in cols if c.multi_value})


def _filter(values: exp.Expression, keep: exp.Expression, negate: bool) -> exp.Expression:
    test: exp.Expression = call("LIST_CONTAINS", keep, exp.column(_VAR))
    if negate:  # a NULL value is in no list of values: MV_FILTER_NONE keeps it, as Druid does
        test = exp.Not(this=exp.Coalesce(this=test, expressions=[exp.false()]))
    lam = exp.Lambda(this=test, expressions=[exp.to_identifier(_VAR)])
    return call("LIST_FILTER", values, lam)


def _null_if_null(arg: exp.Expression, result: exp.Expression) -> exp.Expression:
    return exp.Case(ifs=[exp.If(this=exp.Is(this=arg.copy(), expression=exp.null()), true=exp.null())], default=result)


def _split(text: exp.Expression, separator: exp.Expression) -> exp.Expression:
    """Java's ``String.split(regex)``: a regular expression separator, trailing empty strings dropped."""
    trailing = exp.DPipe(this=exp.DPipe(this=exp.Literal.string("(?:"), expression=separator.copy()),
                         expression=exp.Literal.string(")+$"))
    stripped = call("REGEXP_REPLACE", text, trailing, exp.Literal.string(""))
    return call("STRING_SPLIT_REGEX", stripped, separator)


def _slice(a: exp.Expression, start: exp.Expression, end: exp.Expression | None) -> exp.Expression:
    """``ARRAY_SLICE``: Java's ``Arrays.copyOfRange`` (an end past the array pads with NULLs); NULL when the
    start is negative, past the array or past the end."""
    length = call("LEN", a.copy())
    stop = end if end is not None else length.copy()
    bad = exp.or_(exp.LT(this=start.copy(), expression=exp.Literal.number(0)),
                  exp.GT(this=start.copy(), expression=length),
                  exp.GT(this=start.copy(), expression=stop.copy()))
    size = exp.paren(exp.Sub(this=stop.copy(), expression=start.copy()), copy=False)
    sliced = call("LIST_RESIZE", call("LIST_SLICE", a, _plus(start, 1), stop), size)
    return exp.Case(ifs=[exp.If(this=bad, true=exp.null())], default=sliced)


def element_kind(node: exp.Expression) -> str | None:
    """LONG, DOUBLE or STRING: the element type of an annotated array (a multi-value string's: STRING)."""
    t = getattr(node, "type", None)
    if isinstance(t, exp.DataType) and t.is_type(exp.DataType.Type.ARRAY) and t.expressions:
        t = t.expressions[0]
    if not isinstance(t, exp.DataType):
        return None
    if t.is_type(*exp.DataType.INTEGER_TYPES, exp.DataType.Type.BOOLEAN):  # Druid's booleans are longs
        return "LONG"
    if t.is_type(*exp.DataType.REAL_TYPES):
        return "DOUBLE"
    if t.is_type(*exp.DataType.TEMPORAL_TYPES):
        return "TIMESTAMP"  # held as millis (rules/implicit_casts.py: Druid's arrays have no TIMESTAMP)
    return "STRING" if t.is_type(*exp.DataType.TEXT_TYPES) else None


def _is_array_typed(node: exp.Expression) -> bool:
    """An ARRAY by its annotated type (an ARRAY column, ``JSON_VALUE(… RETURNING t ARRAY)``), not a scalar
    a function reads as a one-value array."""
    t = getattr(node, "type", None)
    return isinstance(t, exp.DataType) and t.is_type(exp.DataType.Type.ARRAY)


def _as_elements_of(array: exp.Expression, needle: exp.Expression) -> exp.Expression:
    """The value (or array of values) sought in ``array``, converted to its element type as Druid does:
    ``ARRAY_CONTAINS(a_str, 1)`` looks for ``'1'``, ``ARRAY_CONTAINS(a_long, '1')`` for 1 (DuckDB refuses
    both: it cannot pick the list's type)."""
    want, have = element_kind(array), element_kind(needle)
    if want in ("LONG", "TIMESTAMP") and is_timestamp(needle):  # arrays hold a TIMESTAMP as its millis (ARRAY_AGG(__time))
        return to_millis(needle)
    if want in (None, "TIMESTAMP") or have is None or want == have or (want != "STRING" and have != "STRING"):
        return needle
    listed = isinstance(getattr(needle, "type", None), exp.DataType) and needle.type.is_type(exp.DataType.Type.ARRAY)
    target = {"STRING": "VARCHAR", "LONG": "BIGINT", "DOUBLE": "DOUBLE"}[want] + ("[]" if listed else "")
    to = exp.DataType.build(target, dialect="duckdb")
    return exp.cast(needle, to) if want == "STRING" else exp.TryCast(this=needle, to=to)


_MV_VALUES = "druid_mv_values"  # meta key: the list of a multi-value string's values (MV_TO_ARRAY)


def arrays(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if isinstance(node, exp.ArrayAgg):
        return node  # DuckDB's ARRAY_AGG (a list, NULLs kept) has Druid's meaning; its size: aggregate_sizes
    if isinstance(node, exp.Unnest) and len(node.expressions) == 1 and is_multi_value_column(node.expressions[0], ctx):
        # Druid unnests arrays only: a multi-value column goes through MV_TO_ARRAY first
        raise validation_error("Cannot apply 'UNNEST' to arguments of type 'UNNEST(<VARCHAR>)' "
                               "(a multi-value column: UNNEST(MV_TO_ARRAY(column)))")
    if isinstance(node, exp.Unnest) and len(node.expressions) == 1 and node.expressions[0].meta.get(_MV_VALUES):
        # a multi-value row without values unnests to one NULL, as Druid reads it (one null value)
        node.set("expressions", [values_or_null(node.expressions[0])])
        return node
    if type(node) in TYPED:
        node = _anonymous(node)
    name = anonymous_name(node)
    if name is None or name not in FUNCTIONS:
        return node
    out = _translate(name, list(node.expressions), ctx)
    if name in LIST_VALUED:
        out.meta[_LIST] = True
    if name == "MV_TO_ARRAY":
        out.meta[_MV_VALUES] = True
    return out


def _translate(name: str, args: list[exp.Expression], ctx: TranslationContext) -> exp.Expression:
    if name == "ARRAY_CONCAT_AGG":
        if len(args) not in (1, 2):
            raise validation_error("ARRAY_CONCAT_AGG takes 1 or 2 arguments")
        return concatenated_arrays(args[0], distinct=False)
    if name == "ARRAY_TO_MV":  # a multi-value string is a list of strings here
        if len(args) != 1:
            raise validation_error("ARRAY_TO_MV takes 1 argument")
        a = args[0]
        if not _is_list(a):  # a scalar is a one-value multi-value string; a NULL one has no values
            return exp.Case(ifs=[exp.If(this=exp.Is(this=a.copy(), expression=exp.null()),
                                        true=exp.cast(exp.null(), exp.DataType.build("VARCHAR[]", dialect="duckdb")))],
                            default=exp.Array(expressions=[exp.cast(a, "VARCHAR")]))
        return call("LIST_TRANSFORM", a, exp.Lambda(this=exp.cast(exp.column(_VAR), "VARCHAR"),
                                                    expressions=[exp.to_identifier(_VAR)]))
    if name == "SCALAR_IN_ARRAY":
        if len(args) != 2:
            raise validation_error("SCALAR_IN_ARRAY takes 2 arguments")
        return call("LIST_CONTAINS", _as_list(args[1]), _as_elements_of(args[1], args[0]))
    if name in ("STRING_TO_MV", "STRING_TO_ARRAY"):
        if len(args) != 2:
            raise validation_error(f"{name} takes 2 arguments")
        return _split(args[0], args[1])
    op = name.split("_", 1)[1]
    if len(args) not in _ARITY[op]:
        raise validation_error(f"{name} takes {' or '.join(map(str, _ARITY[op]))} arguments")
    mv = name.startswith("MV_")
    if op in ("OFFSET_OF", "ORDINAL_OF"):
        want, have = element_kind(args[0]), element_kind(args[1])
        if want in ("LONG", "TIMESTAMP") and is_timestamp(args[1]):  # ARRAY_AGG(__time) holds millis
            args[1] = to_millis(args[1])
        elif _is_array_typed(args[0]) and want not in (None, "TIMESTAMP") and have not in (None, want):
            # Druid looks a value up without converting it: a number is at no position of a string array,
            # nor an integer of a DOUBLE array
            return exp.cast(exp.null(), "INTEGER")
        elif mv and not _is_array_typed(args[0]) and have in ("LONG", "DOUBLE"):
            # nor is a number at any position of a multi-value string (Druid 33: MV_OFFSET_OF(…['1','0'], 0) is NULL)
            return exp.cast(exp.null(), "INTEGER")
    if op in ("CONTAINS", "OVERLAP", "FILTER_ONLY", "FILTER_NONE"):
        args[1] = _as_elements_of(args[0], args[1])
    # the value added takes the array's element type: ARRAY_PREPEND(9, a_str) adds '9'; MV_APPEND does so
    # for an array only (MV_APPEND('Z', c_long) fails in Druid 33, ARRAY_APPEND('Z', c_long) is ['Z', '0'])
    if op == "APPEND" and (not mv or _is_array_typed(args[0])):
        args[1] = _as_elements_of(args[0], args[1])
    if op == "PREPEND" and (not mv or _is_array_typed(args[1])):
        args[0] = _as_elements_of(args[1], args[0])
    array_positions = {"PREPEND": (1,), "CONCAT": (0, 1), "OVERLAP": (0, 1)}.get(op, (0,))
    for i in array_positions:
        args[i] = _values(args[i], ctx)
    a = args[0]
    if op == "LENGTH":
        return call("LEN", a)
    if op == "OFFSET":
        return call("LIST_EXTRACT", a, _plus(args[1], 1))
    if op == "ORDINAL":
        return call("LIST_EXTRACT", a, args[1])
    if op == "OFFSET_OF":
        return exp.Sub(this=call("LIST_POSITION", a, args[1]), expression=exp.Literal.number(1))
    if op == "ORDINAL_OF":
        return call("LIST_POSITION", a, args[1])
    if op in ("CONTAINS", "OVERLAP"):
        if op == "CONTAINS" and not _is_list(args[1]):
            # one value. NULL is in no array (DuckDB's list_has_all would say yes), but a multi-value row
            # without values is Druid's [NULL]
            missing = exp.Is(this=args[1].copy(), expression=exp.null())
            absent = exp.Is(this=a.copy(), expression=exp.null()) if mv else exp.false()
            test: exp.Expression = exp.Case(ifs=[exp.If(this=missing, true=absent)],
                                            default=call("LIST_CONTAINS", a, args[1]))
            if not mv:
                return _null_if_null(a, test)
        else:
            test = call("LIST_HAS_ALL" if op == "CONTAINS" else "LIST_HAS_ANY", a, _as_list(args[1]))
        # a row without values: MV_ functions answer false; ARRAY_CONTAINS NULL, ARRAY_OVERLAP NULL for its
        # first array, false for its second
        if mv:
            return exp.Coalesce(this=test, expressions=[exp.false()])
        return _null_if_null(a, exp.Coalesce(this=test, expressions=[exp.false()])) if op == "OVERLAP" else test
    if op == "TO_STRING":
        return joined_elements(a, args[1])
    if op == "TO_ARRAY":
        return a
    # a NULL array (or a row without values) stays NULL: DuckDB's list functions would start a new list
    if op == "APPEND":
        return _null_if_null(args[0], call("LIST_APPEND", a, args[1]))
    if op == "PREPEND":  # MV_PREPEND(value, array)
        return _null_if_null(args[1], call("LIST_PREPEND", a, args[1]))
    if op == "CONCAT":
        return _null_if_null(args[1], _null_if_null(args[0], call("LIST_CONCAT", a, args[1])))
    if op == "SLICE":
        return _slice(a, args[1], args[2] if len(args) == 3 else None)
    if op in ("FILTER_ONLY", "FILTER_NONE"):
        return _filter(a, _as_list(args[1]), negate=op == "FILTER_NONE")
    raise validation_error(f"{name} is not supported")  # pragma: no cover - _ARITY lists every op


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = arrays
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (*TYPED, exp.ArrayAgg, exp.Unnest)
ACCEPTS = FUNCTIONS
EMITS = frozenset({"ARRAY_TO_STRING", "FLATTEN", "LEN", "LIST", "LIST_APPEND", "LIST_CONCAT", "LIST_CONTAINS", "LIST_EXTRACT", "LIST_FILTER", "LIST_HAS_ALL", "LIST_HAS_ANY", "LIST_POSITION", "LIST_PREPEND", "LIST_RESIZE", "LIST_SLICE", "LIST_TRANSFORM", "REGEXP_REPLACE", "STRING_SPLIT_REGEX"})
