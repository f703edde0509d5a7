"""Every rebuild is a task (batch/rebuild_tasks.py, #51): a row in the task table with who started it, its
status and per-chunk report, and a log of its own served by Druid's task-log API — and only that."""

from __future__ import annotations

import tempfile
from pathlib import Path

import httpx

from batch.rebuild_tasks import TASK_TYPE, RebuildTask
from radstack.time.intervals import Interval, parse_instant
from tests.fixtures.server import running_server

DAY = Interval(parse_instant("2026-11-20T00:00:00Z"), parse_instant("2026-11-21T00:00:00Z"))


def test_a_rebuild_is_a_task_with_a_report_and_a_log_the_task_api_serves() -> None:
    with tempfile.TemporaryDirectory() as home, running_server(Path(home)) as srv:
        md = srv.ctx.metadata
        task = RebuildTask(srv.settings, md, "ads", DAY, chunks=2, force=False, started_by="radctl quickstart")
        running = httpx.get(f"{srv.url}/druid/indexer/v1/runningTasks", timeout=30).json()
        assert [t["id"] for t in running] == [task.id] and running[0]["type"] == TASK_TYPE
        task.line("rebuilding 2026-11-20T00:00:00.000Z/2026-11-21T00:00:00.000Z (2 chunk(s)) in one Spark job")
        task.finish_chunks([{"interval": "a", "status": "published"}, {"interval": "b", "status": "published"}])

        row = md.get_task(task.id)
        assert row is not None and row.status == "SUCCESS" and not row.active
        assert row.payload["startedBy"] == "radctl quickstart" and row.payload["interval"] == DAY.iso()
        assert row.report is not None and len(row.report["chunks"]) == 2
        sql = httpx.post(f"{srv.url}/druid/v2/sql", json={
            "query": "SELECT task_id, type, status FROM sys.tasks"}, timeout=30).json()
        assert sql == [{"task_id": task.id, "type": TASK_TYPE, "status": "SUCCESS"}]

        log = httpx.get(f"{srv.url}/druid/indexer/v1/task/{task.id}/log", timeout=30)
        assert log.status_code == 200 and "started by radctl quickstart" in log.text
        assert log.text.rstrip().endswith("SUCCESS: 2 of 2 chunk(s) published")
        tail = httpx.get(f"{srv.url}/druid/indexer/v1/task/{task.id}/log", params={"offset": -20}, timeout=30)
        assert tail.text == log.text[-20:]

        # a failed rebuild says why, in its status and its log
        bad = RebuildTask(srv.settings, md, "ads", DAY, chunks=1, force=True, started_by="airflow radstack_rebuild_ads r1")
        try:
            raise RuntimeError("the archive is unreachable")
        except RuntimeError as e:
            bad.failure(e)
        bad.finish_chunks([{"interval": "a", "status": "failed", "error": "RuntimeError: the archive is unreachable"}])
        row = md.get_task(bad.id)
        assert row is not None and row.status == "FAILED" and "unreachable" in (row.error_msg or "")
        text = httpx.get(f"{srv.url}/druid/indexer/v1/task/{bad.id}/log", timeout=30).text
        assert "Traceback" in text and "forced" in text


def test_the_log_api_reads_nothing_outside_the_logs_directory(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    with tempfile.TemporaryDirectory() as home, running_server(Path(home)) as srv:
        md = srv.ctx.metadata
        md.insert_task("t1", type=TASK_TYPE, datasource="ads", payload={})
        md.update_task("t1", status="SUCCESS", report={"log": str(secret)})
        md.insert_task("t2", type="index_parallel", datasource="ads", payload={})
        for task_id in ("t1", "t2", "nope"):
            r = httpx.get(f"{srv.url}/druid/indexer/v1/task/{task_id}/log", timeout=30)
            assert r.status_code == 404 and "not yours" not in r.text
