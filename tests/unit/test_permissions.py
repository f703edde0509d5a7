"""Per-datasource permissions in Druid's basic-security shape, and hashed passwords (serving/auth.py)."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from operations.server import create_server_app
from radstack.passwords import hash_password, verify_password
from radstack.spec import parse_data_schema
from radstack.storage.indexer import index_partition
from radstack.storage.publish import publish
from tests.fixtures.broker import WIKI_SCHEMA, wiki_table
from tests.fixtures.server import server_settings

ADS_SCHEMA = {**WIKI_SCHEMA, "dataSource": "ads_clicks"}


def _perm(rtype: str, name: str, action: str) -> dict[str, Any]:
    return {"resource": {"type": rtype, "name": name}, "action": action}


ROLES = {
    "ads_reader": [_perm("DATASOURCE", "ads.*", "READ"), _perm("STATE", ".*", "READ")],
    "ads_sys": [_perm("DATASOURCE", "ads.*", "READ"), _perm("SYSTEM_TABLE", ".*", "READ")],
    "ads_writer": [_perm("DATASOURCE", "ads.*", "READ"), _perm("DATASOURCE", "ads.*", "WRITE"),
                   _perm("STATE", ".*", "READ")],
}
USERS = [
    {"name": "admin", "password_hash": hash_password("a-pw"), "roles": ["admin"]},
    {"name": "reader", "password_hash": hash_password("r-pw"), "role": "read"},
    {"name": "ads", "password_hash": hash_password("ads-pw"), "roles": ["ads_reader"]},
    {"name": "adsw", "password_hash": hash_password("adsw-pw"), "roles": ["ads_writer"]},
    {"name": "adssys", "password_hash": hash_password("s-pw"), "roles": ["ads_sys"]},
]


def _as(name: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()}


ADMIN, READER, ADS, ADSW = _as("admin", "a-pw"), _as("reader", "r-pw"), _as("ads", "ads-pw"), _as("adsw", "adsw-pw")
ADS_SYS = _as("adssys", "s-pw")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = server_settings(tmp_path_factory.mktemp("home"),
                               {"server": {"auth": {"enabled": True, "users": USERS, "roles": ROLES}}})
    app = create_server_app(settings)
    with TestClient(app, raise_server_exceptions=False) as c:
        ctx = app.state.ctx
        for schema in (WIKI_SCHEMA, ADS_SCHEMA):
            res = index_partition(wiki_table(), parse_data_schema(schema), version="v1",
                                  deep_storage=ctx.deep_storage, shard="core")
            publish(ctx.metadata, ctx.deep_storage, res.segments)
        ctx.broker.refresh(force=True)
        yield c


def _sql(c: TestClient, q: str, who: dict[str, str]) -> Any:
    return c.post("/druid/v2/sql", json={"query": q}, headers=who)


def test_sql_reads_only_permitted_datasources(client: TestClient) -> None:
    assert _sql(client, "SELECT COUNT(*) AS n FROM ads_clicks", ADS).json() == [{"n": 7}]
    for q in ["SELECT COUNT(*) FROM wiki",
              "SELECT COUNT(*) FROM ads_clicks a JOIN wiki w ON a.page = w.page",
              "SELECT * FROM (SELECT page FROM wiki) LIMIT 1",
              "WITH x AS (SELECT page FROM wiki) SELECT COUNT(*) FROM x",
              "SELECT COUNT(*) FROM sys.segments"]:
        r = _sql(client, q, ADS)
        assert r.status_code == 403 and r.json()["category"] == "FORBIDDEN", (q, r.text)
    assert _sql(client, "SELECT COUNT(*) AS n FROM wiki", READER).json() == [{"n": 7}]
    assert _sql(client, "SELECT COUNT(*) AS n FROM sys.segments", READER).status_code == 200
    q = "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid' ORDER BY 1"
    assert _sql(client, q, ADS).json() == [{"TABLE_NAME": "ads_clicks"}]  # wiki is not even listed
    assert _sql(client, q, READER).json() == [{"TABLE_NAME": "ads_clicks"}, {"TABLE_NAME": "wiki"}]
    cols = _sql(client, "SELECT DISTINCT TABLE_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = 'druid'", ADS)
    assert cols.json() == [{"TABLE_NAME": "ads_clicks"}]
    assert _sql(client, "SELECT COUNT(*) AS n FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'sys'", ADS).json()[0]["n"] > 0


def test_system_tables_show_only_permitted_datasources(client: TestClient) -> None:
    q = "SELECT DISTINCT datasource FROM sys.segments ORDER BY 1"
    assert _sql(client, q, ADS_SYS).json() == [{"datasource": "ads_clicks"}]
    assert _sql(client, q, READER).json() == [{"datasource": "ads_clicks"}, {"datasource": "wiki"}]
    # sys.server_segments names only segment ids: filtered by the datasource each belongs to (#34)
    q = "SELECT segment_id FROM sys.server_segments"
    ids = [r["segment_id"] for r in _sql(client, q, ADS_SYS).json()]
    assert ids and all(i.startswith("ads_clicks_") for i in ids)
    assert any(r["segment_id"].startswith("wiki_") for r in _sql(client, q, READER).json())


def test_sys_corrections_show_only_permitted_datasources(client: TestClient) -> None:
    from radstack.storage.metadata import CorrectionRow

    md = client.app.state.ctx.metadata  # type: ignore[attr-defined]
    if not md.corrections():
        md.publish([], corrections=[
            CorrectionRow(ds, 0, 3_600_000, "v2", "1970-01-01T00:00:00.000Z", 5, 7, {"count": 5.0}, {"count": 7.0},
                          raw_events=9, duplicates_removed=1, invalid_dropped=1)
            for ds in ("ads_clicks", "wiki")])  # fmt: skip
    q = "SELECT datasource, realtime_events, batch_events, event_gap, late_recovered FROM sys.corrections ORDER BY 1"
    assert _sql(client, q, ADS_SYS).json() == [
        {"datasource": "ads_clicks", "realtime_events": 5, "batch_events": 7, "event_gap": 2, "late_recovered": 2}]
    assert [r["datasource"] for r in _sql(client, q, READER).json()] == ["ads_clicks", "wiki"]
    assert _sql(client, q, ADS).status_code == 403  # no SYSTEM_TABLE READ at all


def test_native_reads_only_permitted_datasources(client: TestClient) -> None:
    q = {"queryType": "timeseries", "intervals": ["2024-01-01/2024-01-03"], "granularity": "all",
         "aggregations": [{"type": "count", "name": "c"}]}
    assert client.post("/druid/v2", json={**q, "dataSource": "ads_clicks"}, headers=ADS).status_code == 200
    for ds in ["wiki", {"type": "table", "name": "wiki"},
               {"type": "union", "dataSources": ["ads_clicks", "wiki"]},
               {"type": "query", "query": {**q, "queryType": "groupBy", "dataSource": "wiki", "dimensions": []}}]:
        r = client.post("/druid/v2", json={**q, "dataSource": ds}, headers=ADS)
        assert r.status_code == 403, (ds, r.text)


def test_tasks_need_write_on_the_datasource_and_external_read(client: TestClient) -> None:
    def task(ds: str, source: dict[str, Any]) -> dict[str, Any]:
        return {"type": "index_parallel", "spec": {
            "dataSchema": {"dataSource": ds, "timestampSpec": {"column": "ts"}, "dimensionsSpec": {"dimensions": ["d"]},
                           "granularitySpec": {"segmentGranularity": "day"}},
            "ioConfig": {"inputSource": source, "inputFormat": {"type": "json"}}}}

    inline = {"type": "inline", "data": '{"ts": "2020-01-01T00:00:00Z", "d": "x"}'}
    assert client.post("/druid/indexer/v1/task", json=task("ads_new", inline), headers=ADSW).status_code == 200
    r = client.post("/druid/indexer/v1/task", json=task("wiki", inline), headers=ADSW)
    assert r.status_code == 403 and "DATASOURCE [wiki]" in r.json()["errorMessage"]
    local = {"type": "local", "baseDir": "examples/rollup-tutorial", "filter": "*.json"}
    r = client.post("/druid/indexer/v1/task", json=task("ads_new", local), headers=ADSW)
    assert r.status_code == 403 and "EXTERNAL [local]" in r.json()["errorMessage"]
    assert client.post("/druid/indexer/v1/task", json=task("ads_new", inline), headers=ADS).status_code == 403
    assert client.post("/druid/indexer/v1/task", json=task("x", inline), headers=READER).status_code == 403


def test_coordinator_writes_per_datasource(client: TestClient) -> None:
    rules = [{"type": "loadForever"}]
    assert client.post("/druid/coordinator/v1/rules/ads_clicks", json=rules, headers=ADSW).status_code == 200
    assert client.post("/druid/coordinator/v1/rules/wiki", json=rules, headers=ADSW).status_code == 403
    assert client.post("/druid/coordinator/v1/rules/_default", json=rules, headers=ADSW).status_code == 403
    assert client.post("/druid/coordinator/v1/rules/wiki", json=rules, headers=ADMIN).status_code == 200
    assert client.get("/druid/coordinator/v1/rules", headers=ADS).status_code == 200  # STATE READ


def test_wrong_passwords_and_plain_text_configs(client: TestClient, tmp_path: Path) -> None:
    assert _sql(client, "SELECT 1", _as("ads", "wrong")).status_code == 401
    assert _sql(client, "SELECT 1", _as("nobody", "x")).status_code == 401
    plain = {"server": {"auth": {"enabled": True, "users": [{"name": "a", "password": "x", "role": "admin"}]}}}
    with pytest.raises(ValueError, match="plain-text passwords are not accepted"):
        create_server_app(server_settings(tmp_path, plain))
    unknown = {"server": {"auth": {"enabled": True, "users": [
        {"name": "a", "password_hash": hash_password("x"), "roles": ["nope"]}]}}}
    with pytest.raises(ValueError, match="unknown role"):
        create_server_app(server_settings(tmp_path, unknown))


def test_password_hashes() -> None:
    h = hash_password("pässword")
    assert h.startswith("pbkdf2_sha256$") and "pässword" not in h
    assert verify_password("pässword", h) and not verify_password("password", h)
    assert hash_password("x") != hash_password("x")  # salted
    assert not verify_password("x", "pbkdf2_sha256$1$!!$!!")


def test_coordinator_and_console_lists_show_only_readable_datasources(client: TestClient) -> None:
    """Druid filters its coordinator lists by DATASOURCE READ; so do the console's overview and
    ingestion views. One datasource's own state needs READ on it (403 otherwise)."""
    lists = {
        "/druid/coordinator/v1/datasources": lambda b: b,
        "/druid/coordinator/v1/datasources?simple": lambda b: [d["name"] for d in b],
        "/druid/coordinator/v1/metadata/datasources": lambda b: b,
        "/druid/coordinator/v1/metadata/datasources?full": lambda b: [d["name"] for d in b],
        "/druid/coordinator/v1/metadata/segments": lambda b: sorted({s["dataSource"] for s in b}),
        "/radstack/v1/datasources": lambda b: [d["name"] for d in b],
    }
    for path, names in lists.items():
        assert {"ads_clicks", "wiki"} <= set(names(client.get(path, headers=ADMIN).json())), path
        seen = set(names(client.get(path, headers=ADS).json()))
        assert "ads_clicks" in seen and all(n.startswith("ads") for n in seen), path
    assert set(client.get("/druid/coordinator/v1/rules", headers=ADS).json()) <= {"_default", "ads_clicks"}
    assert client.get("/druid/coordinator/v1/rules/_default", headers=ADS).status_code == 200
    ingestion = client.get("/radstack/v1/ingestion", headers=ADS).json()
    assert all(e["dataSource"].startswith("ads") for e in ingestion["streaming"] + ingestion["tasks"])
    for path in ("/druid/coordinator/v1/datasources/wiki", "/druid/coordinator/v1/metadata/datasources/wiki/segments",
                 "/druid/coordinator/v1/rules/wiki", "/radstack/v1/timeline/wiki"):
        assert client.get(path, headers=ADS).status_code == 403, path
        assert client.get(path.replace("wiki", "ads_clicks"), headers=ADS).status_code == 200, path
        assert client.get(path, headers=ADMIN).status_code == 200, path


