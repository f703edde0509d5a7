"""The attack suite of #49 (tests/reliability/attacks.py): every shape against one serving process with
``server.memory_limit`` 512 MiB, run under an address-space limit, while a second user queries.

Asserted per shape: the server answers afterwards; its peak RSS stays within the memory guard's budget
(memory_limit + memory_headroom) plus what DuckDB's threads can build after the guard's look and before the
interrupt takes effect (one vector of 2,048 rows of the widest value a function may build, per thread); the
victim got every answer (no error, never starved: its own user lane) within 2 s at p99; and no query held
a slot 2 s after the attack ended or was abandoned. The victim's p99 against its idle p99 is reported per
shape (test-artifacts/reliability.json, and the table in docs/security.md)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from radstack.sql_text import DEFAULT_MAX_VALUE_BYTES
from tests.reliability.attacks import (
    DUCKDB_THREADS,
    MEMORY_HEADROOM_MIB,
    MEMORY_LIMIT_MIB,
    SHAPES,
    Shape,
    Target,
    Victim,
    measure,
    serving,
)
from tests.reliability.conftest import REPORT

pytestmark = [pytest.mark.slow, pytest.mark.reliability, pytest.mark.alone]

#: DuckDB stops an interrupted query between two vectors, so the vector each thread is computing when the
#: guard acts is still built: 2,048 rows of values up to server.max_string_bytes (a streamed scan of 60 KB
#: rows, native-scan-big-answer, reaches the budget and is stopped there)
IN_FLIGHT_MIB = DUCKDB_THREADS * 2048 * DEFAULT_MAX_VALUE_BYTES // 2**20
PEAK_RSS_MB = MEMORY_LIMIT_MIB + MEMORY_HEADROOM_MIB + IN_FLIGHT_MIB
VICTIM_P99_CEILING_MS = 2000
SLOT_FREE_SECONDS = 2.0


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Target, list[float]]]:
    with serving(tmp_path_factory.mktemp("attacks") / "home") as t:
        victim = Victim(t)
        victim.run_for(20)
        yield t, victim.run_for(100)


#: shapes whose acceptance is not met yet, each with why (they still run and are reported)
KNOWN_GAPS: dict[str, str] = {}


def _params() -> list[Any]:
    return [pytest.param(s, id=s.name, marks=pytest.mark.xfail(reason=KNOWN_GAPS[s.name], strict=False))
            if s.name in KNOWN_GAPS else pytest.param(s, id=s.name) for s in SHAPES]


@pytest.mark.parametrize("shape", _params())
def test_attack_shape(target: tuple[Target, list[float]], shape: Shape) -> None:
    t, idle = target
    res = measure(t, shape, idle)
    REPORT.setdefault("attacks", {})[shape.name] = asdict(res)
    assert res.alive, res
    assert res.peak_rss_mb <= PEAK_RSS_MB, res
    assert res.victim_errors == 0 and res.victim_p99_ms <= VICTIM_P99_CEILING_MS, res
    assert res.slot_free_s is not None and res.slot_free_s <= SLOT_FREE_SECONDS, res
    # 503: a connection past the caps; 504: a query that ran into its own timeout (Druid's answer)
    assert not any(code.startswith("5") and code not in ("503", "504") for code in res.attack_statuses), res


def test_at_least_thirty_shapes_across_every_kind() -> None:
    kinds: dict[str, Any] = {}
    for s in SHAPES:
        kinds.setdefault(s.kind, []).append(s.name)
    assert len(SHAPES) >= 30 and set(kinds) == {"memory", "time", "sharing", "http", "streaming"}, kinds
    assert len({s.name for s in SHAPES}) == len(SHAPES)


def test_the_suite_finds_its_datasource(target: tuple[Target, list[float]]) -> None:
    t, idle = target
    assert len(idle) == 100 and Path(f"/proc/{t.pid}").exists()
