"""The Druid SQL function table is what the rule modules declare (serving/broker/sql/rule_registry.py):
each Druid function has one rule that accepts it and a place in docs/druid-sql.md, each rule one place
in the order (the explicit tuples of rule_registry.py, which list every module of rules/), and what the
rules write is what the output check lets through."""

from __future__ import annotations

import pkgutil
import re
from collections import Counter
from pathlib import Path

from serving.broker.sql import functions, rules
from serving.broker.sql.rule_registry import (
    ACCEPTED,
    EMITTED,
    FUNCTION_RULE_MODULES,
    FUNCTION_RULES,
    RULE_MODULES,
)

DOC = (Path(__file__).resolve().parents[2] / "docs" / "druid-sql.md").read_text()


def test_every_accepted_function_has_one_rule_and_a_doc_mention() -> None:
    claims = Counter(name for m in RULE_MODULES for name in getattr(m, "ACCEPTS", ()))
    assert [n for n, k in claims.items() if k > 1] == []
    assert sorted(n for n in ACCEPTED if re.search(rf"\b{n}\b", DOC) is None) == []


def test_every_rule_module_is_registered_once_and_function_rules_in_order() -> None:
    on_disk = {info.name for info in pkgutil.iter_modules(rules.__path__)}
    listed = [m.__name__.rsplit(".", 1)[-1] for m in RULE_MODULES]
    assert sorted(listed) == sorted(on_disk), "a module of rules/ is missing from rule_registry.RULE_MODULES"
    assert len(listed) == len(set(listed))
    assert all(hasattr(m, "FUNCTION_RULE") for m in FUNCTION_RULE_MODULES)
    assert not any(hasattr(m, "FUNCTION_RULE") for m in RULE_MODULES[len(FUNCTION_RULE_MODULES):])
    assert len(FUNCTION_RULES) == len(FUNCTION_RULE_MODULES)


def test_the_checks_read_the_declarations() -> None:
    assert functions.DRUID_FUNCTIONS == ACCEPTED
    assert EMITTED <= functions.OUTPUT_FUNCTIONS