def test_task_lists_and_task_details_need_read_on_the_task_datasource(client: TestClient) -> None:
    inline = {"type": "inline", "data": '{"ts": "2020-01-01T00:00:00Z", "d": "x"}'}

    def task(ds: str) -> dict[str, Any]:
        return {"type": "index_parallel", "spec": {
            "dataSchema": {"dataSource": ds, "timestampSpec": {"column": "ts"}, "dimensionsSpec": {"dimensions": ["d"]},
                           "granularitySpec": {"segmentGranularity": "day"}},
            "ioConfig": {"inputSource": inline, "inputFormat": {"type": "json"}}}}

    wiki_task = client.post("/druid/indexer/v1/task", json=task("wiki"), headers=ADMIN).json()["task"]
    ads_task = client.post("/druid/indexer/v1/task", json=task("ads_more"), headers=ADMIN).json()["task"]
    for path in ("/druid/indexer/v1/tasks", "/druid/indexer/v1/completeTasks", "/druid/indexer/v1/runningTasks"):
        seen = {t["dataSource"] for t in client.get(path, headers=ADS).json()}
        assert all(ds.startswith("ads") for ds in seen), path
    admin_ids = {t["id"] for t in client.get("/druid/indexer/v1/tasks", headers=ADMIN).json()}
    ads_ids = {t["id"] for t in client.get("/druid/indexer/v1/tasks", headers=ADS).json()}
    assert {wiki_task, ads_task} <= admin_ids and ads_task in ads_ids and wiki_task not in ads_ids
    for suffix in ("", "/status", "/reports"):
        assert client.get(f"/druid/indexer/v1/task/{wiki_task}{suffix}", headers=ADS).status_code == 403, suffix
    assert client.get(f"/druid/indexer/v1/task/{ads_task}/status", headers=ADS).status_code == 200


