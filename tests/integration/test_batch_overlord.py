"""Overlord index tasks with large or remote inputs run through the Spark batch job: the raw archive
(``{"type": "archive"}``) and a JSON file in the real HDFS with ``context.useSpark``. Druid's rollup
tutorial events, whose five rolled-up rows Druid documents, are the input."""

from __future__ import annotations

import time
from typing import Any

import httpx
import orjson
import pytest

from tests.fixtures.batch import write_archive
from tests.integration.test_task_api import ROLLUP_DOCUMENTED, ROLLUP_EVENTS, rollup_task

pytestmark = pytest.mark.slow


def _wait(url: str, task_id: str, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = httpx.get(f"{url}/druid/indexer/v1/task/{task_id}/status", timeout=30).json()["status"]
        if st["status"] != "RUNNING":
            return st
        time.sleep(0.5)
    raise AssertionError(f"task {task_id} still running after {timeout}s")


def _rows(url: str) -> list[tuple[Any, ...]]:
    q = {"query": 'SELECT __time, "bytes", "count", dstIP, packets, srcIP FROM "rollup-tutorial" ORDER BY __time'}
    deadline = time.monotonic() + 15  # the broker polls the metadata store
    while True:
        r = httpx.post(f"{url}/druid/v2/sql", json=q, timeout=60)
        if r.status_code == 200 and r.json() or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert r.status_code == 200, r.text
    return [(x["__time"], x["bytes"], x["count"], x["dstIP"], x["packets"], x["srcIP"]) for x in r.json()]


def _submit(url: str, task: dict[str, Any]) -> str:
    r = httpx.post(f"{url}/druid/indexer/v1/task", json=task, timeout=30)
    assert r.status_code == 200, r.text
    return str(r.json()["task"])


def test_archive_task_runs_on_spark(radstack_server: Any) -> None:
    from radstack.storage.deep_storage import open_deep_storage

    storage = open_deep_storage(radstack_server.settings)
    # the archive holds every record; two are re-sent duplicates (same event id)
    events = [dict(e, id=f"f{i}") for i, e in enumerate(ROLLUP_EVENTS)]
    write_archive(storage, "netflow-raw", [orjson.dumps(e) for e in events + events[:2]], per_file=4)
    task = rollup_task({"type": "archive", "topics": ["netflow-raw"], "eventId": "id"})
    tid = _submit(radstack_server.url, task)
    st = _wait(radstack_server.url, tid)
    assert st["status"] == "SUCCESS", st
    assert _rows(radstack_server.url) == [tuple(r) for r in ROLLUP_DOCUMENTED]
    log = radstack_server.home / "logs" / f"task-{tid}.log"
    assert log.exists()  # ran as a child Spark process, logging to its own file
    report = httpx.get(f"{radstack_server.url}/druid/indexer/v1/task/{tid}/reports", timeout=30)
    if report.status_code == 200:
        assert orjson.dumps(report.json()).find(b'"processed":9') >= 0


def test_hdfs_json_task_with_use_spark(radstack_home: Any, hdfs_cluster: Any) -> None:
    import uuid

    from tests.fixtures.server import running_server

    base = f"/radstack-test/{uuid.uuid4().hex[:12]}"
    inputs = base + "-input"  # inputs live beside deep storage: never inside it (input_policy.py)
    with running_server(radstack_home, {"deep_storage": hdfs_cluster.deep_storage_settings(base),
                                        "ingestion": {"hdfs_paths": [inputs]}}) as srv:
        from radstack.storage.deep_storage import open_deep_storage

        storage = open_deep_storage(hdfs_cluster.deep_storage_settings(inputs))
        storage.put_bytes(b"\n".join(orjson.dumps(e) for e in ROLLUP_EVENTS) + b"\n", "rollup.json")
        path = inputs + "/rollup.json"
        task = rollup_task({"type": "hdfs", "paths": [path]}, inputFormat={"type": "json"})
        task["context"] = {"useSpark": True}
        tid = _submit(srv.url, task)
        st = _wait(srv.url, tid)
        assert st["status"] == "SUCCESS", st
        assert (srv.home / "logs" / f"task-{tid}.log").exists()
        assert _rows(srv.url) == [tuple(r) for r in ROLLUP_DOCUMENTED]
