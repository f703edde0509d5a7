"""Which functions a Druid SQL statement may call (an allow-list), checked on the parsed tree.

Typed sqlglot function nodes must be one of :data:`ALLOWED_CLASSES`; anonymous calls must be a Druid
function that a rewrite rule translates (:data:`DRUID_FUNCTIONS`) or one DuckDB runs with Druid's meaning
(:data:`PASSTHROUGH`). Any other function of Druid 33's SQL reference (:mod:`serving.broker.sql.function_reference`) answers
501 naming it; anything else is Druid's "No match found for function signature" (400). The translated DuckDB tree is checked again
against :data:`OUTPUT_FUNCTIONS`, so nothing touching files, settings or extensions can reach DuckDB.
"""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import unknown_function, unsupported, validation_error
from serving.broker.sql.function_reference import FUNCTIONS as DRUID_REFERENCE
from serving.broker.sql.rule_registry import ACCEPTED, EMITTED, EMITTED_CLASSES
from serving.broker.sql.rules import ARRAY_NODES as ARRAY_CLASSES
from serving.broker.store.udfs import UDFS

ALLOWED_CLASSES: tuple[type[exp.Expression], ...] = (
    # numeric
    exp.Abs, exp.Acos, exp.Asin, exp.Atan, exp.Atan2, exp.Ceil, exp.Cos, exp.Cot, exp.Degrees, exp.Exp,
    exp.Floor, exp.Ln, exp.Log, exp.Pi, exp.Pow, exp.Radians, exp.Round, exp.SafeDivide, exp.Sin,
    exp.Sqrt, exp.Tan, exp.Trunc, exp.Greatest, exp.Least,
    # strings
    exp.Concat, exp.Length, exp.Lower, exp.Upper, exp.Pad, exp.StrPosition, exp.RegexpExtract,
    exp.RegexpLike, exp.RegexpReplace, exp.Replace, exp.Repeat, exp.Reverse, exp.Right, exp.Left,
    exp.Substring, exp.Trim,
    # conditionals and casts
    exp.Coalesce, exp.Nullif, exp.Case, exp.If, exp.Cast, exp.TryCast, exp.Exists, exp.Array,
    # aggregates
    exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg, exp.ApproxDistinct, exp.ApproxQuantile, exp.AnyValue,
    exp.Stddev, exp.StddevPop, exp.StddevSamp, exp.Variance, exp.VariancePop, exp.LogicalAnd,
    exp.LogicalOr, exp.Grouping, exp.GroupConcat,
    # window functions
    exp.RowNumber, exp.Rank, exp.DenseRank, exp.Lag, exp.Lead, exp.FirstValue, exp.LastValue,
    exp.NthValue, exp.Ntile, exp.PercentRank, exp.CumeDist,
    # time
    exp.CurrentTimestamp, exp.CurrentDate, exp.DateTrunc, exp.TimestampTrunc, exp.Extract,
    # JSON (rules/json_functions.py)
    exp.JSONValue, exp.JSONKeys, exp.ParseJSON, exp.JSONObject,
    # arrays (rules/arrays.py), UNNEST in FROM/JOIN
    exp.ArrayAgg, exp.Unnest, *ARRAY_CLASSES,
)

#: Druid functions the rewrite rules translate (they arrive as anonymous calls): each rule module
#: declares its own (serving/broker/sql/rule_registry.py).
DRUID_FUNCTIONS: frozenset[str] = ACCEPTED

#: Anonymous calls DuckDB evaluates with Druid's meaning, unchanged.
PASSTHROUGH: frozenset[str] = frozenset({"BIT_AND", "BIT_OR", "BIT_XOR"})

#: Function names the rewrite rules emit for DuckDB (anonymous calls in the output tree), as each rule
#: module declares them, plus the Python UDFs (udfs.py).
OUTPUT_FUNCTIONS: frozenset[str] = EMITTED | frozenset(UDFS) | PASSTHROUGH

#: Typed function nodes the rewrite rules emit besides :data:`ALLOWED_CLASSES`, as declared.
OUTPUT_CLASSES: tuple[type[exp.Expression], ...] = EMITTED_CLASSES

_OPERATORS = (exp.Binary, exp.Connector, exp.Unary)


def _name(node: exp.Expression) -> str:
    return str(node.name if isinstance(node, exp.Anonymous) else node.sql_name()).upper()


def check_input(tree: exp.Expression) -> None:
    """Refuse any call outside Druid's function list (400), or one this broker lacks (501)."""
    for node in tree.walk():
        if not isinstance(node, exp.Func) or isinstance(node, _OPERATORS):
            continue
        if isinstance(node, exp.Anonymous):
            name = _name(node)
            if name in DRUID_FUNCTIONS or name in PASSTHROUGH:
                continue
            _refuse(name, len(node.expressions))
        if isinstance(node, ALLOWED_CLASSES):
            continue
        _refuse(_name(node), len([a for a in node.args.values() if a is not None]))


def _refuse(name: str, nargs: int) -> None:
    if name in DRUID_REFERENCE:
        raise unsupported(f"SQL function {name} is not supported by this broker")
    raise unknown_function(name, nargs)


def check_output(tree: exp.Expression) -> None:
    """Defensive re-check of the DuckDB tree: only allowed classes and emitted function names."""
    for node in tree.walk():
        if not isinstance(node, exp.Func) or isinstance(node, _OPERATORS):
            continue
        if isinstance(node, exp.Anonymous):
            if _name(node) not in OUTPUT_FUNCTIONS:
                raise validation_error(f"Function {_name(node)} cannot be used here")
        elif not isinstance(node, ALLOWED_CLASSES + OUTPUT_CLASSES):
            raise validation_error(f"Function {_name(node)} cannot be used here")
