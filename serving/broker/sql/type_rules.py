"""Druid's SQL type rules, in one place (the rewrite rules and the function registry use these).

- **Arithmetic**: ``+ - * /`` and ``MOD``/``SAFE_DIVIDE`` over integer operands stay LONG, and division
  truncates toward zero (Calcite); any DOUBLE/FLOAT/DECIMAL operand makes the result DOUBLE.
- **CAST**: floating → integer truncates toward zero (Java), TIMESTAMP ↔ BIGINT is epoch millis,
  TIMESTAMP → VARCHAR is ``yyyy-MM-dd HH:mm:ss``, a string that is not a time → TIMESTAMP is NULL.
- **Result types of functions**: the rule each function of Druid's reference names
  (:data:`serving.broker.sql.function_reference.RETURN_RULES`), applied where DuckDB would type the result
  otherwise (``rules/result_types.py``, ``rules/arithmetic.py``).
- **DISTINCT aggregates** that build strings or arrays (``STRING_AGG``/``LISTAGG``/``ARRAY_AGG(DISTINCT …)``)
  give their values in ascending order, as Druid's sorted sets do (``rules/distinct_aggregates.py``).
- **DECIMAL**: a decimal literal and arithmetic over it are DECIMAL (:func:`is_decimal`); ``FLOOR``,
  ``CEIL``, ``TRUNCATE`` and ``SAFE_DIVIDE`` of DECIMALs stay DECIMAL, ``SUM``, ``GREATEST`` and ``LEAST``
  of floating values are DOUBLE (a DECIMAL is a DOUBLE on the wire: only the SQL type name differs).
- **NULL vs ''**: SQL-compatible null handling (Druid 33's only mode): ``''`` is a value, NULL is not.

Types are read from sqlglot's annotation (``rules/typing.py`` annotates the tree before any rule runs).
"""

from __future__ import annotations

from sqlglot import exp

INTEGER = exp.DataType.INTEGER_TYPES
FLOATING = frozenset({exp.DType.DOUBLE, exp.DType.FLOAT, exp.DType.DECIMAL})
TEXT = frozenset({exp.DType.VARCHAR, exp.DType.TEXT, exp.DType.CHAR, exp.DType.NVARCHAR, exp.DType.NCHAR})
TIMESTAMPS = frozenset({exp.DType.TIMESTAMP, exp.DType.TIMESTAMPNTZ, exp.DType.DATETIME})

#: Druid's numeric scalar functions and arithmetic: Calcite checks their operands are numbers (an ARRAY
#: or JSON operand is refused, rules/operand_types.py) and reads text as a number (rules/implicit_casts.py)
NUMERIC_FUNCTIONS = (exp.Abs, exp.Ceil, exp.Floor, exp.Sqrt, exp.Exp, exp.Ln, exp.Log, exp.Pow, exp.Round,
                     exp.Mod, exp.Sign, exp.Sin, exp.Cos, exp.Tan, exp.Asin, exp.Acos, exp.Atan, exp.Atan2,
                     exp.Cot, exp.Degrees, exp.Radians, exp.Add, exp.Sub, exp.Mul, exp.Div)


def _type(node: exp.Expression | None) -> exp.DType | None:
    t = getattr(node, "type", None)
    return None if t is None else t.this


def is_integer(node: exp.Expression | None) -> bool:
    return _type(node) in INTEGER


def is_floating(node: exp.Expression | None) -> bool:
    return _type(node) in FLOATING


def is_text(node: exp.Expression | None) -> bool:
    return _type(node) in TEXT


def is_timestamp(node: exp.Expression | None) -> bool:
    return _type(node) in TIMESTAMPS


#: meta key: this node is DECIMAL arithmetic already computed in doubles (rules/arithmetic.py)
DECIMAL_ARITHMETIC = "druid_decimal_arithmetic"


def is_decimal(node: exp.Expression | None) -> bool:
    """Whether Calcite types ``node`` DECIMAL: a decimal literal (``0.5``), or arithmetic over decimal
    literals and integers (``added * 0.5``); a DOUBLE column or CAST makes it DOUBLE. (sqlglot annotates
    all of these DOUBLE; DuckDB, like Calcite, computes them as DECIMAL.)"""
    if isinstance(node, exp.Paren):
        return is_decimal(node.this)
    if node is not None and node.meta.get(DECIMAL_ARITHMETIC):  # already rewritten (rules/arithmetic.py)
        return True
    if isinstance(node, exp.Literal):
        return not node.is_string and not node.is_int
    if isinstance(node, exp.Neg):
        return is_decimal(node.this)
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
        return decimal_operands(node.this, node.expression)
    return False


def decimal_operands(*operands: exp.Expression) -> bool:
    """Whether Calcite's result over these operands is DECIMAL: each a DECIMAL or an integer, one a DECIMAL."""
    return all(is_decimal(o) or is_integer(o) for o in operands) and any(is_decimal(o) for o in operands)


#: Druid's DECIMAL results are doubles: a DuckDB DECIMAL with enough scale that the value written is the double's
DECIMAL_RESULT = "DECIMAL(38, 18)"


def druid_type(node: exp.Expression | None) -> str | None:
    """LONG, DOUBLE, STRING, TIMESTAMP, BOOLEAN or ARRAY for an annotated node; None when unknown."""
    t = _type(node)
    if t in INTEGER:
        return "LONG"
    if t in FLOATING:
        return "DOUBLE"
    if t in TEXT:
        return "STRING"
    if t in TIMESTAMPS:
        return "TIMESTAMP"
    if t == exp.DType.BOOLEAN:
        return "BOOLEAN"
    if t == exp.DType.ARRAY:
        return "ARRAY"
    return None


def integer_arithmetic(*operands: exp.Expression) -> bool:
    """Whether Druid computes over these operands as LONG (every one an integer)."""
    return all(is_integer(o) for o in operands)


def native_array_type(node: exp.Expression) -> str:
    """``ARRAY<LONG>``: an array's type as Druid's native layer names it."""
    t = node.type
    inner = t.expressions[0] if t.expressions else exp.DataType.build("VARCHAR")
    native = ("LONG" if inner.is_type(*exp.DataType.INTEGER_TYPES, exp.DataType.Type.BOOLEAN)
              else "DOUBLE" if inner.is_type(*exp.DataType.REAL_TYPES) else "STRING")
    return f"ARRAY<{native}>"
