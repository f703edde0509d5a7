"""The Druid SQL function table, derived from the rule modules' own declarations (the shape of sqlglot's
``Parser.FUNCTIONS``): a function rule module in ``rules/`` declares ``FUNCTION_RULE`` (its rewrite),
``ACCEPTS`` (the Druid functions it translates, which arrive as anonymous calls) and ``EMITS`` /
``EMITS_CLASSES`` (the DuckDB functions it writes into the output tree); any other rule module may declare
what it emits too.

The registries are explicit tuples (as sqlglot's ``RULES``): :data:`FUNCTION_RULE_MODULES` in the order the
rewrites run (children before parents, so a rule sees its arguments already translated), and
:data:`RULE_MODULES`, every module of ``rules/`` (those and the passes and typed rules ``translate.py`` runs).
A new Druid SQL function is one new module in ``rules/`` and one line in :data:`FUNCTION_RULE_MODULES`
(``rules/array_quantile.py`` is one), its test and its row in docs/druid-sql.md
(``tests/unit/test_rule_registry.py`` fails on a module listed nowhere).
"""

from __future__ import annotations

from types import ModuleType

from sqlglot import exp

from serving.broker.sql.rules import (
    Rule,
    aggregate_sizes,
    approx,
    arithmetic,
    array_order,
    array_quantile,
    arrays,
    bitwise_unary,
    case_to_filter,
    casts,
    connectors,
    distinct_aggregates,
    earliest_latest,
    group_by_aliases,
    implicit_casts,
    json_functions,
    lookup,
    millis,
    multi_value,
    null_ordering,
    operand_types,
    output_names,
    projection_answers,
    result_types,
    scalar_udfs,
    scan_order,
    sketch_singles,
    sketches,
    string_min_max,
    strings,
    tables,
    time_extract,
    time_floor,
    time_format,
    time_in_interval,
    time_parse,
    time_shift,
    timestamp_diff,
    typing,
    value_limits,
    window_frames,
    window_ties,
)

#: The function rewrites, in the order they run on every node.
FUNCTION_RULE_MODULES: tuple[ModuleType, ...] = (
    window_frames,
    case_to_filter,
    time_floor,
    time_shift,
    timestamp_diff,
    time_extract,
    time_format,
    time_parse,
    time_in_interval,
    millis,
    sketches,
    approx,
    earliest_latest,
    distinct_aggregates,
    aggregate_sizes,
    scalar_udfs,
    strings,
    bitwise_unary,
    array_quantile,
    value_limits,
    lookup,
    json_functions,
    arrays,
    window_ties,
)
#: Every rule module (the function rewrites, then the passes and typed rules translate.py runs itself).
RULE_MODULES: tuple[ModuleType, ...] = FUNCTION_RULE_MODULES + (
    arithmetic,
    array_order,
    casts,
    connectors,
    group_by_aliases,
    implicit_casts,
    multi_value,
    null_ordering,
    operand_types,
    output_names,
    projection_answers,
    result_types,
    scan_order,
    sketch_singles,
    string_min_max,
    tables,
    typing,
)

#: The function rewrites, in their declared order.
FUNCTION_RULES: list[Rule] = [m.FUNCTION_RULE for m in FUNCTION_RULE_MODULES]
#: Druid functions some rule translates (anonymous calls on the way in).
ACCEPTED: frozenset[str] = frozenset().union(*(getattr(m, "ACCEPTS", frozenset()) for m in RULE_MODULES))
#: DuckDB function names the rules write (anonymous calls on the way out).
EMITTED: frozenset[str] = frozenset().union(*(getattr(m, "EMITS", frozenset()) for m in RULE_MODULES))
#: Typed sqlglot function nodes the rules write.
EMITTED_CLASSES: tuple[type[exp.Expression], ...] = tuple(
    dict.fromkeys(c for m in RULE_MODULES for c in getattr(m, "EMITS_CLASSES", ())))