def _reindex(source_ds: str, target: str, **extra: Any) -> dict[str, Any]:
    return {"type": "index_parallel", "spec": {
        "dataSchema": {"dataSource": target, "timestampSpec": {"column": "__time", "format": "millis"},
                       "dimensionsSpec": {"dimensions": ["page", "user", "country"]},
                       "metricsSpec": [{"type": "longSum", "name": "count", "fieldName": "count"},
                                       {"type": "longSum", "name": "added", "fieldName": "added"}],
                       "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour"}},
        "ioConfig": {"inputSource": {"type": "druid", "dataSource": source_ds,
                                     "interval": "2024-01-01/2024-01-02", **extra}}}}


def test_reindexing_goes_through_the_druid_input_source_which_needs_read_on_its_datasource(
        client: TestClient) -> None:
    """#50: a user who may write ``ads*`` cannot copy ``wiki`` into a datasource of theirs — not through
    deep storage (local/s3/hdfs never reach it, tests/unit/test_input_policy.py), not through ``druid``."""
    r = client.post("/druid/indexer/v1/task", json=_reindex("wiki", "ads_copy"), headers=ADSW)
    assert r.status_code == 403 and "DATASOURCE [wiki]" in r.json()["errorMessage"], r.text
    r = client.post("/druid/indexer/v1/task", json=_reindex("ads_clicks", "ads_copy"), headers=ADSW)
    assert r.status_code == 200, r.text
    task = r.json()["task"]
    for _ in range(400):
        status = client.get(f"/druid/indexer/v1/task/{task}/status", headers=ADMIN).json()["status"]
        if status["status"] != "RUNNING":
            break
        time.sleep(0.05)
    assert status["status"] == "SUCCESS", status
    client.app.state.ctx.broker.refresh(force=True)  # type: ignore[attr-defined]
    q = ("SELECT __time, page, \"user\", country, SUM(\"count\") AS n, SUM(added) AS a FROM {} "
         "WHERE __time < TIMESTAMP '2024-01-02 00:00:00' GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3")
    copy = _sql(client, q.format("ads_copy"), ADMIN).json()
    assert copy == _sql(client, q.format("ads_clicks"), ADMIN).json() and len(copy) == 3  # day 1 only
    r = client.post("/druid/indexer/v1/task", json=_reindex("ads_clicks", "ads_x", filter={"type": "true"}), headers=ADSW)
    assert r.status_code == 400 and "filter" in r.text
    archive = _reindex("wiki", "ads_copy")
    archive["spec"]["ioConfig"] = {"inputSource": {"type": "archive", "topics": ["wiki"]}, "inputFormat": {"type": "json"}}
    r = client.post("/druid/indexer/v1/task", json=archive, headers=ADSW)  # the raw archive: READ on its topic
    assert r.status_code == 403 and "TOPIC [wiki]" in r.json()["errorMessage"], r.text


