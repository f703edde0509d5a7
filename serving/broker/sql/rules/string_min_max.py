"""Druid's native MIN/MAX aggregators take numbers only: ``MIN(page)`` over a datasource is refused with
``Aggregation [MIN] does not support type [STRING], column [page]`` (use ``EARLIEST``/``LATEST`` or
``ORDER BY … LIMIT 1`` for strings), nor arrays (``does not support type [ARRAY<LONG>]``). DuckDB would answer it, so this rule refuses the same statements
— a query that works here also works on Druid. System tables (``sys``, ``INFORMATION_SCHEMA``) are
planned by Calcite itself in Druid and keep string MIN/MAX; so do they here. Reads the annotated
types (run with the typed rules)."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import validation_error
from serving.broker.sql.translation_context import TranslationContext
from serving.broker.sql.type_rules import native_array_type

_TEXT = {exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT, exp.DataType.Type.CHAR, exp.DataType.Type.NCHAR,
         exp.DataType.Type.NVARCHAR}


def string_min_max(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if not isinstance(node, exp.Min | exp.Max) or ctx.system_tables or not ctx.datasources:
        return node
    arg = node.this
    t = getattr(arg, "type", None)
    if t is None or (t.this not in _TEXT and not t.is_type(exp.DataType.Type.ARRAY)):
        return node
    name = arg.name if isinstance(arg, exp.Column) else "v0"
    kind = native_array_type(arg) if t.is_type(exp.DataType.Type.ARRAY) else "STRING"
    raise validation_error(f"Aggregation [{node.key.upper()}] does not support type [{kind}], column [{name}]")
