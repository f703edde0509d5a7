"""ARRAY columns against the real Apache Druid 33 (``make test-druid``): the same events ingested into
both with ``auto`` dimensions cast to ARRAY<STRING>/ARRAY<LONG> (and a multi-value dimension of the
same values for contrast), then the same SQL and native queries asked of both brokers: whole-array
grouping, array functions in filters, UNNEST, the types they report."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from radstack.druid_cluster.submit import OverlordClient
from tests.fixtures.druid_tasks import inline_task
from tests.integration.test_druid_cluster import native, sql, sync_broker, wait_broker_serves

pytestmark = [pytest.mark.slow, pytest.mark.druid]

DS = "arrays"
INTERVAL = "2026-01-01T00:00:00Z/2026-01-01T02:00:00Z"
EVENTS = [
    {"ts": "2026-01-01T00:10:00Z", "page": "A", "tags": ["b", "a"], "codes": [1, 2], "added": 1},
    {"ts": "2026-01-01T00:20:00Z", "page": "B", "tags": ["b", "a"], "codes": [1, 2], "added": 2},
    {"ts": "2026-01-01T00:30:00Z", "page": "C", "tags": ["a", "b", "a"], "codes": [3, 4], "added": 4},
    {"ts": "2026-01-01T01:10:00Z", "page": "D", "tags": ["c"], "codes": [7], "added": 8},
    {"ts": "2026-01-01T01:20:00Z", "page": "E", "tags": None, "codes": None, "added": 16},
]


def task() -> dict[str, Any]:
    dimensions = ["page", {"type": "auto", "name": "tags", "castToType": "ARRAY<STRING>"},
                  {"type": "auto", "name": "codes", "castToType": "ARRAY<LONG>"},
                  {"type": "string", "name": "mv", "multiValueHandling": "ARRAY"}]
    metrics = [{"type": "count", "name": "count"}, {"type": "longSum", "name": "added", "fieldName": "added"}]
    return inline_task(DS, [{**e, "mv": e["tags"]} for e in EVENTS], dimensions, metrics,
                       {"segmentGranularity": "hour", "queryGranularity": "none", "rollup": False,
                        "intervals": [INTERVAL]})


QUERIES = [
    'SELECT tags, SUM(added) AS s FROM arrays GROUP BY tags ORDER BY s',
    'SELECT codes, COUNT(*) AS n FROM arrays GROUP BY codes ORDER BY n DESC, codes',
    'SELECT mv, SUM(added) AS s FROM arrays GROUP BY mv ORDER BY s',
    "SELECT SUM(added) AS s FROM arrays WHERE ARRAY_CONTAINS(tags, 'a')",
    "SELECT SUM(added) AS s FROM arrays WHERE ARRAY_OVERLAP(codes, ARRAY[2, 7])",
    "SELECT page, ARRAY_LENGTH(tags) AS l, ARRAY_OFFSET(codes, 0) AS c0 FROM arrays ORDER BY __time",
    "SELECT t, COUNT(*) AS n FROM arrays CROSS JOIN UNNEST(tags) AS u(t) GROUP BY t ORDER BY t",
    "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'arrays' "
    "AND COLUMN_NAME IN ('tags', 'codes', 'mv') ORDER BY 1",
]


FILTERS = [
    {"type": "arrayContainsElement", "column": "tags", "elementMatchValueType": "STRING", "elementMatchValue": "a"},
    {"type": "arrayContainsElement", "column": "codes", "elementMatchValueType": "LONG", "elementMatchValue": 4},
    {"type": "not", "field": {"type": "arrayContainsElement", "column": "tags", "elementMatchValueType": "STRING",
                              "elementMatchValue": "a"}},
    {"type": "equals", "column": "tags", "matchValueType": "ARRAY<STRING>", "matchValue": ["b", "a"]},
    {"type": "equals", "column": "codes", "matchValueType": "ARRAY<LONG>", "matchValue": [7]},
    {"type": "null", "column": "tags"},
]


def _sorted_rows(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(orjson.dumps(r, option=orjson.OPT_SORT_KEYS).decode() for r in rows)


def test_array_columns_answer_as_druids(radstack_server: Any, local_druid: Any) -> None:
    for url in (radstack_server.url, local_druid.overlord_url):
        with OverlordClient(url) as client:
            st = client.wait_for_task(client.submit_task(task()), timeout_s=300, poll_s=0.5)
            assert st.ok, st
    sync_broker(radstack_server)
    with OverlordClient(local_druid.overlord_url) as druid:
        druid.wait_for_load(DS, timeout_s=120)
        wait_broker_serves(local_druid.broker_url, DS)
    for q in QUERIES:
        ours, theirs = sql(radstack_server.url, q), sql(local_druid.broker_url, q)
        assert ours == theirs, f"{q}\nradstack: {ours}\nDruid:    {theirs}"
    group_by = {"queryType": "groupBy", "dataSource": DS, "intervals": [INTERVAL], "granularity": "all",
                "dimensions": [{"type": "default", "dimension": "codes", "outputName": "codes",
                                "outputType": "ARRAY<LONG>"}],
                "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]}
    ours, theirs = native(radstack_server.url, group_by), native(local_druid.broker_url, group_by)
    assert _sorted_rows([r["event"] for r in ours]) == _sorted_rows([r["event"] for r in theirs]), (ours, theirs)
    for flt in FILTERS:
        scan = {"queryType": "scan", "dataSource": DS, "intervals": [INTERVAL], "columns": ["page"],
                "resultFormat": "compactedList", "filter": flt}
        ours, theirs = ([r[0] for b in native(url, scan) for r in b["events"]]
                        for url in (radstack_server.url, local_druid.broker_url))
        assert sorted(ours) == sorted(theirs), (flt, ours, theirs)
