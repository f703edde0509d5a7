"""Druid SQL → DuckDB SQL: parse, refuse anything but a query, bind parameters, resolve tables, name
outputs like Calcite, read aggregate projections where they answer, annotate types, then apply the
rewrite rules and re-check the result."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from radstack.sql_text import DEFAULT_MAX_VALUE_BYTES
from radstack.time.clock import now_millis
from serving.broker.queries.limits import planning_guard
from serving.broker.queries.relations import check_relations
from serving.broker.sql import functions, guard, planning_pool
from serving.broker.sql.catalog import Catalog
from serving.broker.sql.dialect import parse
from serving.broker.sql.parameters import bind_parameters
from serving.broker.sql.rule_registry import apply_function_rules
from serving.broker.sql.rules import apply_bottom_up
from serving.broker.sql.rules.arithmetic import arithmetic
from serving.broker.sql.rules.array_order import array_order
from serving.broker.sql.rules.casts import casts
from serving.broker.sql.rules.connectors import balance_connectors
from serving.broker.sql.rules.group_by_aliases import check_group_by_aliases
from serving.broker.sql.rules.implicit_casts import implicit_casts
from serving.broker.sql.rules.multi_value import multi_value
from serving.broker.sql.rules.null_ordering import check_null_ordering
from serving.broker.sql.rules.operand_types import operand_types
from serving.broker.sql.rules.output_names import name_projections
from serving.broker.sql.rules.projection_answers import use_projections
from serving.broker.sql.rules.result_types import result_types
from serving.broker.sql.rules.scan_order import check_scan_order
from serving.broker.sql.rules.sketch_singles import sketch_singles
from serving.broker.sql.rules.string_min_max import string_min_max
from serving.broker.sql.rules.tables import resolve_tables
from serving.broker.sql.rules.typing import annotate
from serving.broker.sql.system_schema import SYSTEM_SCHEMA
from serving.broker.sql.translation_context import TranslationContext, planning_context

# sqlglot warns when it falls back to a generic Command; the guard refuses those anyway.
logging.getLogger("sqlglot").setLevel(logging.ERROR)

#: Rules that read the annotated types (run first, before nodes are replaced).
TYPED_RULES = [operand_types, implicit_casts, arithmetic, casts, string_min_max, array_order, result_types]

Pass = Callable[[exp.Expression, TranslationContext], exp.Expression]


def _balanced(tree: exp.Expression, _ctx: TranslationContext) -> exp.Expression:
    return balance_connectors(tree)


def _bound(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    return bind_parameters(tree, ctx.parameters)


def _input_checked(tree: exp.Expression, _ctx: TranslationContext) -> exp.Expression:
    functions.check_input(tree)
    return tree


def _annotated(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    return annotate(tree, ctx, SYSTEM_SCHEMA if ctx.system_schema is None else ctx.system_schema)


def _typed_rules(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    return apply_bottom_up(tree, TYPED_RULES, ctx)


def _function_rules(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    return apply_bottom_up(tree, [apply_function_rules], ctx)  # only the rules that declare a node see it


def _output_checked(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    functions.check_output(tree)
    guard.check_read_only([tree])
    check_relations(tree, ctx.catalog.relations(ctx.datasources, ctx.system_tables, ctx.lookups))
    return tree


#: The translation, pass by pass, in order: each takes the tree and the statement's context and returns
#: the tree (a check returns it unchanged or raises). A new structural pass is a function and its line here.
PASSES: tuple[Pass, ...] = (
    _balanced,
    check_null_ordering,
    _bound,
    _input_checked,
    resolve_tables,
    check_scan_order,
    check_group_by_aliases,
    name_projections,
    multi_value,
    use_projections,
    _annotated,
    _typed_rules,
    _function_rules,
    sketch_singles,
    _output_checked,
)


@dataclass
class Translation:
    """The DuckDB statement for one Druid SQL query, and what must be registered to run it."""

    sql: str
    udfs: set[str] = field(default_factory=set)
    system_tables: set[tuple[str, str]] = field(default_factory=set)
    datasources: set[str] = field(default_factory=set)
    lookups: set[str] = field(default_factory=set)  # lookups read (lookup.name, LOOKUP())
    projections: dict[str, str] = field(default_factory=dict)  # datasource → the projection that answered


def translate(
    sql: str,
    catalog: Catalog,
    *,
    context: dict[str, Any] | None = None,
    parameters: list[dict[str, Any]] | None = None,
    now_ms: int | None = None,
    system_schema: dict[str, dict[str, str]] | None = None,
    max_string_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    planning_processes: int = 0,
) -> Translation:
    """Translate one Druid SQL query; raise :class:`serving.errors.DruidError` for anything refused.

    A query that does not read the clock (``CURRENT_TIMESTAMP``, ``CURRENT_DATE``, ``NOW()`` …) is
    translated once per catalog (a broker generation) and context: dashboards repeat their queries.
    With ``planning_processes``, a statement of :data:`planning_pool.OFFLOAD_CHARS` characters or more
    is translated by a worker process (:mod:`serving.broker.sql.planning_pool`)."""
    context = planning_context(context)  # a request's id, timeout … must not defeat the memo
    args = (sql, catalog, context, parameters, now_ms, system_schema, max_string_bytes)

    def plan() -> Translation:
        if planning_processes > 0 and len(sql) >= planning_pool.OFFLOAD_CHARS:
            return planning_pool.run_planning(planning_processes, _translate_now, *args)
        return _translate_now(*args)

    if _NOW.search(sql) is None:
        key = ("translation", sql, repr(sorted(context.items())), repr(parameters), max_string_bytes,
               id(system_schema))
        return catalog.memo(key, plan)
    return plan()


#: functions whose translation depends on the time it is made
_NOW = re.compile(r"CURRENT_TIMESTAMP|CURRENT_DATE|CURRENT_TIME|LOCALTIME|\bNOW\s*\(", re.IGNORECASE)


def _translate_now(sql: str, catalog: Catalog, context: dict[str, Any] | None, parameters: list[dict[str, Any]] | None,
                   now_ms: int | None, system_schema: dict[str, dict[str, str]] | None,
                   max_string_bytes: int) -> Translation:
    ctx = TranslationContext(
        catalog=catalog,
        now_ms=now_millis() if now_ms is None else now_ms,
        query_context=dict(context or {}),
        max_string_bytes=max_string_bytes,
    )
    with planning_guard():
        return _translate(sql, ctx, parameters, system_schema)


def _translate(sql: str, ctx: TranslationContext, parameters: list[dict[str, Any]] | None,
               system_schema: dict[str, dict[str, str]] | None) -> Translation:
    ctx.parameters = parameters or []
    ctx.system_schema = system_schema
    tree = guard.check_read_only(parse(sql))
    for step in PASSES:
        tree = step(tree, ctx)
    return Translation(
        sql=tree.sql(dialect="duckdb"),
        udfs=set(ctx.udfs),
        system_tables=set(ctx.system_tables),
        datasources=set(ctx.datasources),
        lookups=set(ctx.lookups),
        projections=dict(ctx.projections),
    )