def test_no_get_route_tells_a_user_about_a_datasource_it_may_not_read(client: TestClient) -> None:
    """#50: every GET route of the app (serving/route_access.py), its parameters pointing at ``wiki``, asked
    by a user who may read only ``ads.*`` (with STATE READ): a 2xx answer never names ``wiki``."""
    from serving.route_access import OPEN, ROUTES

    wiki_segment = client.get("/druid/coordinator/v1/metadata/datasources/wiki/segments", headers=ADMIN).json()[0]
    params = {"ds": "wiki", "data_source": "wiki", "supervisor_id": "wiki", "segment_id": wiki_segment,
              "interval": "2024-01-01_2024-01-03", "name": "wiki", "tier": "__default", "part": "keys",
              "task_id": "none", "sub_id": "none", "name:path": "index.html"}
    checked, leaks = 0, []
    for rule in ROUTES:
        if "GET" not in rule.methods or rule.kind == OPEN:
            continue
        path = rule.template
        for key, value in params.items():
            path = path.replace("{" + key + "}", value)
        r = client.get(path, headers=ADS)
        checked += 1
        if r.status_code < 300 and "wiki" in r.text:
            leaks.append((path, r.text[:200]))
    assert checked > 40 and not leaks, leaks


def test_lookups_are_a_resource_of_their_own(client: TestClient) -> None:
    """#50: ``LOOKUP()``, ``lookup.*`` and the lookup APIs need READ on the lookup (Druid's ``LOOKUP``
    resource); the built-in ``read`` role has it, a role that lists only datasources does not."""
    spec = {"__default": {"countries": {"version": "v1", "lookupExtractorFactory": {
        "type": "map", "map": {"Main": "secret-main"}}}}}
    client.post("/druid/coordinator/v1/lookups/config", json={}, headers=ADMIN)  # initialise, as Druid's
    r = client.post("/druid/coordinator/v1/lookups/config", json=spec, headers=ADMIN)
    assert r.status_code in (200, 202), r.text
    for q in ("SELECT LOOKUP(page, 'countries') FROM ads_clicks", 'SELECT * FROM lookup.countries',
              "SELECT k FROM lookup.\"countries\" WHERE v <> ''"):
        r = _sql(client, q, ADS)
        assert r.status_code == 403 and "LOOKUP [countries]" in r.text, (q, r.text)
        assert "secret-main" not in r.text
    native = {"queryType": "scan", "dataSource": "ads_clicks", "intervals": ["2024-01-01/2024-01-03"],
              "virtualColumns": [{"type": "expression", "name": "v", "expression": "lookup(page, 'countries')"}],
              "columns": ["v"]}
    r = client.post("/druid/v2", json=native, headers=ADS)
    assert r.status_code == 403 and "LOOKUP [countries]" in r.text, r.text
    for path in ("/druid/v1/lookups/introspect/countries", "/druid/listen/v1/lookups/countries",
                 "/druid/coordinator/v1/lookups/config/__default/countries", "/druid/coordinator/v1/lookups/config/all"):
        r = client.get(path, headers=ADS)
        assert r.status_code == 403 and "secret-main" not in r.text, (path, r.text)
    assert "secret-main" in _sql(client, "SELECT LOOKUP(page, 'countries') AS v FROM ads_clicks", READER).text


