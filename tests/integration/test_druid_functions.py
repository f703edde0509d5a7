"""The function registry against Druid 33 itself (``make test-druid``): every routine the real Druid
lists in ``INFORMATION_SCHEMA.ROUTINES`` (with the extensions the local oracle loads) is a function of
``serving/broker/sql/function_reference.py`` or one of its declared operators, and Druid agrees on which
are aggregates."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from serving.broker.sql.function_reference import FUNCTIONS, NOT_FUNCTIONS

pytestmark = [pytest.mark.slow, pytest.mark.druid]


def test_every_druid_routine_is_in_the_registry(local_druid: Any) -> None:
    r = httpx.post(f"{local_druid.broker_url}/druid/v2/sql", timeout=60, json={
        "query": "SELECT ROUTINE_NAME, IS_AGGREGATOR FROM INFORMATION_SCHEMA.ROUTINES", "resultFormat": "array"})
    assert r.status_code == 200, r.text
    routines = {name: agg == "YES" for name, agg in r.json()}
    assert len(routines) > 150
    functions = {name.upper(): agg for name, agg in routines.items() if name not in NOT_FUNCTIONS}
    missing = sorted(set(functions) - set(FUNCTIONS))
    assert not missing, f"Druid 33 lists functions the registry lacks: {missing}"
    # Druid's aggregates are the registry's aggregation and window groups (window functions are aggregators)
    wrong = sorted(n for n, agg in functions.items() if agg != (FUNCTIONS[n].aggregate or FUNCTIONS[n].window))
    assert not wrong, f"aggregate or not, Druid and the registry differ on: {wrong}"
    print(f"{len(functions)} Druid 33 routines, all in the registry of {len(FUNCTIONS)} functions")
