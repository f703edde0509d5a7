"""The Druid SQL function table is what the rule modules declare (serving/broker/sql/rule_registry.py):
each Druid function has one rule that accepts it and a place in docs/druid-sql.md, each rule one place
in the order (the explicit tuples of rule_registry.py, which list every module of rules/), and what the
rules write is what the output check lets through."""

from __future__ import annotations

import pkgutil
import re
from collections import Counter
from pathlib import Path

import pytest

from serving.broker.sql import functions, rule_registry, rules
from serving.broker.sql.catalog import Catalog, ColumnInfo
from serving.broker.sql.rule_registry import (
    ACCEPTED,
    EMITTED,
    FUNCTION_RULE_MODULES,
    FUNCTION_RULES,
    RULE_MODULES,
)
from serving.broker.sql.translate import translate
from serving.errors import DruidError
from tests.fixtures.druid_corpus import Case, generate, ingestion_tasks

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


def _corpus_catalog() -> Catalog:
    """The differential corpus's datasources, as the broker's catalog would list them."""
    kinds = {"long": "LONG", "double": "DOUBLE", "float": "FLOAT", "json": "COMPLEX<json>", "string": "STRING"}
    out: dict[str, list[ColumnInfo]] = {}
    for task in ingestion_tasks():
        schema = task["spec"]["dataSchema"]
        cols = [ColumnInfo("__time", "LONG", "time")]
        for d in schema["dimensionsSpec"]["dimensions"]:
            name, kind = (d, "string") if isinstance(d, str) else (d["name"], d.get("type", "string"))
            cols.append(ColumnInfo(name, kinds.get(kind, "STRING"), "dimension", multi_value=name == "tags"))
        for m in schema.get("metricsSpec", []):
            kind = "DOUBLE" if m["type"].startswith("double") else "LONG"
            cols.append(ColumnInfo(m["name"], kind, "metric"))
        out[schema["dataSource"]] = cols
    return Catalog(out)


def _translated(case: Case, catalog: Catalog) -> str:
    body = case.query if isinstance(case.query, dict) else {"query": case.query}
    try:
        return translate(body["query"], catalog, context=body.get("context"), parameters=body.get("parameters"),
                         now_ms=0).sql
    except DruidError as e:
        return f"error: {e.message}"


def test_dispatch_runs_exactly_the_rules_that_change_a_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the rules that declare a node see it; every statement of the differential corpus translates to the
    same DuckDB SQL as when every rule sees every node (so no rule misses a node it rewrites)."""
    catalog = _corpus_catalog()
    cases = [c for c in generate(20261125, n=600) if c.kind == "sql"]
    dispatched = [_translated(c, catalog) for c in cases]
    every = tuple(enumerate(FUNCTION_RULES))
    monkeypatch.setattr(rule_registry, "_rules_for", lambda kind, name: every)
    assert [_translated(c, catalog) for c in cases] == dispatched
    assert sum(not s.startswith("error:") for s in dispatched) > 500


def test_every_function_rule_declares_what_it_rewrites() -> None:
    for m in FUNCTION_RULE_MODULES:
        assert hasattr(m, "HANDLES") or hasattr(m, "ACCEPTS"), m.__name__
