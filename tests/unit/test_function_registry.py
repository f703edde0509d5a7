"""The Druid SQL function registry: every function of Druid 33's reference is implemented or refused
(never an unknown-function error), the implemented ones run on real segments, the refused ones answer
Druid's error naming the function, and docs/sql-functions.md is the table the registry generates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from serving.broker.sql import function_registry as registry
from serving.broker.sql.engine import execute
from serving.broker.sql.function_reference import FUNCTIONS, RETURN_RULES
from serving.errors import DruidError

DOC = Path(__file__).resolve().parents[2] / "docs" / "sql-functions.md"
#: the probe's arguments on the unit tests' ``wiki`` datasource (tests/fixtures/broker.py)
WIKI_ARGUMENTS = {**registry.PROBE_ARGUMENTS, "n": '"added"', "l": '"added"', "d": '"delta"', "s": '"page"',
                  "c": '"page"', "x": '"page"'}


def test_every_function_is_implemented_or_refused() -> None:
    assert len(FUNCTIONS) >= 200
    assert {registry.status(n) for n in FUNCTIONS} == {registry.IMPLEMENTED, registry.REFUSED}
    assert {f.returns for f in FUNCTIONS.values()} <= RETURN_RULES


def test_the_compatibility_table_is_generated_from_the_registry() -> None:
    assert DOC.read_text() == registry.markdown(), "run: python -m serving.broker.sql.function_registry > docs/sql-functions.md"
    for name in FUNCTIONS:
        assert f"| `{name}` |" in DOC.read_text()


def _run(env: Any, sql: str) -> list[tuple[Any, ...]]:
    res = execute(env.service, sql, metadata=env.metadata)
    try:
        return [row for b in res.batches() for row in zip(*[c.to_pylist() for c in b.columns], strict=True)]
    finally:
        res.close()


def test_implemented_functions_run_and_refused_ones_name_themselves(wiki: Any) -> None:
    failures = []
    for fn in FUNCTIONS.values():
        sql = registry.statement(fn, registry.fill(fn.template, WIKI_ARGUMENTS), table="wiki", key='"page"')
        if registry.status(fn.name) == registry.IMPLEMENTED:
            try:
                assert len(_run(wiki, sql)) >= 1
            except DruidError as e:
                if not (fn.name == "LOOKUP" and e.message == "Lookup [no_such_lookup] not found"):
                    failures.append(f"{fn.name}: {sql}: {e.message}")
        else:
            with pytest.raises(DruidError) as err:
                _run(wiki, sql)
            assert err.value.category == "UNSUPPORTED" and err.value.status == 501, sql
            assert fn.name in err.value.message
    assert not failures, "\n".join(failures)
