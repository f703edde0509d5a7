"""Big SQL statements are planned in a worker process (serving/broker/sql/planning_pool.py): the same
answers, the same errors, and the planning happens in another process."""

from __future__ import annotations

import os
from typing import Any

import pytest

from serving.broker.sql import planning_pool
from serving.broker.sql.engine import catalog_of, execute
from serving.broker.sql.translate import translate
from serving.errors import DruidError


@pytest.fixture(autouse=True, scope="module")
def _workers_stopped_at_the_end() -> Any:
    yield
    planning_pool.shutdown()


def _big(where: str) -> str:
    pages = ", ".join(f"'page_{i:05d}'" for i in range(1200))
    sql = f"SELECT page, COUNT(*) AS n FROM wiki WHERE page IN ({pages}, 'Main', 'Talk') {where} GROUP BY 1 ORDER BY 1"
    assert len(sql) >= planning_pool.OFFLOAD_CHARS
    return sql


def _rows(env: Any, sql: str) -> list[tuple[Any, ...]]:
    res = execute(env.service, sql, metadata=env.metadata)
    try:
        return [row for b in res.batches() for row in zip(*[c.to_pylist() for c in b.columns], strict=True)]
    finally:
        res.close()


def test_a_big_statement_is_planned_by_a_worker_process(wiki: Any) -> None:
    assert wiki.settings.server.planning_processes == 1  # on by default
    assert _rows(wiki, _big("")) == [("Main", 4), ("Talk", 2)]
    workers = planning_pool._pool._processes if planning_pool._pool is not None else {}  # type: ignore[attr-defined]
    assert workers and os.getpid() not in workers
    # the same translation as in the server process
    catalog = catalog_of(wiki.service, wiki.service.state)
    here = translate(_big("AND 1 = 1"), catalog)
    there = translate(_big("AND 1 = 1"), catalog, planning_processes=1)
    assert (here.sql, here.datasources) == (there.sql, there.datasources)


@pytest.mark.parametrize("where", ["AND NOSUCH_FN(page) = 1", "AND page = ", "AND BLOOM_FILTER_TEST(page, 'x') = 1"])
def test_a_workers_error_is_the_servers(wiki: Any, where: str) -> None:
    catalog = catalog_of(wiki.service, wiki.service.state)
    with pytest.raises(DruidError) as here:
        translate(_big(where), catalog)
    with pytest.raises(DruidError) as there:
        translate(_big(where), catalog, planning_processes=1)
    assert (there.value.status, there.value.to_json()) == (here.value.status, here.value.to_json())


def test_a_requests_id_and_timeout_do_not_defeat_the_translation_memo(wiki: Any) -> None:
    catalog = catalog_of(wiki.service, wiki.service.state)
    sql = "SELECT TIME_FLOOR(__time, 'P1D') AS d, COUNT(*) AS n FROM wiki GROUP BY 1"
    first = translate(sql, catalog, context={"sqlQueryId": "a", "timeout": 1000, "priority": 5})
    assert translate(sql, catalog, context={"sqlQueryId": "b", "timeout": 2000}) is first
    other_zone = translate(sql, catalog, context={"sqlQueryId": "c", "sqlTimeZone": "America/New_York"})
    assert other_zone is not first and other_zone.sql != first.sql


def test_a_worker_yields_the_cpu_to_the_server(wiki: Any) -> None:
    assert _rows(wiki, _big("AND 2 = 2")) == [("Main", 4), ("Talk", 2)]
    pool = planning_pool._pool
    assert pool is not None
    for pid in pool._processes:  # type: ignore[attr-defined]
        assert os.getpriority(os.PRIO_PROCESS, pid) >= min(19, os.getpriority(os.PRIO_PROCESS, 0) + planning_pool.WORKER_NICENESS)


def test_when_no_worker_can_start_the_statement_is_planned_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """A program that embeds the server without spawn's ``__main__`` guard cannot start workers: the
    statement is still answered (planned in the server's process), not a 5xx."""
    def cannot_spawn(_processes: int) -> Any:
        raise RuntimeError("An attempt has been made to start a new process before the current process has "
                           "finished its bootstrapping phase.")

    monkeypatch.setattr(planning_pool, "_executor", cannot_spawn)
    assert planning_pool.run_planning(1, os.getpid) == os.getpid()  # ran here
    monkeypatch.setattr(planning_pool, "_executor", lambda _n: (_ for _ in ()).throw(RuntimeError("other")))
    with pytest.raises(RuntimeError, match="other"):  # any other failure is not hidden
        planning_pool.run_planning(1, os.getpid)
