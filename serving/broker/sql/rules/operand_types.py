"""Druid's (Calcite's) operand type checks, which DuckDB would not make: it casts an ARRAY or a JSON
value to text where a string is expected, where Druid refuses the statement (400, "Cannot apply
'LENGTH' to arguments of type 'LENGTH(<BIGINT ARRAY>)'"). Refused here, on the annotated tree:

* string functions (``LENGTH``, ``UPPER``, ``TRIM``, ``LIKE``, ``SUBSTRING``, ``REPLACE``, ``LPAD``,
  ``REGEXP_*``, ``CONTAINS_STRING``, ``PARSE_JSON`` …), Druid's scalar ones (``TIME_PARSE``,
  ``PARSE_LONG``, ``IPV4_*``, ``HUMAN_READABLE_*``, ``TIMESTAMP_TO_MILLIS``) and numeric ones (``ABS``,
  ``ROUND``, ``LN``, ``POWER``, trigonometry …) and arithmetic given an ARRAY or a ``COMPLEX<json>``
  operand (``JSON_VALUE(… RETURNING <type> ARRAY)`` is an ARRAY);
* comparisons of a ``COMPLEX<json>`` value (only ``=`` and ``<>`` between two of them are fine), and of
  an ARRAY with anything that is not an array (or NULL);
* ``SUM``, ``AVG`` and ``APPROX_COUNT_DISTINCT`` of an ARRAY or a ``COMPLEX<json>`` value;
* ``PARSE_JSON`` / ``TRY_PARSE_JSON`` of anything but a string, a ``JSON_OBJECT`` key that is not a
  string, and ``IN`` over ``COMPLEX<json>`` values;
* ARRAY values where Druid 33 cannot take them: a join condition or an ``IN (subquery)`` on arrays
  ("Predicate does not support ARRAY types"), ``GREATEST`` / ``LEAST`` of arrays, and ``CAST`` of an
  ARRAY to a scalar type.
"""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.context import TranslationContext
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name, druid_function_name
from serving.broker.sql.type_rules import NUMERIC_FUNCTIONS, is_text, native_array_type

_STRING_FUNCTIONS = (exp.Length, exp.Upper, exp.Lower, exp.Trim, exp.Like, exp.ILike, exp.Substring, exp.Left,
                     exp.Right, exp.Reverse, exp.Repeat, exp.Pad, exp.Replace, exp.StrPosition, exp.RegexpLike,
                     exp.RegexpExtract, exp.RegexpReplace, exp.Initcap, exp.ParseJSON)
_STRING_NAMES = frozenset({"STRLEN", "BTRIM", "CONTAINS_STRING", "ICONTAINS_STRING", "TRY_PARSE_JSON",
                           # Druid's scalar functions of one string or number value
                           "TIME_PARSE", "PARSE_LONG", "IPV4_MATCH", "IPV4_PARSE", "IPV4_STRINGIFY",
                           "HUMAN_READABLE_BINARY_BYTE_FORMAT", "HUMAN_READABLE_DECIMAL_BYTE_FORMAT",
                           "HUMAN_READABLE_DECIMAL_FORMAT", "TIMESTAMP_TO_MILLIS", "APPROX_COUNT_DISTINCT_BUILTIN"})
#: array and multi-value functions, which take no ``COMPLEX<json>`` value
_ARRAY_FUNCTIONS = frozenset({f"{p}_{op}" for p in ("MV", "ARRAY") for op in (
    "LENGTH", "OFFSET", "ORDINAL", "OFFSET_OF", "ORDINAL_OF", "CONTAINS", "OVERLAP", "TO_STRING", "APPEND", "PREPEND",
    "CONCAT", "SLICE", "FILTER_ONLY", "FILTER_NONE", "TO_ARRAY", "TO_MV")} | {"STRING_TO_ARRAY", "STRING_TO_MV"})
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between)
_AGGREGATES = (exp.Sum, exp.Avg, exp.ApproxDistinct)
_OPERATOR_NAMES = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "MOD", exp.Like: "LIKE",
                   exp.ILike: "ILIKE"}


def _name_of(node: exp.Expression) -> str:
    """Calcite's name for the operator or function (operators have no sql_name in sqlglot)."""
    if type(node) in _OPERATOR_NAMES:
        return _OPERATOR_NAMES[type(node)]
    return node.sql_name() if isinstance(node, exp.Func) else type(node).__name__.upper()


def _kind(node: exp.Expression | None) -> str | None:
    """``ARRAY``, ``JSON``, ``SCALAR`` (any other known type), or None (unknown, or NULL)."""
    t = getattr(node, "type", None)
    if t is None or t.is_type(exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL) or _is_null(node):
        return None
    if t.is_type(exp.DataType.Type.ARRAY):
        return "ARRAY"
    if t.is_type(exp.DataType.Type.JSON):
        return "JSON"
    return "SCALAR"


