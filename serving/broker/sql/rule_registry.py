"""The Druid SQL function table, derived from the rule modules' own declarations (the shape of sqlglot's
``Parser.FUNCTIONS``): a function rule module in ``rules/`` declares ``FUNCTION_RULE`` (its rewrite),
``ORDER`` (where it runs among the function rules, children before parents), ``ACCEPTS`` (the Druid
functions it translates, which arrive as anonymous calls) and ``EMITS`` / ``EMITS_CLASSES`` (the DuckDB
functions it writes into the output tree); any other rule module may declare what it emits too.

A new Druid SQL function is one new module in ``rules/`` plus its test and its row in docs/druid-sql.md:
:data:`FUNCTION_RULES` runs it, :mod:`serving.broker.sql.functions` lets its name in and its output out.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from sqlglot import exp

from serving.broker.sql import rules
from serving.broker.sql.rules import Rule


def _rule_modules() -> list[ModuleType]:
    return [importlib.import_module(f"{rules.__name__}.{info.name}")
            for info in sorted(pkgutil.iter_modules(rules.__path__), key=lambda m: m.name)]


RULE_MODULES = _rule_modules()
FUNCTION_MODULES = sorted((m for m in RULE_MODULES if hasattr(m, "FUNCTION_RULE")), key=lambda m: m.ORDER)

#: The function rewrites, in their declared order.
FUNCTION_RULES: list[Rule] = [m.FUNCTION_RULE for m in FUNCTION_MODULES]
#: Druid functions some rule translates (anonymous calls on the way in).
ACCEPTED: frozenset[str] = frozenset().union(*(getattr(m, "ACCEPTS", frozenset()) for m in RULE_MODULES))
#: DuckDB function names the rules write (anonymous calls on the way out).
EMITTED: frozenset[str] = frozenset().union(*(getattr(m, "EMITS", frozenset()) for m in RULE_MODULES))
#: Typed sqlglot function nodes the rules write.
EMITTED_CLASSES: tuple[type[exp.Expression], ...] = tuple(
    dict.fromkeys(c for m in RULE_MODULES for c in getattr(m, "EMITS_CLASSES", ())))
