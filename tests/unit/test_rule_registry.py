"""The Druid SQL function table is what the rule modules declare (serving/broker/sql/rule_registry.py):
each Druid function has one rule that accepts it and a place in docs/druid-sql.md, each rule one place
in the order, and what the rules write is what the output check lets through."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from serving.broker.sql import functions
from serving.broker.sql.rule_registry import ACCEPTED, EMITTED, FUNCTION_RULES, RULE_MODULES

DOC = (Path(__file__).resolve().parents[2] / "docs" / "druid-sql.md").read_text()


def test_every_accepted_function_has_one_rule_and_a_doc_mention() -> None:
    claims = Counter(name for m in RULE_MODULES for name in getattr(m, "ACCEPTS", ()))
    assert [n for n, k in claims.items() if k > 1] == []
    assert sorted(n for n in ACCEPTED if re.search(rf"\b{n}\b", DOC) is None) == []


def test_rule_order_is_declared_once_per_function_rule() -> None:
    orders = [m.ORDER for m in RULE_MODULES if hasattr(m, "FUNCTION_RULE")]
    assert len(orders) == len(set(orders)) == len(FUNCTION_RULES)
    assert all(hasattr(m, "ORDER") == hasattr(m, "FUNCTION_RULE") for m in RULE_MODULES)


def test_the_checks_read_the_declarations() -> None:
    assert functions.DRUID_FUNCTIONS == ACCEPTED
    assert EMITTED <= functions.OUTPUT_FUNCTIONS
