"""The shell blocks of docs/ that name these tests (``<!-- docs-test: … -->``, tests/docs_blocks.py), run as
written with bash against a server started here: ``localhost:8888`` / ``127.0.0.1:8888`` become its
address and a ``radctl serve`` line is that server (it is already running). Each block's effect is then
checked through the API, as a reader of the docs would look."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.docs_blocks import ROOT, Block, run_by
from tests.fixtures.server import running_server

pytestmark = pytest.mark.slow

HERE = "tests/integration/test_docs_examples.py"


def _bash(block: Block, hostport: str, env: dict[str, str] | None = None) -> str:
    lines = [line for line in block.body.splitlines() if not line.lstrip().startswith("radctl serve")]
    script = "\n".join(lines).replace("localhost:8888", hostport).replace("127.0.0.1:8888", hostport)
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                                            **(env or {})})
    assert proc.returncode == 0, f"{block.where} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _json_values(text: str) -> list[Any]:
    """Every JSON value curl printed (its answers follow each other without newlines)."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        try:
            value, i = decoder.raw_decode(text, i)
            out.append(value)
        except ValueError:  # not JSON (a plain-text answer): skip to the next line
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl + 1
    return out


def _wait_task(url: str, task_id: str) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status = httpx.get(f"{url}/druid/indexer/v1/task/{task_id}/status", timeout=30).json()["status"]["status"]
        if status != "RUNNING":
            return str(status)
        time.sleep(0.2)
    raise AssertionError(f"task {task_id} still running")


def test_ingestion_examples_run_as_written() -> None:
    blocks = run_by(f"{HERE}::test_ingestion_examples_run_as_written")
    assert [b.file.name for b in blocks] == ["ingestion.md"] * 4
    start, submit, task_calls, coordinator = blocks
    with tempfile.TemporaryDirectory() as home, running_server(Path(home)) as srv:
        hostport = srv.url.split("//", 1)[1]
        assert _bash(start, hostport).strip() == "true"  # the health check
        # the rollup tutorial's task, with its relative baseDir (read against the checkout)
        answer = _json_values(_bash(submit, hostport))
        task_id = answer[0]["task"]
        assert _wait_task(srv.url, task_id) == "SUCCESS"
        srv.ctx.broker.refresh(force=True)  # the publish, read at once (else the next poll picks it up)
        rows = httpx.post(f"{srv.url}/druid/v2/sql", json={
            "query": 'SELECT COUNT(*) AS "rows", SUM("count") AS events FROM "rollup-tutorial"'}, timeout=30).json()
        assert rows == [{"rows": 5, "events": 9}]  # Druid's rollup tutorial: 9 input rows rolled up to 5
        out = _json_values(_bash(task_calls, hostport, {"TASK": task_id}))
        assert out[0]["status"]["status"] == "SUCCESS" and "ingestionStatsAndErrors" in out[1]
        listed = _json_values(_bash(coordinator, hostport))
        assert any(d.get("name") == "rollup-tutorial" for d in listed[0])
        assert listed[1] and all(s["dataSource"] == "rollup-tutorial" for s in listed[1])
        assert listed[2]["numChangedSegments"] >= 1  # the week's segment, marked unused


def test_lookup_examples_run_as_written() -> None:
    [block] = run_by(f"{HERE}::test_lookup_examples_run_as_written")
    with tempfile.TemporaryDirectory() as home, running_server(Path(home)) as srv:
        out = _json_values(_bash(block, srv.url.split("//", 1)[1]))
        assert out[-1] == {"__default": {"country": {"loaded": True}}}
        got = httpx.post(f"{srv.url}/druid/v2/sql", json={
            "query": "SELECT LOOKUP('DE', 'country') AS name"}, timeout=30).json()
        assert got == [{"name": "Germany"}]
