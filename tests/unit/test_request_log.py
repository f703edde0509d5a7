"""One request-log line per query (``radstack.requests``, serving/request_log.py): method, path, status,
time, size, the query id the answer carries, user and client — and never the statement."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import httpx
import pytest

from tests.fixtures.server import running_server


def test_each_query_gets_one_line_with_its_id_status_and_time(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="radstack.requests")
    with tempfile.TemporaryDirectory() as home, running_server(Path(home)) as srv:
        ok = httpx.post(srv.url + "/druid/v2/sql", json={"query": "SELECT 'secret-literal' AS x"}, timeout=30)
        bad = httpx.post(srv.url + "/druid/v2/sql", json={"query": "SELECT nope FROM nowhere"}, timeout=30)
        httpx.get(srv.url + "/status/health", timeout=30)  # not a query: DEBUG, not in an INFO log
    lines = [r.getMessage() for r in caplog.records if r.name == "radstack.requests"]
    assert len(lines) == 2, lines
    qid = ok.headers["X-Druid-SQL-Query-Id"]
    assert lines[0].startswith("POST /druid/v2/sql 200 ") and f"id={qid}" in lines[0] and "client=127.0.0.1" in lines[0]
    assert " ms " in lines[0] and "user=-" in lines[0]
    assert lines[1].startswith(f"POST /druid/v2/sql {bad.status_code} ")
    assert not any("secret-literal" in line for line in lines)
