"""serving/app.py in-process (Starlette TestClient; SQLite + local deep storage in a temp home)."""

from __future__ import annotations

import base64
import logging
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from operations.server import create_server_app as create_app
from radstack.passwords import hash_password
from tests.fixtures.server import server_settings

USERS = [{"name": "ann", "password_hash": hash_password("s3cret"), "role": "admin"},
         {"name": "rita", "password_hash": hash_password("reader"), "role": "read"}]


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture
def client_with(radstack_home: Path) -> Iterator[Any]:
    clients: list[TestClient] = []

    def make(overrides: dict[str, Any]) -> TestClient:
        app = create_app(server_settings(radstack_home, overrides))
        c = TestClient(app, raise_server_exceptions=False)
        c.__enter__()
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.__exit__(None, None, None)


def test_status_health_and_unknown_route(server_client: TestClient) -> None:
    assert server_client.get("/status/health").json() is True
    st = server_client.get("/status").json()
    assert set(st) == {"version", "modules", "memory"} and st["memory"]["usedMemory"] > 0
    r = server_client.get("/druid/nothing-here")
    assert r.status_code == 404 and r.json()["error"] == "druidException" and r.json()["category"] == "NOT_FOUND"


def test_unexpected_exception_is_a_generic_500_whose_id_finds_the_log(
        server_client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    def boom() -> None:
        raise RuntimeError("kaboom at /srv/secret/path")

    server_client.app.add_api_route("/test-boom", boom)  # type: ignore[attr-defined]
    errors_log = logging.getLogger("serving.errors")
    errors_log.addHandler(caplog.handler)  # directly: another test's logging config may stop propagation
    try:
        with caplog.at_level(logging.ERROR, logger="serving.errors"):
            r = server_client.get("/test-boom")
    finally:
        errors_log.removeHandler(caplog.handler)
    assert r.status_code == 500
    body = r.json()
    assert body["error"] == "druidException" and body["category"] == "RUNTIME_FAILURE"
    assert "kaboom" not in r.text and "RuntimeError" not in r.text and "/srv" not in r.text
    error_id = body["context"]["errorId"]
    assert error_id in body["errorMessage"]
    logged = [rec for rec in caplog.records if error_id in rec.getMessage()]
    assert logged and "kaboom at /srv/secret/path" in logged[0].getMessage() and logged[0].exc_info
    assert server_client.get("/status/health").json() is True  # still serving


def test_body_size_limit(client_with: Any) -> None:
    c = client_with({"server": {"max_body_bytes": 100}})
    r = c.post("/druid/indexer/v1/task", content=b"x" * 500, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"] == "druidException"
    assert "max_body_bytes" in r.json()["errorMessage"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while streaming
        for _ in range(10):
            yield b"y" * 50

    r = c.post("/druid/indexer/v1/task", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    r = c.post("/druid/indexer/v1/task", content=b"{}", headers={"content-type": "application/json"})
    assert r.status_code == 400  # small bodies pass the limit (and fail validation)


def test_basic_auth_roles(client_with: Any) -> None:
    c = client_with({"server": {"auth": {"enabled": True, "users": USERS}}})
    r = c.get("/druid/indexer/v1/tasks")
    assert r.status_code == 401 and r.json()["category"] == "UNAUTHORIZED"
    assert r.headers["www-authenticate"].startswith("Basic")
    assert c.get("/druid/indexer/v1/tasks", headers=_basic("ann", "wrong")).status_code == 401
    assert c.get("/druid/indexer/v1/tasks", headers=_basic("rita", "reader")).status_code == 200
    assert c.get("/status/health").json() is True  # unsecured path
    r = c.post("/druid/indexer/v1/task", json={"type": "index_parallel"}, headers=_basic("rita", "reader"))
    assert r.status_code == 403 and r.json()["category"] == "FORBIDDEN"
    r = c.post("/druid/indexer/v1/task", json={"type": "index_parallel"}, headers=_basic("ann", "s3cret"))
    assert r.status_code == 400  # authorised, then rejected as a bad spec
    r = c.post("/druid/coordinator/v1/rules/x", json=[], headers=_basic("rita", "reader"))
    assert r.status_code == 403


def test_inline_task_runs_in_process(server_client: TestClient) -> None:
    import time

    task = {"type": "index", "id": "my-inline-task", "dataSchema": {
        "dataSource": "t", "timestampSpec": {"column": "ts"}, "dimensionsSpec": {"dimensions": ["d"]},
        "granularitySpec": {"segmentGranularity": "day", "rollup": False}},
        "ioConfig": {"inputSource": {"type": "inline", "data": '{"ts":"2020-01-01T00:00:00Z","d":"x"}'},
                     "inputFormat": {"type": "json"}}}
    r = server_client.post("/druid/indexer/v1/task", json=task)
    assert r.json() == {"task": "my-inline-task"}
    assert server_client.post("/druid/indexer/v1/task", json=task).status_code == 400  # duplicate id
    for _ in range(200):
        st = server_client.get("/druid/indexer/v1/task/my-inline-task/status").json()["status"]
        if st["status"] != "RUNNING":
            break
        time.sleep(0.05)
    assert st["status"] == "SUCCESS" and st["type"] == "index", st
    assert server_client.get("/druid/coordinator/v1/datasources").json() == ["t"]


def test_health_reports_real_readiness(server_client: TestClient, tmp_path: Path) -> None:
    from radstack.storage.metadata import MetadataStore

    ctx = server_client.app.state.ctx  # type: ignore[attr-defined]
    assert server_client.get("/status/health").json() is True
    ctx.broker.loaded = False  # as before the first sync with the metadata store
    r = server_client.get("/status/health")
    assert r.status_code == 503 and "timeline is not loaded" in r.json()["errorMessage"]
    ctx.broker.loaded = True
    real = ctx.metadata
    ctx.metadata = MetadataStore.from_url(f"sqlite:///{tmp_path / 'gone' / 'metadata.db'}")
    shutil.rmtree(tmp_path / "gone")  # its directory is gone: the database cannot be opened
    try:
        r = server_client.get("/status/health")
        assert r.status_code == 503 and "metadata store is not reachable" in r.json()["errorMessage"]
    finally:
        ctx.metadata = real
    assert server_client.get("/status/health").json() is True


def test_generated_admin_is_printed_once_and_kept_hashed(client_with: Any, radstack_home: Path,
                                                         capfd: pytest.CaptureFixture[str]) -> None:
    """stderr here is not a terminal (as under ``radctl up`` or in a container, where it is a log file):
    the password goes to a 0600 file of its own, and no output ever holds it (#50)."""
    c = client_with({"server": {"auth": {"enabled": True, "generate_admin": True}}})
    printed = capfd.readouterr().err
    once = radstack_home / "credentials" / "server-admin.password"
    assert "generated user 'admin'" in printed and str(once) in printed, printed
    assert stat.S_IMODE(once.stat().st_mode) == 0o600
    password = once.read_text().strip()
    assert password not in printed
    assert c.get("/druid/coordinator/v1/datasources").status_code == 401
    assert c.get("/druid/coordinator/v1/datasources", auth=("admin", password)).status_code == 200
    stored = radstack_home / "credentials" / "server-admin.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600 and stat.S_IMODE(stored.parent.stat().st_mode) == 0o700
    assert password not in stored.read_text()
    c2 = client_with({"server": {"auth": {"enabled": True, "generate_admin": True}}})  # a restart
    assert "generated user" not in capfd.readouterr().err  # printed once
    assert c2.get("/druid/coordinator/v1/datasources", auth=("admin", password)).status_code == 200


def test_sys_servers_shows_the_configured_host_not_the_host_header(server_client: TestClient) -> None:
    q = {"query": "SELECT server, host, plaintext_port FROM sys.servers"}
    assert server_client.post("/druid/v2/sql", json=q, headers={"Host": "attacker.example:1234"}).status_code == 403
    r = server_client.post("/druid/v2/sql", json=q, headers={"Host": "10.9.8.7:1234"})  # an address is answered
    assert r.status_code == 200
    settings = server_client.app.state.ctx.settings  # type: ignore[attr-defined]
    assert r.json() and all(row["host"] == settings.server.host for row in r.json())
    assert "10.9.8.7" not in r.text
