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

from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name, druid_function_name
from serving.broker.sql.translation_context import TranslationContext
from serving.broker.sql.type_rules import NUMERIC_FUNCTIONS, is_text, native_array_type

_STRING_FUNCTIONS = (exp.Length, exp.Upper, exp.Lower, exp.Trim, exp.Like, exp.ILike, exp.Substring, exp.Left,
                     exp.Right, exp.Reverse, exp.Repeat, exp.Pad, exp.Replace, exp.StrPosition, exp.RegexpLike,
                     exp.RegexpExtract, exp.RegexpReplace, exp.Initcap, exp.ParseJSON)
_STRING_NAMES = frozenset({"STRLEN", "BTRIM", "CONTAINS_STRING", "ICONTAINS_STRING", "TRY_PARSE_JSON",
                           # Druid's scalar functions of one string or number value
                           "TIME_PARSE", "PARSE_LONG", "IPV4_MATCH", "IPV4_PARSE", "IPV4_STRINGIFY",
                           "HUMAN_READABLE_BINARY_BYTE_FORMAT", "HUMAN_READABLE_DECIMAL_BYTE_FORMAT",
                           "HUMAN_READABLE_DECIMAL_FORMAT", "TIMESTAMP_TO_MILLIS", "APPROX_COUNT_DISTINCT_BUILTIN",
                           # … and of numbers
                           "MILLIS_TO_TIMESTAMP", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "BITWISE_COMPLEMENT",
                           "BITWISE_SHIFT_LEFT", "BITWISE_SHIFT_RIGHT", "BITWISE_CONVERT_DOUBLE_TO_LONG_BITS",
                           "BITWISE_CONVERT_LONG_BITS_TO_DOUBLE"})
#: functions whose operands must share one type: a ``COMPLEX<json>`` value mixes with no other
_SAME_TYPE = (exp.Coalesce, exp.Nullif, exp.Case, exp.If, exp.Concat, exp.DPipe)
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
    """``t1.a = t2.a`` or ``f(t1.a) = f(t2.a)``: each side reads columns of one table, not the other's
    (Druid plans it as a join condition)."""
    tables = []
    for side in (node.this, node.expression):
        names = {c.table for c in side.find_all(exp.Column)}
        if len(names) != 1 or "" in names:
            return False
        tables.append(names.pop())
    return tables[0] != tables[1]


def _operands(node: exp.Expression) -> list[exp.Expression]:
    return [v for k, v in node.args.items() if isinstance(v, exp.Expression) and k not in ("to",)]


def _refuse(name: str, operands: list[exp.Expression]) -> exp.Expression:
    kinds = ", ".join(f"<{_calcite_type(o)}>" for o in operands)
    raise validation_error(f"Cannot apply '{name}' to arguments of type '{name}({kinds})'")


def _is_null(node: exp.Expression | None) -> bool:
    return isinstance(node, exp.Null) or (isinstance(node, exp.Cast) and isinstance(node.this, exp.Null))


def _same_type_operands(node: exp.Expression) -> None:
    """``COALESCE``/``NVL``, ``NULLIF``, ``CASE`` results and ``||``/``CONCAT`` take one type: a
    ``COMPLEX<json>`` value mixes with no other (Druid 33 refuses them), and a
    BOOLEAN ARRAY (``JSON_VALUE(… RETURNING BOOLEAN ARRAY)``) not with a numeric one."""
    if isinstance(node, exp.Case):
        values = [i.args.get("true") for i in node.args.get("ifs") or []] + [node.args.get("default")]
        if node.this is not None:  # CASE x WHEN y: x and each y are compared
            values = [node.this, *(i.this for i in node.args.get("ifs") or [])]
    elif isinstance(node, exp.If):
        values = [node.args.get("true"), node.args.get("false")]
    elif isinstance(node, exp.DPipe | exp.Nullif):
        values = [node.this, node.expression]
    else:
        values = [node.this, *node.expressions]
    values = [v for v in values if v is not None and _kind(v) is not None]
    kinds = {_kind(v) for v in values}
    if "JSON" in kinds and len(kinds) > 1:
        what = "Parameters must be of the same type" if not isinstance(node, exp.Coalesce | exp.Case | exp.If) \
            else "Illegal mixing of types in CASE or COALESCE statement"
        raise validation_error(f"{what} ({', '.join(_calcite_type(v) for v in values)})")
    if isinstance(node, exp.Case) and node.this is not None:
        return  # CASE x WHEN y compares x with y: a BOOLEAN ARRAY equals an INTEGER one there (Druid 33)
    elements = [v.type.expressions[0] for v in values if _kind(v) == "ARRAY" and v.type.expressions]
    if any(e.is_type(exp.DataType.Type.BOOLEAN) for e in elements) and any(
            e.is_type(*exp.DataType.NUMERIC_TYPES) for e in elements):
        raise validation_error("Illegal mixing of types in CASE or COALESCE statement "
                               f"({', '.join(_calcite_type(v) for v in values)})")


