"""The authorization suite of #50: every route of the server (serving/route_access.py), asked by each of
three users of different rights — admin; READ/WRITE on ``wiki.*`` with EXTERNAL local; READ on one
datasource only — and with no credentials, from a foreign Origin and through a rebinding Host.

Asserted for every (route, caller) pair: the expected status class (401 without credentials; 403 for a
resource the user lacks; never 401/403 for one it has; 403 for a foreign Origin's write and for a
rebinding Host), and in every answer: no row of a datasource the caller may not read, no lookup value it
may not read, no secret of a supervisor (for anyone, admin included), and in no 2xx answer even the name
of a datasource the caller may not read. The number of pairs checked goes to
the reliability report.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from starlette.testclient import TestClient

from operations.server import create_server_app
from radstack.passwords import hash_password
from radstack.storage.supervisors import SupervisorRecord, datasource_spec_from_supervisor, save_supervisor
from serving.auth import load_users
from serving.route_access import OPEN, ROUTES, Rule, rule_for
from tests.fixtures.broker import WIKI_SCHEMA, index_and_publish, wiki_table
from tests.fixtures.server import server_settings
from tests.reliability.conftest import REPORT

pytestmark = [pytest.mark.slow, pytest.mark.reliability]

FINANCE_ROW = "SECRET-FINANCE-ROW"  # a value only the finance datasource holds
LOOKUP_VALUE = "SECRET-LOOKUP-VALUE"
SASL_SECRET = "SASL-SECRET-PASSWORD"
TRUSTSTORE_SECRET = "TRUSTSTORE-SECRET"


def _perm(rtype: str, name: str, action: str) -> dict[str, Any]:
    return {"resource": {"type": rtype, "name": name}, "action": action}


PASSWORDS = {"admin": "admin-password-1", "wikirw": "wikirw-password", "one": "one-password-1"}
ROLES = {
    "wiki_rw": [_perm("DATASOURCE", "wiki.*", "READ"), _perm("DATASOURCE", "wiki.*", "WRITE"),
                _perm("EXTERNAL", "local", "READ")],
    "one_ds": [_perm("DATASOURCE", "ads_clicks", "READ")],
}
USERS = [
    {"name": "admin", "password_hash": hash_password(PASSWORDS["admin"]), "roles": ["admin"]},
    {"name": "wikirw", "password_hash": hash_password(PASSWORDS["wikirw"]), "roles": ["wiki_rw"]},
    {"name": "one", "password_hash": hash_password(PASSWORDS["one"]), "roles": ["one_ds"]},
]
PARAMS = {"ds": "finance", "data_source": "finance", "supervisor_id": "finance", "name": "countries",
          "tier": "__default", "part": "keys", "interval": "2024-01-01_2024-01-03", "sub_id": "none",
          "sql_query_id": "none", "query_id": "none", "name:path": "index.html"}
BODIES = {"/druid/v2/sql": {"query": "SELECT * FROM finance"},
          "/druid/v2/sql/": {"query": "SELECT page, LOOKUP(page, 'countries') AS c FROM wiki"},
          "/druid/v2": {"queryType": "scan", "dataSource": "finance", "intervals": ["2000-01-01/3000-01-01"]},
          "/druid/v2/": {"queryType": "scan", "dataSource": "wiki", "intervals": ["2000-01-01/3000-01-01"],
                         "virtualColumns": [{"type": "expression", "name": "c", "expression": "lookup(page, 'countries')"}]}}


def _auth(user: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{PASSWORDS[user]}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, Any]]]:
    settings = server_settings(tmp_path_factory.mktemp("home"), {"server": {"auth": {
        "enabled": True, "users": USERS, "roles": ROLES, "max_failed_logins": 0}}})
    app = create_server_app(settings)
    with TestClient(app, raise_server_exceptions=False) as c:
        ctx = app.state.ctx
        for name in ("wiki", "ads_clicks"):
            index_and_publish(ctx.metadata, ctx.deep_storage, wiki_table(), {**WIKI_SCHEMA, "dataSource": name})
        finance = wiki_table()
        finance = finance.set_column(finance.column_names.index("page"), "page", pa.array([FINANCE_ROW] * len(finance)))
        segments = index_and_publish(ctx.metadata, ctx.deep_storage, finance, {**WIKI_SCHEMA, "dataSource": "finance"})
        spec = {"type": "kafka", "spec": {
            "dataSchema": {"dataSource": "finance", "timestampSpec": {"column": "ts"},
                           "dimensionsSpec": {"dimensions": ["page"]}, "granularitySpec": {"segmentGranularity": "hour"}},
            "ioConfig": {"topic": "finance", "consumerProperties": {
                "bootstrap.servers": "127.0.0.1:9", "security.protocol": "SASL_SSL",
                "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required password="{SASL_SECRET}";',
                "ssl.truststore.password": TRUSTSTORE_SECRET}}}}
        save_supervisor(ctx.metadata, SupervisorRecord(id="finance", spec=spec, datasource=datasource_spec_from_supervisor(spec),
                                                       state="SUSPENDED"))
        admin = _auth("admin")
        c.post("/druid/coordinator/v1/lookups/config", json={}, headers=admin)
        assert c.post("/druid/coordinator/v1/lookups/config", headers=admin, json={"__default": {"countries": {
            "version": "v1", "lookupExtractorFactory": {"type": "map", "map": {"Main": LOOKUP_VALUE}}}}}).status_code < 300
        task = {"type": "index_parallel", "spec": {
            "dataSchema": {"dataSource": "finance", "timestampSpec": {"column": "ts"},
                           "dimensionsSpec": {"dimensions": ["page"]}, "granularitySpec": {"segmentGranularity": "day"}},
            "ioConfig": {"inputSource": {"type": "inline", "data": f'{{"ts": "2030-01-01T00:00:00Z", "page": "{FINANCE_ROW}"}}'},
                         "inputFormat": {"type": "json"}}}}
        ids = {"task_id": c.post("/druid/indexer/v1/task", json=task, headers=admin).json()["task"],
               "segment_id": segments[0].identifier}
        ctx.broker.refresh(force=True)
        assert FINANCE_ROW in c.post("/druid/v2/sql", json=BODIES["/druid/v2/sql"], headers=admin).text
        yield c, {**PARAMS, **ids}


def _path(rule: Rule, params: dict[str, str]) -> str:
    path = rule.template
    for key, value in params.items():
        path = path.replace("{" + key + "}", value)
    return path


def _call(c: TestClient, method: str, path: str, headers: dict[str, str]) -> Any:
    body = BODIES.get(path, {}) if method == "POST" else None
    return c.request(method, path, json=body, headers={"Host": "localhost:8888", **headers})


def _leaks(status: int, text: str, user: str | None, users: dict[str, Any]) -> list[str]:
    u = users.get(user) if user else None
    out = [s for s in (SASL_SECRET, TRUSTSTORE_SECRET) if s in text]
    if status < 300 and "finance" in text and (u is None or not u.can("DATASOURCE", "finance", "READ")):
        out.append("the name of a datasource it may not read")
    if FINANCE_ROW in text and (u is None or not u.can("DATASOURCE", "finance", "READ")):
        out.append(FINANCE_ROW)
    if LOOKUP_VALUE in text and (u is None or not u.can("LOOKUP", "countries", "READ")):
        out.append(LOOKUP_VALUE)
    return out


def test_every_route_with_every_caller(server: tuple[TestClient, dict[str, Any]]) -> None:
    c, params = server
    users = load_users(c.app.state.ctx.settings)  # type: ignore[attr-defined]
    pairs, failures = 0, []
    for rule in ROUTES:
        path = _path(rule, params)
        for method in sorted(rule.methods):
            for caller in (None, "one", "wikirw", "admin"):
                if caller == "admin" and method != "GET" and rule.kind != OPEN:
                    continue  # the admin's writes would change the fixture; its foreign-Origin writes are below
                r = _call(c, method, path, _auth(caller) if caller else {})
                pairs += 1
                need = rule.need(rule_for(method, path)[1])
                if rule.kind == OPEN:
                    ok = r.status_code not in (401, 403)
                elif caller is None:
                    ok = r.status_code == 401
                elif need is None:  # any signed-in user: the handler checks per item (leaks are checked below)
                    ok = r.status_code != 401
                elif not users[caller].can(*need):
                    ok = r.status_code == 403
                else:
                    ok = r.status_code not in (401, 403)
                if not ok:
                    failures.append((method, path, caller, r.status_code, r.text[:160]))
                leaked = _leaks(r.status_code, r.text, caller, users)
                if leaked:
                    failures.append((method, path, caller, "LEAK", leaked))
    REPORT.setdefault("authorization", {})["route_user_pairs"] = pairs
    assert pairs >= 300 and not failures, failures


def test_a_foreign_origin_or_a_rebinding_host_gets_nothing(server: tuple[TestClient, dict[str, Any]]) -> None:
    c, params = server
    admin = _auth("admin")
    pairs, failures = 0, []
    for rule in ROUTES:
        path = _path(rule, params)
        for method in sorted(rule.methods):
            if method != "GET":  # a write from another website, with the admin's credentials: refused
                r = _call(c, method, path, {**admin, "Origin": "https://evil.example.com", "Content-Type": "text/plain"})
                pairs += 1
                if r.status_code != 403 or "cors_allowed_origins" not in r.text:
                    failures.append((method, path, "origin", r.status_code))
            r = c.request(method, path, headers={**admin, "Host": "rebind.evil.example:8888"})
            pairs += 1
            if r.status_code != 403 or "allowed_hosts" not in r.text:
                failures.append((method, path, "host", r.status_code))
    REPORT.setdefault("authorization", {})["foreign_pairs"] = pairs
    assert not failures, failures


def test_the_supervisor_secrets_are_redacted_even_for_the_admin(server: tuple[TestClient, dict[str, Any]]) -> None:
    c, _params = server
    admin = _auth("admin")
    for path in ("/druid/indexer/v1/supervisor/finance", "/druid/indexer/v1/supervisor?full"):
        r = c.get(path, headers={**admin, "Host": "localhost"})
        assert r.status_code == 200 and "<redacted>" in r.text and SASL_SECRET not in r.text, r.text[:300]
    r = c.post("/druid/v2/sql", json={"query": "SELECT spec FROM sys.supervisors"}, headers={**admin, "Host": "localhost"})
    assert r.status_code == 200 and SASL_SECRET not in r.text and TRUSTSTORE_SECRET not in r.text
