"""The IXP example applied at query time (examples/ixp, docs/lookups.md): netflow samples indexed with
their raw IP addresses, then the generator's IP-range → AS table, AS → country codes and the country-code
map posted as lookups and read through ``LOOKUP()`` in SQL and lookup dimension specs in native queries.
Every answer is checked against the generator's own tables."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from realtime.generators import netflow
from realtime.generators.common import GeneratorOptions
from tests.integration.test_batch_overlord import _submit, _wait

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ixp"
START = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _example(name: str, data: Path) -> Any:
    return orjson.loads((EXAMPLES / name).read_text().replace("@DATA@", str(data)))


def _sql(url: str, query: str) -> list[dict[str, Any]]:
    r = httpx.post(f"{url}/druid/v2/sql", json={"query": query}, timeout=60)
    assert r.status_code == 200, r.text
    return list(r.json())


def test_ixp_lookups_at_query_time(radstack_server: Any) -> None:
    url = radstack_server.url
    data = radstack_server.settings.data_dir / "netflow"
    tables = netflow.Tables(11)
    tables.write(data)
    opts = GeneratorOptions(events=2000, seed=11, start_ms=START, duplicates=0.0, late=0.0)
    samples = [orjson.loads(e.value) for e in netflow.generate(opts, START, tables)]
    (data / "netflow.jsonl").write_bytes(b"\n".join(orjson.dumps(s) for s in samples) + b"\n")

    st = _wait(url, _submit(url, _example("netflow-index.json", data)))
    assert st["status"] == "SUCCESS", st
    root = f"{url}/druid/coordinator/v1/lookups/config"
    assert httpx.post(root, json={}).status_code == 202
    assert httpx.post(root, json=_example("lookups.json", data)).status_code == 202
    status = httpx.get(f"{url}/druid/coordinator/v1/lookups/status").json()["__default"]
    assert all(s["loaded"] for s in status.values()), status

    deadline = time.monotonic() + 30  # the broker polls the metadata store for the task's segments
    while not _sql(url, "SELECT COUNT(*) AS n FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_NAME = 'netflow_ips'")[0]["n"]:
        assert time.monotonic() < deadline, "netflow_ips not served"
        time.sleep(0.3)

    by_as: Counter[str] = Counter()
    by_country: Counter[str] = Counter()
    by_server: Counter[str] = Counter()
    for s in samples:
        by_as[tables.as_name_of(s["srcIP"]) or "unknown"] += s["ipSize"]
        by_country[str(tables.country_of(s["dstIP"]))] += s["ipSize"]
        if s["dstIP"] in tables.dns:
            by_server[tables.dns[s["dstIP"]]] += 1

    queries = [q.strip() for q in (EXAMPLES / "queries.sql").read_text().split(";") if q.strip()]
    rows = _sql(url, queries[0])
    assert {r["src_as"]: r["bytes"] for r in rows} == dict(by_as)
    assert [r["bytes"] for r in rows] == sorted(by_as.values(), reverse=True)
    rows = _sql(url, queries[1])
    assert {r["dst_country"]: r["bytes"] for r in rows} == dict(by_country)
    rows = _sql(url, queries[2])
    assert len(rows) == min(10, len(by_server))
    assert all(by_server[r["server"]] == r["samples"] for r in rows)

    # the same through a native groupBy with a registered lookup dimension spec
    native = {"queryType": "groupBy", "dataSource": "netflow_ips", "granularity": "all",
              "intervals": ["2026-01-01/2026-01-02"],
              "dimensions": [{"type": "lookup", "dimension": "srcIP", "outputName": "src_as", "name": "ip_as",
                              "replaceMissingValueWith": "unknown"}],
              "aggregations": [{"type": "longSum", "name": "bytes", "fieldName": "bytes"}]}
    out = httpx.post(f"{url}/druid/v2", json=native, timeout=60).json()
    assert {r["event"]["src_as"]: r["event"]["bytes"] for r in out} == dict(by_as)
