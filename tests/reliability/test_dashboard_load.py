"""50 dashboard clients against a real serving process (its own OS process, uvicorn) while batch
publishes swap versions underneath: every answer is 200 (the queue absorbs the burst; 429 only past
``server.max_queued_queries``), and every total equals one published version's total — never a mix.
Then SIGTERM with a long query running: the process exits within 10 s."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from radstack.spec import parse_data_schema
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.indexer import index_partition
from radstack.storage.metadata import MetadataStore
from radstack.storage.publish import publish
from tests.fixtures.broker import WIKI_SCHEMA, wiki_table
from tests.fixtures.server import server_settings
from tests.reliability.conftest import REPORT, SOAK, statuses
from tests.reliability.serving_process import ServingProcess

pytestmark = [pytest.mark.slow, pytest.mark.reliability, pytest.mark.alone]

CLIENTS = 50
SECONDS = 60 if SOAK else 20
SWAPS_EVERY = 2.0

SQL = [
    "SELECT SUM(added) AS total FROM wiki",
    "SELECT TIME_FLOOR(__time, 'PT1H') AS h, SUM(added) AS total FROM wiki GROUP BY 1 ORDER BY 1",
    "SELECT page, SUM(added) AS total FROM wiki GROUP BY page ORDER BY total DESC LIMIT 10",
    "SELECT country, COUNT(*) AS n, SUM(added) AS total FROM wiki WHERE __time >= TIMESTAMP '2024-01-01' GROUP BY 1",
]
NATIVE = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2024-01-01/2024-01-03"],
          "granularity": "all", "aggregations": [{"type": "longSum", "name": "total", "fieldName": "added"}]}


def _version_table(k: int) -> pa.Table:
    t = wiki_table()
    return t.set_column(t.schema.get_field_index("added"), "added", pc.multiply(t["added"], k))


def _total(kind: str, body: Any) -> int:
    if kind == "native":
        return int(body[0]["result"]["total"])
    return int(sum(r["total"] or 0 for r in body))


@pytest.fixture
def serving_process(tmp_path: Path) -> Any:
    home = tmp_path / "home"
    home.mkdir()
    srv = ServingProcess(home, RADSTACK_COORDINATOR__METADATA_POLL_SECONDS="0.2")
    srv.start()
    settings = server_settings(home, {"server": {"port": srv.port, "host": "127.0.0.1"}})
    try:
        yield srv.url, settings, srv.proc
    finally:
        srv.kill9()


def test_fifty_clients_while_versions_swap(serving_process: Any) -> None:
    url, settings, proc = serving_process
    metadata = MetadataStore.from_settings(settings)
    deep = open_deep_storage(settings)
    schema = parse_data_schema(WIKI_SCHEMA)
    base_total = int(pc.sum(wiki_table()["added"]).as_py())
    published: set[int] = set()

    def publish_version(k: int) -> None:
        version = f"2026-01-01T00:00:{k:02d}.000Z"
        res = index_partition(_version_table(k), schema, version=version, deep_storage=deep, shard="core")
        publish(metadata, deep, res.segments)
        published.add(base_total * k)

    publish_version(1)
    deadline = time.monotonic() + 30
    while httpx.post(f"{url}/druid/v2/sql", json={"query": SQL[0]}).json() != [{"total": base_total}]:
        assert time.monotonic() < deadline
        time.sleep(0.2)

    stop = threading.Event()
    wrong: list[Any] = []
    latencies: list[float] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as c:
            n = i
            while not stop.is_set():
                n += 1
                kind = "native" if n % 5 == 4 else "sql"
                t0 = time.monotonic()
                if kind == "native":
                    r = c.post("/druid/v2", json=NATIVE)
                else:
                    r = c.post("/druid/v2/sql", json={"query": SQL[n % len(SQL)]})
                with lock:
                    latencies.append(time.monotonic() - t0)
                    statuses("dashboard load")[r.status_code] += 1
                if r.status_code != 200:
                    wrong.append((r.status_code, r.text[:300]))
                    continue
                total = _total(kind, r.json())
                with lock:
                    allowed = set(published)
                if total not in allowed:
                    wrong.append(("mixed", kind, total, sorted(allowed)))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    started = time.monotonic()
    k = 1
    while time.monotonic() - started < SECONDS:
        time.sleep(SWAPS_EVERY)
        k += 1
        publish_version(k)  # a higher version overshadows the previous one, atomically
    stop.set()
    for t in threads:
        t.join(60)
    latencies.sort()
    hist: Counter[int] = statuses("dashboard load")
    REPORT["dashboard load"].update(
        clients=CLIENTS, seconds=SECONDS, versions_published=k, queries_per_s=round(sum(hist.values()) / SECONDS, 1),
        p50_ms=round(1000 * latencies[len(latencies) // 2]), p99_ms=round(1000 * latencies[int(len(latencies) * 0.99)]),
        errors=len([w for w in wrong if w[0] != "mixed"]), mixed_answers=len([w for w in wrong if w[0] == "mixed"]),
        load_average=round(os.getloadavg()[0], 2))
    assert wrong == [], wrong[:10]
    assert sum(hist.values()) > CLIENTS * 5

    # SIGTERM while a long query runs: the process is gone within 10 s
    aliases = "abcdefghijkl"  # 7^12 rows to sum: about a minute of DuckDB
    long_sql = ("SELECT SUM(" + " + ".join(f"{x}.added * {x}.ns" for x in aliases) + ") AS s FROM "
                + ", ".join(f"wiki {x}" for x in aliases))
    result: dict[str, Any] = {}

    def long_query() -> None:
        try:
            result["r"] = httpx.post(f"{url}/druid/v2/sql", json={"query": long_sql}, timeout=120)
        except httpx.HTTPError as e:
            result["error"] = e

    t = threading.Thread(target=long_query, daemon=True)
    t.start()
    time.sleep(1.5)
    assert t.is_alive(), result  # the long query is still running
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(15)
    stopped = time.monotonic() - t0
    REPORT["dashboard load"]["sigterm_exit_seconds"] = round(stopped, 2)
    assert stopped < 10
    metadata.close()
