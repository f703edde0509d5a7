"""``/metrics`` of the real server (uvicorn, real HTTP) parses with Prometheus' own text parser and
moves with what happens: queries by type, errors by code, segment states; ``serve_metrics`` serves
the same format for processes without a server; the platform's own metrics become the queryable
datasource ``radstack_metrics``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from prometheus_client.parser import text_string_to_metric_families

from radstack import metrics

pytestmark = pytest.mark.slow

SCHEMA = {
    "dataSource": "wiki",
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["page"]},
    "metricsSpec": [{"type": "count", "name": "count"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour"},
}


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(fams: dict[str, Any], family: str, sample_name: str, **labels: str) -> float | None:
    for s in fams[family].samples:
        if s.name == sample_name and all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    return None


def index_wiki(srv: Any) -> None:
    from radstack.spec import parse_data_schema
    from radstack.storage.indexer import index_partition
    from radstack.storage.publish import publish

    t = pa.table({"ts": ["2024-01-01T00:10:00Z", "2024-01-01T01:00:00Z", "2024-01-02T00:00:00Z"],
                  "page": ["a", "b", "a"], "added": [1, 2, 3]})
    res = index_partition(t, parse_data_schema(SCHEMA), version="2024-02-01T00:00:00.000Z",
                          deep_storage=srv.ctx.deep_storage)
    publish(srv.ctx.metadata, srv.ctx.deep_storage, res.segments)
    # an overshadowed and an unused segment, for the coordinator gauges
    res2 = index_partition(t.slice(0, 1), parse_data_schema(SCHEMA), version="2024-01-15T00:00:00.000Z",
                           deep_storage=srv.ctx.deep_storage)
    publish(srv.ctx.metadata, srv.ctx.deep_storage, res2.segments)


def wait_for(fn: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.1)


def test_metrics_endpoint_parses_and_counts_queries(radstack_home: Path) -> None:
    from tests.fixtures.server import running_server

    with running_server(radstack_home, {"coordinator": {"period_seconds": 3600}}) as srv:
        index_wiki(srv)
        url = srv.url
        before = families(httpx.get(f"{url}/metrics").text)
        sql_before = sample(before, "radstack_broker_queries", "radstack_broker_queries_total", type="sql") or 0.0

        def served() -> bool:
            r = httpx.post(f"{url}/druid/v2/sql", json={"query": 'SELECT SUM("count") AS c FROM wiki'})
            return r.status_code == 200 and r.json() == [{"c": 3}]

        assert wait_for(served)
        r = httpx.post(f"{url}/druid/v2", json={"queryType": "timeseries", "dataSource": "wiki", "granularity": "all",
                                                 "intervals": ["2024-01-01/2024-01-03"],
                                                 "aggregations": [{"type": "longSum", "name": "a", "fieldName": "added"}]})
        assert r.status_code == 200, r.text
        bad = httpx.post(f"{url}/druid/v2/sql", json={"query": "SELECT nope FROM wiki"})
        assert bad.status_code == 400
        code = bad.json().get("errorCode") or bad.json().get("error")

        resp = httpx.get(f"{url}/metrics")
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
        fams = families(resp.text)
        for name in ("radstack_ingest_events_in", "radstack_ingest_lag_records", "radstack_ingest_batch_duration_seconds",
                     "radstack_archiver_records", "radstack_archiver_watermark_ms", "radstack_broker_queries",
                     "radstack_broker_query_latency_seconds", "radstack_broker_query_errors",
                     "radstack_broker_segments_served", "radstack_coordinator_segments",
                     "radstack_compaction_intervals", "radstack_kill_segments"):
            assert name in fams, name
        sql_after = sample(fams, "radstack_broker_queries", "radstack_broker_queries_total", type="sql")
        assert sql_after is not None and sql_after >= sql_before + 2  # the successful and the failed one
        assert (sample(fams, "radstack_broker_queries", "radstack_broker_queries_total", type="timeseries") or 0) >= 1
        assert (sample(fams, "radstack_broker_query_latency_seconds", "radstack_broker_query_latency_seconds_count",
                       type="timeseries") or 0) >= 1
        assert (sample(fams, "radstack_broker_query_errors", "radstack_broker_query_errors_total", code=code) or 0) >= 1
        assert sample(fams, "radstack_coordinator_segments", "radstack_coordinator_segments", datasource="wiki",
                      state="used") == 3
        assert sample(fams, "radstack_coordinator_segments", "radstack_coordinator_segments", datasource="wiki",
                      state="overshadowed") == 1
        srv.ctx.metadata.mark_unused([s.identifier for s in srv.ctx.metadata.segments("wiki")
                                      if s.version.startswith("2024-01-15")])
        fams = families(httpx.get(f"{url}/metrics").text)
        assert sample(fams, "radstack_coordinator_segments", "radstack_coordinator_segments", datasource="wiki",
                      state="unused") == 1
        assert sample(fams, "radstack_coordinator_segments", "radstack_coordinator_segments", datasource="wiki",
                      state="used") == 2


def test_serve_metrics_standalone() -> None:
    metrics.record_ingestion("ads", {"processed": 7, "thrownAway": 2, "unparseable": 1}, dead_lettered=1,
                             duration_s=0.5)
    metrics.record_archive("events", 10, 2048, watermark_ms=1_700_000_000_000)
    server, thread = metrics.serve_metrics(0)
    try:
        port = server.server_port
        fams = families(httpx.get(f"http://127.0.0.1:{port}/metrics").text)
        assert (sample(fams, "radstack_ingest_events_in", "radstack_ingest_events_in_total", datasource="ads") or 0) >= 11
        assert (sample(fams, "radstack_ingest_events_dead_lettered", "radstack_ingest_events_dead_lettered_total",
                       datasource="ads") or 0) >= 1
        assert sample(fams, "radstack_archiver_watermark_ms", "radstack_archiver_watermark_ms",
                      topic="events") == 1_700_000_000_000
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_self_metrics_are_queryable_with_sql(radstack_home: Path) -> None:
    from tests.fixtures.server import running_server

    overrides = {"coordinator": {"period_seconds": 0.2, "self_metrics": {"on": True, "period_seconds": 0.5}}}
    with running_server(radstack_home, overrides) as srv:
        index_wiki(srv)
        url = srv.url
        httpx.post(f"{url}/druid/v2/sql", json={"query": "SELECT 1"})

        def rows() -> list[Any]:
            r = httpx.post(f"{url}/druid/v2/sql", json={
                "query": "SELECT metric, MAX(value_max) AS v FROM radstack_metrics "
                         "WHERE metric = 'radstack_coordinator_runs_total' GROUP BY metric"})
            return r.json() if r.status_code == 200 else []

        got = wait_for(rows, 30)
        assert got and got[0]["metric"] == "radstack_coordinator_runs_total" and got[0]["v"] >= 1
        r = httpx.post(f"{url}/druid/v2/sql", json={
            "query": "SELECT COUNT(DISTINCT metric) AS n FROM radstack_metrics"})
        assert r.status_code == 200 and r.json()[0]["n"] >= 10