def test_datasource_names_that_differ_only_in_case_are_refused(client: TestClient) -> None:
    """#50: ``Wiki`` once shared ``wiki``'s DuckDB view (names there ignore case): a user who may write only
    ``Wiki.*`` could read or poison ``wiki``. Twins are refused wherever a datasource is created."""
    from radstack.storage.metadata import DatasourceNameConflict
    from tests.fixtures.broker import index_and_publish

    inline = {"type": "inline", "data": '{"ts": "2024-01-01T00:00:00Z", "page": "x"}'}
    for name in ("Wiki", "WIKI", "ADS_clicks"):
        task = {"type": "index_parallel", "spec": {
            "dataSchema": {"dataSource": name, "timestampSpec": {"column": "ts"}, "dimensionsSpec": {"dimensions": ["page"]},
                           "granularitySpec": {"segmentGranularity": "day"}},
            "ioConfig": {"inputSource": inline, "inputFormat": {"type": "json"}}}}
        r = client.post("/druid/indexer/v1/task", json=task, headers=ADMIN)
        assert r.status_code == 400 and "differs only in case" in r.json()["errorMessage"], r.text
    supervisor = {"type": "kafka", "spec": {
        "dataSchema": {"dataSource": "Ads_Clicks", "timestampSpec": {"column": "ts"},
                       "dimensionsSpec": {"dimensions": ["page"]}, "granularitySpec": {"segmentGranularity": "hour"}},
        "ioConfig": {"topic": "ads", "consumerProperties": {"bootstrap.servers": "127.0.0.1:9"}}}}
    r = client.post("/druid/indexer/v1/supervisor", json=supervisor, headers=ADMIN)
    assert r.status_code == 400 and "differs only in case" in r.json()["errorMessage"], r.text
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    with pytest.raises(DatasourceNameConflict):  # the metadata store keeps the rule for every writer
        index_and_publish(ctx.metadata, ctx.deep_storage, wiki_table(), {**WIKI_SCHEMA, "dataSource": "wIKI"}, version="v9")
    assert "wIKI" not in ctx.metadata.data_sources(used_only=False)
