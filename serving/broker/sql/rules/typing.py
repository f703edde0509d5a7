"""Column resolution and type annotation (sqlglot's qualify + annotate_types) so later rules can
tell integer from floating arithmetic and TIMESTAMP from other values."""

from __future__ import annotations

import logging
from typing import Any

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from serving.broker.sql.dialect import DruidSql
from serving.broker.sql.translation_context import TranslationContext

log = logging.getLogger(__name__)

#: Druid functions sqlglot keeps as anonymous calls whose result type later rules need: a multi-value
#: string's values are text, so ``UNNEST(MV_TO_ARRAY(tags)) AS u(v)`` gives a VARCHAR ``v``
#: (the time functions' TIMESTAMP lets ``MIN(TIME_FLOOR(__time, 'PT1H')) + INTERVAL '1' YEAR`` be typed)
_RESULT_TYPES: dict[str, tuple[str, ...]] = {
    "ARRAY<VARCHAR>": ("MV_TO_ARRAY", "STRING_TO_MV", "STRING_TO_ARRAY", "JSON_PATHS"),
    "TIMESTAMP": ("TIMESTAMPADD", "TIME_FLOOR", "TIME_CEIL", "TIME_SHIFT", "TIME_PARSE", "MILLIS_TO_TIMESTAMP"),
    "BIGINT": ("BIT_AND", "BIT_OR", "BIT_XOR", "APPROX_COUNT_DISTINCT_BUILTIN", "TIMESTAMP_TO_MILLIS", "TIME_EXTRACT", "STRLEN", "PARSE_LONG", "IPV4_PARSE", "BITWISE_AND",
               "BITWISE_OR", "BITWISE_XOR", "BITWISE_NOT", "BITWISE_SHIFT_LEFT", "BITWISE_SHIFT_RIGHT",
               "BITWISE_CONVERT_DOUBLE_TO_LONG_BITS", "MV_LENGTH"),
    "DOUBLE": ("BITWISE_CONVERT_LONG_BITS_TO_DOUBLE",),
    "VARCHAR": ("TIME_FORMAT", "IPV4_STRINGIFY", "HUMAN_READABLE_BINARY_BYTE_FORMAT",
                "HUMAN_READABLE_DECIMAL_BYTE_FORMAT", "HUMAN_READABLE_DECIMAL_FORMAT", "STRING_FORMAT",
                "MV_TO_STRING", "ARRAY_TO_STRING"),
    "BOOLEAN": ("IPV4_MATCH", "CONTAINS_STRING", "ICONTAINS_STRING"),
    "JSON": ("JSON_QUERY", "TRY_PARSE_JSON"),  # Druid's COMPLEX<json>
}
UDF_TYPES: dict[str, object] = {case(name): kind for kind, names in _RESULT_TYPES.items() for name in names
                                for case in (str.upper, str.lower)}  # names keep their case in this dialect


def _json_value_type(annotator: Any, node: exp.JSONValue) -> exp.Expression:
    """``JSON_VALUE(… RETURNING t)`` is a ``t`` (an ARRAY included), as Calcite types it; else VARCHAR."""
    returning = node.args.get("returning")
    return annotator._set_type(node, returning.copy() if isinstance(returning, exp.DataType) else exp.DType.VARCHAR)


def _same_as_argument(annotator: Any, node: exp.Expression) -> exp.Expression:
    """``TRUNCATE(x, n)`` is of ``x``'s type."""
    return annotator._set_type(node, node.this.type if node.this is not None else None)


#: Druid aggregates kept as anonymous calls whose result is of their first argument's type
_FIRST_ARGUMENT_TYPED = frozenset({"EARLIEST", "LATEST", "EARLIEST_BY", "LATEST_BY"})


def _anonymous_type(annotator: Any, node: exp.Anonymous) -> exp.Expression:
    name = str(node.name).upper()
    if name in _FIRST_ARGUMENT_TYPED and node.expressions:
        first = node.expressions[0].type
        if isinstance(first, exp.DataType) and first.is_type(exp.DataType.Type.ARRAY):
            return annotator._set_type(node, exp.DType.VARCHAR)  # Java's text of the list
        return annotator._set_type(node, first)
    return annotator._set_type(node, annotator.schema.get_udf_type(node))


def _array_operand_type(annotator: Any, node: exp.Expression) -> exp.Expression:
    """``ARRAY_APPEND(arr, v)`` / ``ARRAY_PREPEND(v, arr)`` are of their array's type."""
    arrays = [a for a in (node.this, node.expression)
              if isinstance(getattr(a, "type", None), exp.DataType) and a.type.is_type(exp.DataType.Type.ARRAY)]
    return annotator._set_type(node, arrays[0].type if arrays else None)


def _floor_type(annotator: Any, node: exp.Floor | exp.Ceil) -> exp.Expression:
    """``FLOOR(ts TO unit)`` / ``CEIL(ts TO unit)`` are TIMESTAMPs; of a number, as the dialect types it."""
    if node.args.get("to") is not None:
        return annotator._set_type(node, exp.DType.TIMESTAMP)
    return DruidSql.EXPRESSION_METADATA[type(node)]["annotator"](annotator, node)


def _of_type(name: str) -> Any:
    """An annotator giving every node the one type ``name``."""
    return {"annotator": lambda annotator, node: annotator._set_type(node, exp.DataType.build(name))}


_METADATA = {**DruidSql.EXPRESSION_METADATA, exp.JSONValue: {"annotator": _json_value_type},
             exp.JSONKeys: _of_type("ARRAY<VARCHAR>"), exp.JSONObject: _of_type("JSON"),
             exp.Trunc: {"annotator": _same_as_argument}, exp.Anonymous: {"annotator": _anonymous_type},
             exp.ArrayAppend: {"annotator": _array_operand_type}, exp.ArrayPrepend: {"annotator": _array_operand_type},
             exp.Floor: {"annotator": _floor_type}, exp.Ceil: {"annotator": _floor_type}}


def annotate(tree: exp.Expression, ctx: TranslationContext, system_schema: dict[str, dict[str, str]]) -> exp.Expression:
    # built once per catalog: normalizing every table's columns cost ~4 ms a query
    schema = ctx.catalog.memo(("schema", id(system_schema)), lambda: MappingSchema(
        {**ctx.catalog.sql_schema(), **system_schema}, dialect=DruidSql, udf_mapping=UDF_TYPES))
    try:
        qualified = qualify(
            tree.copy(), schema=schema, dialect=DruidSql, validate_qualify_columns=False,
            quote_identifiers=True, expand_stars=True, identify=True,
        )
        return annotate_types(qualified, schema=schema, dialect=DruidSql, expression_metadata=_METADATA)
    except Exception as e:  # noqa: BLE001 - qualification is best effort; DuckDB binds the rest
        log.debug("could not qualify %s: %s", tree.sql(), e)
        return tree
