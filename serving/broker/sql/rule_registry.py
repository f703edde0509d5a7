"""The Druid SQL function table, derived from the rule modules' own declarations (the shape of sqlglot's
``Parser.FUNCTIONS``): a function rule module in ``rules/`` declares ``FUNCTION_RULE`` (its rewrite),
``ACCEPTS`` (the Druid functions it translates, which arrive as anonymous calls) and ``EMITS`` /
``EMITS_CLASSES`` (the DuckDB functions it writes into the output tree); any other rule module may declare
what it emits too.

The registries are explicit tuples (as sqlglot's ``RULES``): :data:`FUNCTION_RULE_MODULES` in the order the
rewrites run (children before parents, so a rule sees its arguments already translated), and
:data:`RULE_MODULES`, every module of ``rules/`` (those and the passes and typed rules ``translate.py`` runs).
Only the rules that declare a node run on it (:func:`apply_function_rules`): a function rule module's
``ACCEPTS`` (and ``READS``) name the anonymous calls it rewrites, its ``HANDLES`` the sqlglot node classes
(a module that declares no ``HANDLES`` sees every node).
A new Druid SQL function is one new module in ``rules/`` and one line in :data:`FUNCTION_RULE_MODULES`
(``rules/array_quantile.py`` is one), its test and its row in docs/druid-sql.md
(``tests/unit/test_rule_registry.py`` fails on a module listed nowhere).
"""

from __future__ import annotations

from functools import lru_cache
from types import ModuleType

from sqlglot import exp

from serving.broker.sql.rules import (
    Rule,
    aggregate_sizes,
    anonymous_name,
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
from serving.broker.sql.translation_context import TranslationContext

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


def _rules_by_name() -> dict[str, tuple[tuple[int, Rule], ...]]:
    out: dict[str, tuple[tuple[int, Rule], ...]] = {}
    for i, m in enumerate(FUNCTION_RULE_MODULES):
        for name in getattr(m, "ACCEPTS", frozenset()) | getattr(m, "READS", frozenset()):
            out[name] = (*out.get(name, ()), (i, m.FUNCTION_RULE))
    return out


#: name → the rules (position, rule) that rewrite anonymous calls of that name, in order
_BY_NAME = _rules_by_name()
#: the rules that declare no node classes (they see every node)
_EVERY_NODE = tuple((i, m.FUNCTION_RULE) for i, m in enumerate(FUNCTION_RULE_MODULES) if not hasattr(m, "HANDLES"))


@lru_cache(maxsize=1024)
def _rules_for(kind: type[exp.Expression], name: str | None) -> tuple[tuple[int, Rule], ...]:
    """The rules that declare a node of class ``kind`` (an anonymous call: its ``name``), in order."""
    by_class = [(i, m.FUNCTION_RULE) for i, m in enumerate(FUNCTION_RULE_MODULES)
                if issubclass(kind, getattr(m, "HANDLES", ()))]
    by_name = list(_BY_NAME.get(name, ())) if name is not None else []
    return tuple(sorted({*by_class, *by_name, *_EVERY_NODE}, key=lambda r: r[0]))


def apply_function_rules(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    """``node`` through the function rewrites that declare it, in :data:`FUNCTION_RULE_MODULES` order; a
    rewrite into another kind of node hands it to the later rules that declare that one."""
    done = -1
    while True:
        for position, rule in _rules_for(type(node), anonymous_name(node)):
            if position <= done:
                continue
            out, done = rule(node, ctx), position
            kind_changed = type(out) is not type(node) or anonymous_name(out) != anonymous_name(node)
            node = out
            if kind_changed:
                break
        else:
            return node
#: Druid functions some rule translates (anonymous calls on the way in).
ACCEPTED: frozenset[str] = frozenset().union(*(getattr(m, "ACCEPTS", frozenset()) for m in RULE_MODULES))
#: DuckDB function names the rules write (anonymous calls on the way out).
EMITTED: frozenset[str] = frozenset().union(*(getattr(m, "EMITS", frozenset()) for m in RULE_MODULES))
#: Typed sqlglot function nodes the rules write.
EMITTED_CLASSES: tuple[type[exp.Expression], ...] = tuple(
    dict.fromkeys(c for m in RULE_MODULES for c in getattr(m, "EMITS_CLASSES", ())))
