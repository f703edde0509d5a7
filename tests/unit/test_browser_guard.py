"""#50: a page in the user's browser cannot act on a server it can reach (radstack/browser_guard.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from operations.server import create_server_app
from radstack.browser_guard import host_allowed
from tests.fixtures.server import server_settings

ROOT = Path(__file__).resolve().parents[2]
SQL = {"query": "SELECT 1 AS x"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = server_settings(tmp_path_factory.mktemp("home"),
                               {"server": {"cors_allowed_origins": ["https://dash.example.com"]}})
    with TestClient(create_server_app(settings), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:8888", "localhost.evil.com", "rebind.me"])
def test_a_rebinding_host_name_is_refused_before_anything_runs(client: TestClient, host: str) -> None:
    for method, path, body in (("GET", "/status", None), ("POST", "/druid/v2/sql", SQL)):
        r = client.request(method, path, json=body, headers={"Host": host})
        assert r.status_code == 403 and "server.allowed_hosts" in r.json()["errorMessage"], (host, r.text)


@pytest.mark.parametrize("host", ["localhost:8888", "127.0.0.1:8888", "[::1]:8888", "10.1.2.3", "app.localhost"])
def test_addresses_and_localhost_are_answered(client: TestClient, host: str) -> None:
    assert client.post("/druid/v2/sql", json=SQL, headers={"Host": host}).json() == [{"x": 1}]


def test_the_name_the_server_binds_is_answered(tmp_path: Path) -> None:
    app = create_server_app(server_settings(tmp_path / "home", {"server": {"host": "radstack.internal"}}))
    c = TestClient(app, raise_server_exceptions=False)  # the guard answers before the app (no lifespan)
    assert c.get("/status", headers={"Host": "other.internal"}).status_code == 403
    assert c.get("/status/health", headers={"Host": "radstack.internal:8888"}).status_code != 403


def test_host_allow_list_entries() -> None:
    assert host_allowed("radstack.internal:8888", ["radstack.internal"])
    assert host_allowed("a.corp.example", [".corp.example"]) and not host_allowed("corp.example.evil", [".corp.example"])
    assert host_allowed("anything", ["*"]) and not host_allowed("anything", ["localhost"])


@pytest.mark.parametrize("headers", [
    {"Origin": "https://evil.example.com"},
    {"Origin": "null"},
    {"Origin": "http://localhost:9999"},  # another port is another origin
    {"Sec-Fetch-Site": "cross-site"},
])
@pytest.mark.parametrize("content_type", ["text/plain", "application/json"])
def test_writes_and_queries_from_another_website_are_refused(client: TestClient, headers: dict[str, str],
                                                            content_type: str) -> None:
    base = {"Host": "localhost:8888", "Content-Type": content_type}
    for path, body in (("/druid/v2/sql", SQL), ("/druid/v2", {"queryType": "timeBoundary", "dataSource": "x"}),
                       ("/druid/indexer/v1/task", {"type": "index_parallel"}),
                       ("/druid/coordinator/v1/datasources/wiki/markUnused", {"interval": "2000/3000"}),
                       ("/druid/coordinator/v1/rules/wiki", [{"type": "dropForever"}])):
        r = client.post(path, content=json.dumps(body), headers={**base, **headers})
        assert r.status_code == 403 and "server.cors_allowed_origins" in r.text, (path, headers, r.text)
        assert "access-control-allow-origin" not in r.headers


def test_the_servers_own_pages_and_listed_origins_may(client: TestClient) -> None:
    own = client.post("/druid/v2/sql", json=SQL, headers={"Host": "localhost:8888", "Origin": "http://localhost:8888"})
    assert own.status_code == 200 and "access-control-allow-origin" not in own.headers
    listed = {"Host": "localhost:8888", "Origin": "https://dash.example.com"}
    r = client.post("/druid/v2/sql", json=SQL, headers=listed)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://dash.example.com"
    pre = client.options("/druid/v2/sql", headers={**listed, "Access-Control-Request-Method": "POST",
                                                   "Access-Control-Request-Headers": "content-type"})
    assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == "https://dash.example.com"
    # a read from elsewhere runs but gets no CORS header: the browser keeps the answer from the page
    r = client.get("/status", headers={"Host": "localhost:8888", "Origin": "https://evil.example.com"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_security_headers_and_the_consoles_policy(client: TestClient) -> None:
    page = client.get("/unified-console.html", headers={"Host": "localhost"})
    assert page.headers["x-frame-options"] == "DENY" and page.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert "script-src 'self'" in page.headers["content-security-policy"]
    api = client.post("/druid/v2/sql", json=SQL, headers={"Host": "localhost"})
    assert api.headers["x-content-type-options"] == "nosniff"


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the console's module")
def test_csv_export_neutralises_formula_cells(tmp_path: Path) -> None:
    script = tmp_path / "csv.mjs"
    module = (ROOT / "serving/console/static/js/view-query.js").as_uri()
    script.write_text(f"""
globalThis.document = {{ getElementById: () => null, createElement: () => ({{}}) }};
const {{ toCsv }} = await import({json.dumps(module)});
console.log(JSON.stringify(toCsv([{{name: "a"}}, {{name: "b"}}], [["=1+2", -5], ["+x", "@SUM(A1)"], ["-3 apples", "ok"]])));
""")
    out: Any = subprocess.run(["node", str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    csv = json.loads(out.stdout)
    assert csv.splitlines() == ["a,b", "'=1+2,-5", "'+x,'@SUM(A1)", "'-3 apples,ok"]


def test_the_event_receiver_is_guarded_the_same_way(tmp_path: Path) -> None:
    from realtime.receiver import create_app as receiver_app

    app = receiver_app(server_settings(tmp_path / "home"))
    c = TestClient(app, raise_server_exceptions=False)  # no lifespan: the guard answers before the app runs
    events = '[{"ts": "2024-01-01T00:00:00Z"}]'
    r = c.post("/v1/events/wiki", content=events, headers={"Host": "localhost:8200", "Origin": "https://evil.example.com",
                                                           "Content-Type": "text/plain"})
    assert r.status_code == 403 and "receiver.cors_allowed_origins" in r.text
    r = c.post("/v1/events/wiki", content=events, headers={"Host": "rebind.example.com"})
    assert r.status_code == 403 and "receiver.allowed_hosts" in r.text
