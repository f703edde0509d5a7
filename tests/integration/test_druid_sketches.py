"""radstack's DataSketches against the real Apache Druid 33 (``make test-druid``): the same events
ingested into both with ``HLLSketchBuild`` and ``thetaSketch`` metrics (Druid's ``druid-datasketches``
extension; radstack's ``radstack/sketches/``), then the same SQL asked of both brokers. The HLL and
theta estimates must be equal — same library, same hashing, same merges."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from radstack.druid_cluster.submit import OverlordClient
from tests.fixtures.druid_tasks import inline_task
from tests.integration.test_druid_cluster import sql, sync_broker, wait_broker_serves

pytestmark = [pytest.mark.slow, pytest.mark.druid]

DS = "sketched"
INTERVAL = "2026-01-01T00:00:00Z/2026-01-01T03:00:00Z"


def events(n: int = 4000, seed: int = 11) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [{"ts": f"2026-01-01T0{i % 3}:{(i // 3) % 60:02d}:{i % 60:02d}Z", "page": rng.choice("ABC"),
             "user": f"user-{rng.randrange(6000)}"} for i in range(n)]


def task(rows: list[dict[str, Any]], data_source: str = DS, dimensions: tuple[str, ...] = ("page",)) -> dict[str, Any]:
    metrics = [{"type": "count", "name": "count"},
               {"type": "HLLSketchBuild", "name": "users_hll", "fieldName": "user", "lgK": 12, "tgtHllType": "HLL_4"},
               {"type": "thetaSketch", "name": "users_theta", "fieldName": "user", "size": 1024}]
    return inline_task(data_source, rows, dimensions, metrics, {"segmentGranularity": "hour", "queryGranularity": "hour",
                                                                "rollup": True, "intervals": [INTERVAL]})


QUERIES = [
    "SELECT APPROX_COUNT_DISTINCT_DS_HLL(users_hll) AS h, APPROX_COUNT_DISTINCT_DS_THETA(users_theta) AS t FROM sketched",
    "SELECT page, APPROX_COUNT_DISTINCT_DS_HLL(users_hll) AS h, APPROX_COUNT_DISTINCT_DS_THETA(users_theta) AS t, "
    'SUM("count") AS n FROM sketched GROUP BY page ORDER BY page',
    "SELECT HLL_SKETCH_ESTIMATE(DS_HLL(users_hll)) AS h, THETA_SKETCH_ESTIMATE(DS_THETA(users_theta)) AS t FROM sketched",
    # query-time sketches of a raw string column (one sketch per segment in Druid, merged)
    'SELECT APPROX_COUNT_DISTINCT_DS_HLL("user") AS h, APPROX_COUNT_DISTINCT_DS_THETA("user") AS t FROM sketched_raw',
]


def test_hll_and_theta_estimates_equal_druids(radstack_server: Any, local_druid: Any, tmp_path: Path) -> None:
    tasks = (task(events()), task(events(), "sketched_raw", ("page", "user")))
    for url in (radstack_server.url, local_druid.overlord_url):
        with OverlordClient(url) as client:
            for t in tasks:
                st = client.wait_for_task(client.submit_task(t), timeout_s=300, poll_s=0.5)
                assert st.ok, st
    sync_broker(radstack_server)
    with OverlordClient(local_druid.overlord_url) as druid:
        for ds in (DS, "sketched_raw"):
            druid.wait_for_load(ds, timeout_s=120)
            wait_broker_serves(local_druid.broker_url, ds)
    truth = len({e["user"] for e in events()})
    for q in QUERIES:
        ours, theirs = sql(radstack_server.url, q), sql(local_druid.broker_url, q)
        assert ours == theirs, f"{q}\nradstack: {ours}\nDruid:    {theirs}"
    total = sql(radstack_server.url, QUERIES[0])[0]
    assert abs(total["h"] - truth) < 0.03 * truth and abs(total["t"] - truth) < 0.1 * truth