def _calcite_type(node: exp.Expression) -> str:
    t = getattr(node, "type", None)
    if t is None or t.is_type(exp.DataType.Type.UNKNOWN):
        return "UNKNOWN"
    if t.is_type(exp.DataType.Type.JSON):
        return "COMPLEX<JSON>"
    if t.is_type(exp.DataType.Type.ARRAY):
        inner = t.expressions[0].sql("druid").upper() if t.expressions else "VARCHAR"
        return f"{inner} ARRAY"
    return t.sql("druid").upper()


def _two_tables(node: exp.Expression) -> bool:
    """``t1.a = t2.a``: a comparison of columns of two tables (Druid plans it as a join condition)."""
    sides = [node.this, node.expression]
    return all(isinstance(c, exp.Column) and c.table for c in sides) and sides[0].table != sides[1].table


def _operands(node: exp.Expression) -> list[exp.Expression]:
    return [v for k, v in node.args.items() if isinstance(v, exp.Expression) and k not in ("to",)]


def _refuse(name: str, operands: list[exp.Expression]) -> exp.Expression:
    kinds = ", ".join(f"<{_calcite_type(o)}>" for o in operands)
    raise validation_error(f"Cannot apply '{name}' to arguments of type '{name}({kinds})'")


def _is_null(node: exp.Expression | None) -> bool:
    return isinstance(node, exp.Null) or (isinstance(node, exp.Cast) and isinstance(node.this, exp.Null))


def operand_types(node: exp.Expression, _ctx: TranslationContext) -> exp.Expression:
    name = anonymous_name(node)
    if isinstance(node, exp.ParseJSON) or name == "TRY_PARSE_JSON":  # a string only
        operands = list(node.expressions) if name else [node.this]
        if any(_kind(o) is not None and not is_text(o) for o in operands):
            _refuse(name or "PARSE_JSON", operands)
        return node
    if isinstance(node, exp.JSONObject):
        for kv in node.expressions:
            if isinstance(kv, exp.JSONKeyValue) and _kind(kv.this) is not None and not is_text(kv.this):
                raise validation_error("Invalid JSON_OBJECT: field name must be a STRING")
        return node
    if isinstance(node, exp.Greatest | exp.Least) and any(_kind(o) == "ARRAY" for o in [node.this, *node.expressions]):
        array = next(o for o in [node.this, *node.expressions] if _kind(o) == "ARRAY")
        raise validation_error(f"Function[{node.sql_name().lower()}] does not accept "
                               f"{native_array_type(array)} types")
    if isinstance(node, exp.Cast) and _kind(node.this) == "ARRAY" and not node.to.is_type(exp.DataType.Type.ARRAY):
        raise validation_error(f"Cast function cannot convert value of type {_calcite_type(node.this)} to type "
                               f"{node.to.sql('druid').upper()}")
    if (isinstance(node, exp.In) and node.args.get("query") is not None and _kind(node.this) == "ARRAY") or (
            isinstance(node, exp.EQ) and _kind(node.this) == "ARRAY" and _kind(node.expression) == "ARRAY"
            and (isinstance(node.find_ancestor(exp.Join, exp.Select), exp.Join) or _two_tables(node))):
        raise validation_error("Predicate does not support ARRAY types")
    function = druid_function_name(node)
    arguments = [a for a in node.iter_expressions()] if function else []
    if function in _ARRAY_FUNCTIONS and arguments and _kind(arguments[0]) == "JSON":
        _refuse(function, arguments)
    if function in ("MV_FILTER_ONLY", "MV_FILTER_NONE") and arguments and _kind(arguments[0]) == "ARRAY" \
            and not str(druid_function_name(arguments[0]) or "").startswith(("MV_", "STRING_TO_MV")):
        _refuse(function, arguments)
    if isinstance(node, exp.In) and _kind(node.this) == "JSON":
        raise validation_error(f"Cannot apply 'IN' to arguments of type '<{_calcite_type(node.this)}>'"
                               " (Cannot join on a COMPLEX<json> value)")
    if isinstance(node, _STRING_FUNCTIONS + NUMERIC_FUNCTIONS + _AGGREGATES) or name in _STRING_NAMES:
        operands = list(node.expressions) if name else _operands(node)
        if any(_kind(o) in ("ARRAY", "JSON") for o in operands):
            _refuse(name or _name_of(node), operands)
        return node
    if isinstance(node, _COMPARISONS):
        operands = _operands(node)
        kinds = [_kind(o) for o in operands]
        # COMPLEX<json> values compare for equality with each other only (Druid 33 plans a_nested = a_nested,
        # refuses a_bool = a_nested)
        json_equality = isinstance(node, exp.EQ | exp.NEQ) and all(k in ("JSON", None) for k in kinds)
        if ("JSON" in kinds and not json_equality) or ("ARRAY" in kinds and "SCALAR" in kinds):
            symbol = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
                      exp.Between: "BETWEEN ASYMMETRIC"}[type(node)]
            kinds_text = f" {symbol} ".join(f"<{_calcite_type(o)}>" for o in operands)
            raise validation_error(f"Cannot apply '{symbol}' to arguments of type '{kinds_text}'")
    return node