def operand_types(node: exp.Expression, _ctx: TranslationContext) -> exp.Expression:
    name = anonymous_name(node)
    if isinstance(node, exp.ParseJSON) or name == "TRY_PARSE_JSON":  # a string only
        operands = list(node.expressions) if name else [node.this]
        if any(isinstance(o, exp.Null) for o in operands):
            raise validation_error("Illegal use of 'NULL'")
        if any(_kind(o) is not None and not is_text(o) for o in operands):
            _refuse(name or "PARSE_JSON", operands)
        return node
    if isinstance(node, exp.JSONObject):
        for kv in node.expressions:
            if isinstance(kv, exp.JSONKeyValue) and _kind(kv.this) is not None and not is_text(kv.this):
                raise validation_error("Invalid JSON_OBJECT: field name must be a STRING")
        return node
    if isinstance(node, exp.Array) and not node.expressions:
        raise validation_error("Require at least 1 argument")
    if isinstance(node, exp.Array) and any(_kind(e) == "ARRAY" for e in node.expressions):
        raise validation_error("Cannot build an ARRAY of ARRAY values (Druid 33 has no nested array literal)")
    if isinstance(node, exp.Greatest | exp.Least):
        special = next((o for o in [node.this, *node.expressions] if _kind(o) in ("ARRAY", "JSON")), None)
        if special is not None:
            kind = "COMPLEX<json>" if _kind(special) == "JSON" else native_array_type(special)
            raise validation_error(f"Function[{node.sql_name().lower()}] does not accept {kind} types")
    if isinstance(node, exp.Cast) and (
            (_kind(node.this) == "ARRAY" and not node.to.is_type(exp.DataType.Type.ARRAY))
            or (_kind(node.this) == "JSON" and not node.to.is_type(exp.DataType.Type.JSON))):
        raise validation_error(f"Cast function cannot convert value of type {_calcite_type(node.this)} to type "
                               f"{node.to.sql('druid').upper()}")
    if isinstance(node, _SAME_TYPE) or name == "TEXTCAT":
        _same_type_operands(node)
    # only an ARRAY or JSON side makes a join condition worth finding (every other `=` skips the walk)
    in_join = isinstance(node, exp.EQ) and bool({_kind(node.this), _kind(node.expression)} & {"ARRAY", "JSON"}) \
        and (isinstance(node.find_ancestor(exp.Join, exp.Select), exp.Join) or _two_tables(node))
    if (isinstance(node, exp.In) and node.args.get("query") is not None and _kind(node.this) == "ARRAY") or (
            in_join and _kind(node.this) == "ARRAY" and _kind(node.expression) == "ARRAY"):
        raise validation_error("Predicate does not support ARRAY types")
    if in_join and "JSON" in (_kind(node.this), _kind(node.expression)):
        raise validation_error("Cannot join when the join condition has column of type [COMPLEX<json>]")
    function = druid_function_name(node)
    arguments = [a for a in node.iter_expressions()] if function else []
    if function in _ARRAY_FUNCTIONS and arguments and _kind(arguments[0]) == "JSON":
        _refuse(function, arguments)
    if function in ("MV_FILTER_ONLY", "MV_FILTER_NONE") and arguments and _kind(arguments[0]) == "ARRAY" \
            and not str(druid_function_name(arguments[0]) or "").startswith(("MV_", "STRING_TO_MV")):
        _refuse(function, arguments)
    if isinstance(node, exp.In) and _kind(node.this) == "JSON" and node.args.get("query") is not None:
        raise validation_error("Cannot apply 'IN' to a COMPLEX<json> value: Cannot join when the join condition "
                               "has column of type [COMPLEX<json>]")
    if isinstance(node, exp.In) and _kind(node.this) == "JSON" and any(
            _kind(v) not in ("JSON", None) for v in node.expressions):
        # a_nested IN (a_nested, …) compares JSON values as = does; a JSON value is never IN a list of scalars
        raise validation_error("Values passed to IN operator must have compatible types")
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
