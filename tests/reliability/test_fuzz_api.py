"""Hostile input through every HTTP API of the serving process: generated SQL, native queries, task specs
and every route with mangled paths and bodies. Properties: no response is a 5xx, the server keeps
answering, and nothing outside the allowed directories is opened or sent back (a canary file outside
them, the server's own config and /etc/passwd are watched with a Python audit hook).

The corpora come from hypothesis strategies (grammar-shaped SQL and JSON, with garbage mixed in) and
from seeded mutations of valid queries; the seed is ``conftest.SEED``."""

from __future__ import annotations

import json
import os
import random
import string
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from starlette.testclient import TestClient

from operations.server import create_server_app
from radstack.spec import parse_data_schema
from radstack.storage.indexer import index_partition
from radstack.storage.publish import publish
from tests.fixtures.broker import WIKI_SCHEMA, wiki_table
from tests.fixtures.server import server_settings
from tests.reliability.conftest import REPORT, SEED, SOAK, statuses

pytestmark = [pytest.mark.slow, pytest.mark.reliability]

SCALE = 3 if SOAK else float(os.environ.get("RADSTACK_RELIABILITY_SCALE", "1"))
N_SQL, N_NATIVE, N_TASKS = int(10_000 * SCALE), int(2_000 * SCALE), int(500 * SCALE)
CANARY = f"canary-{SEED}-do-not-read"
QUERY_TIMEOUT_MS = 10_000
_WATCHED: set[str] = set()
_OPENED: list[str] = []
_HOOKED = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _WATCHED and args and isinstance(args[0], str | bytes | Path):
        p = str(Path(args[0] if not isinstance(args[0], bytes) else args[0].decode(errors="replace")).resolve())
        if p in _WATCHED:
            _OPENED.append(p)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, list[str]]]:
    global _HOOKED
    root = tmp_path_factory.mktemp("fuzz")
    home = root / "home"
    secret = root / "secret.json"
    secret.write_text(json.dumps({"timestamp": "2024-01-01T00:00:00Z", "page": CANARY}) + "\n")
    (home / "data").mkdir(parents=True)
    (home / "data" / "ok.json").write_text('{"ts": "2024-01-01T00:00:00Z", "page": "ok"}\n')
    (home / "data" / "link.json").symlink_to(secret)
    (home / "radstack.yaml").write_text(f"# {CANARY}\n")
    watched = [str(secret.resolve()), str((home / "radstack.yaml").resolve()), "/etc/passwd", "/etc/shadow"]
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED = True
    # a 10 s query timeout bounds what one generated query may cost (a 12-way self-join streams for ages)
    app = create_server_app(server_settings(home, {"server": {"max_concurrent_queries": 4,
                                                              "default_query_timeout_ms": QUERY_TIMEOUT_MS}}))
    with TestClient(app, raise_server_exceptions=False) as c:
        ctx = app.state.ctx
        for schema in (WIKI_SCHEMA, {**WIKI_SCHEMA, "dataSource": "ads"}):
            res = index_partition(wiki_table(), parse_data_schema(schema), version="v1",
                                  deep_storage=ctx.deep_storage, shard="core")
            publish(ctx.metadata, ctx.deep_storage, res.segments)
        ctx.broker.refresh(force=True)
        _WATCHED.update(watched)  # armed once the server read its own config at start-up
        yield c, [str(secret), str(home / "radstack.yaml"), str(home / "data" / "link.json")]
        _WATCHED.clear()


def _short_timeout(body: Any, elapsed: float) -> bool:
    """The query ran into its timeout: one the client set (context.timeout), or the server's."""
    ctx = body.get("context") if isinstance(body, dict) else None
    t = ctx.get("timeout") if isinstance(ctx, dict) else None
    if isinstance(t, int | float | str) and str(t).lstrip("-").isdigit() and 0 < int(t) < QUERY_TIMEOUT_MS:
        return True
    return elapsed * 1000 >= QUERY_TIMEOUT_MS * 0.9


def _check(part: str, r: Any, what: Any, body: Any = None, elapsed: float = 0.0) -> None:
    statuses(part)[r.status_code] += 1
    # Two 5xx are Druid's own answers, kept for compatibility: 501 "Unsupported operation" for a feature
    # it does not have, and 504 "Query timeout" for a query that really ran into its timeout (the
    # client's, or the server's 10 s here). Any other 5xx is the server failing.
    error = r.json() if r.status_code >= 500 and r.headers.get("content-type", "").startswith("application/json") else {}
    category = error.get("category") if isinstance(error, dict) else None
    allowed = (r.status_code == 501 and category == "UNSUPPORTED") or (
        r.status_code == 504 and category == "TIMEOUT" and _short_timeout(body, elapsed))
    assert r.status_code < 500 or allowed, (part, str(what)[:2000], r.text[:2000])
    assert CANARY not in r.text, (part, str(what)[:2000])
    if r.status_code >= 400 and r.headers.get("content-type", "").startswith("application/json"):
        body = r.json()
        assert isinstance(body, dict) and ("errorMessage" in body or "error" in body), r.text[:500]


def _still_alive(c: TestClient) -> None:
    r = c.post("/druid/v2/sql", json={"query": "SELECT 1 AS one"})
    assert r.status_code == 200 and r.json() == [{"one": 1}], r.text
    assert c.get("/status/health").json() is True


# ---- SQL --------------------------------------------------------------------------------------

IDENT = st.sampled_from(["page", "user", "country", "ns", "added", "delta", "count", "__time", "\"page\"",
                         "nope", "\"weird \"\"col\"", "ünïcode", "*"])
LIT = st.one_of(
    st.integers(-2**70, 2**70).map(str), st.floats(allow_nan=False).map(repr),
    st.text(max_size=12).map(lambda s: "'" + s.replace("'", "''") + "'"),
    st.sampled_from(["NULL", "TRUE", "FALSE", "TIMESTAMP '2024-01-01 00:00:00'", "CURRENT_TIMESTAMP",
                     "INTERVAL '1' DAY", "'2024-01-01T00:00:00Z'", "?", "1e308", "-0", "''"]))
FUNCS = ["TIME_FLOOR", "TIME_CEIL", "TIME_SHIFT", "TIME_EXTRACT", "TIME_PARSE", "TIME_FORMAT", "TIME_IN_INTERVAL",
         "MILLIS_TO_TIMESTAMP", "TIMESTAMP_TO_MILLIS", "FLOOR", "CEIL", "DATE_TRUNC", "TIMESTAMPADD", "TIMESTAMPDIFF",
         "SUBSTRING", "UPPER", "LOWER", "CONCAT", "REPLACE", "REPEAT", "LPAD", "RPAD", "STRLEN", "LENGTH",
         "REGEXP_EXTRACT", "REGEXP_LIKE", "CONTAINS_STRING", "NVL", "COALESCE", "ABS", "POWER", "LOG", "MOD",
         "CAST", "APPROX_COUNT_DISTINCT", "APPROX_QUANTILE", "EARLIEST", "LATEST", "ANY_VALUE", "SUM", "COUNT",
         "MIN", "MAX", "AVG", "STRING_AGG", "read_csv", "read_parquet", "EXTERN", "pg_sleep", "glob", "ERROR",
         "MV_CONTAINS", "JSON_VALUE", "LOOKUP"]
TABLES = ["wiki", "ads", "druid.wiki", "sys.segments", "sys.servers", "sys.tasks", "INFORMATION_SCHEMA.TABLES",
          "INFORMATION_SCHEMA.COLUMNS", "nope", "\"wiki\"", "lookup.x",
          f"read_csv('{'{secret}'}')", "TABLE(EXTERN('{}', '{}', '[]'))", "(VALUES (1), (2))",
          "generate_series(1, 1000000000)", "duckdb_settings()", "'/etc/passwd'"]


def _expr(depth: int) -> st.SearchStrategy[str]:
    base = st.one_of(IDENT, LIT)
    if depth <= 0:
        return base
    sub = _expr(depth - 1)
    return st.one_of(
        base,
        st.tuples(sub, st.sampled_from(["+", "-", "*", "/", "||", "=", "<>", "<", ">=", "AND", "OR", "LIKE",
                                        "IS NOT DISTINCT FROM"]), sub).map(" ".join),
        st.tuples(st.sampled_from(FUNCS), st.lists(sub, max_size=4)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
        sub.map(lambda e: f"({e})"), sub.map(lambda e: f"NOT {e}"),
        st.tuples(sub, st.lists(LIT, min_size=1, max_size=20)).map(lambda t: f"{t[0]} IN ({', '.join(t[1])})"),
        st.tuples(sub, sub, sub).map(lambda t: f"CASE WHEN {t[0]} THEN {t[1]} ELSE {t[2]} END"),
        st.tuples(sub, st.sampled_from(["VARCHAR", "BIGINT", "DOUBLE", "TIMESTAMP", "BOOLEAN", "ARRAY<VARCHAR>"]))
        .map(lambda t: f"CAST({t[0]} AS {t[1]})"),
    )


EXPR = _expr(3)
GARBAGE = st.text(alphabet=string.printable + "ÄЖ中😀\x00", max_size=60)

SQL = st.one_of(
    st.builds(
        lambda sel, tab, where, grp, order, lim, tail: (
            f"SELECT {', '.join(sel)} FROM {tab}" + (f" WHERE {where}" if where else "")
            + (f" GROUP BY {', '.join(grp)}" if grp else "") + (f" ORDER BY {order}" if order else "")
            + (f" LIMIT {lim}" if lim is not None else "") + tail),
        st.lists(EXPR, min_size=1, max_size=4), st.sampled_from(TABLES), st.one_of(st.none(), EXPR),
        st.lists(st.one_of(IDENT, st.integers(-1, 9).map(str)), max_size=3), st.one_of(st.none(), EXPR),
        st.one_of(st.none(), st.integers(-5, 2**63)), st.sampled_from(["", ";", "; DROP TABLE wiki", " --", " OFFSET -1",
                                                                       " UNION ALL SELECT 1", ") x"])),
    EXPR.map(lambda e: f"SELECT {e}"),
    GARBAGE,
    st.sampled_from(["COPY wiki TO '/tmp/x.csv'", "ATTACH '/tmp/x.db'", "INSTALL httpfs", "PRAGMA version",
                     "SELECT * FROM read_csv_auto('/etc/passwd')", "EXPLAIN PLAN FOR SELECT 1", "SET x = 1",
                     "CREATE TABLE t AS SELECT 1", "SELECT " + "(" * 500 + "1" + ")" * 500,
                     "SELECT 1 " + "UNION ALL SELECT 1 " * 300, "SELECT * FROM wiki " + "JOIN wiki USING (page) " * 12]),
)


def _sql_body(q: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {"query": q, **extra}


SQL_EXTRA = st.fixed_dictionaries({}, optional={
    "resultFormat": st.sampled_from(["object", "array", "objectLines", "arrayLines", "csv", "bogus", 5]),
    "header": st.one_of(st.booleans(), st.just("yes")), "typesHeader": st.booleans(),
    "context": st.one_of(st.dictionaries(st.sampled_from(["timeout", "priority", "sqlTimeZone", "sqlQueryId",
                                                          "useApproximateCountDistinct", "sqlStringifyArrays"]),
                                         st.one_of(st.integers(-10, 10**6), st.text(max_size=8), st.none()), max_size=3),
                         st.just("x"), st.just([1])),
    "parameters": st.one_of(st.lists(st.fixed_dictionaries({"type": st.sampled_from(["VARCHAR", "BIGINT", "nope"]),
                                                            "value": st.one_of(st.integers(), st.text(max_size=5))}),
                                     max_size=3), st.just("x")),
})


def _mutations(rnd: random.Random, n: int) -> Iterator[str]:
    """Seeded mutations of valid dashboard queries: tokens dropped, doubled, swapped or replaced."""
    seeds = ["SELECT page, COUNT(*) AS c, SUM(added) FROM wiki WHERE __time >= TIMESTAMP '2024-01-01' "
             "GROUP BY page ORDER BY c DESC LIMIT 5",
             "SELECT TIME_FLOOR(__time, 'PT1H') AS h, APPROX_COUNT_DISTINCT(\"user\") FROM wiki GROUP BY 1",
             "SELECT * FROM (SELECT country, MAX(delta) m FROM wiki GROUP BY country) WHERE m > 0 ORDER BY m",
             "SELECT w.page, a.added FROM wiki w JOIN ads a ON w.page = a.page LIMIT 3",
             "SELECT segment_id, num_rows FROM sys.segments WHERE datasource = 'wiki'"]
    for _ in range(n):
        toks = rnd.choice(seeds).split(" ")
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(toks))
            op = rnd.randrange(4)
            if op == 0 and len(toks) > 1:
                del toks[i]
            elif op == 1:
                toks.insert(i, toks[i])
            elif op == 2:
                j = rnd.randrange(len(toks))
                toks[i], toks[j] = toks[j], toks[i]
            else:
                toks[i] = rnd.choice(["(", ")", "'", "\"", ",", "NULL", "*", "--", "/*", "ÄÖ", "9" * 30, "%s"])
        yield " ".join(toks)


def test_sql_fuzz(server: tuple[TestClient, list[str]]) -> None:
    c, secrets = server
    start = time.monotonic()
    n_hyp = N_SQL // 2
    slow: list[tuple[float, str]] = []

    @hypothesis_seed(SEED)  # the corpus follows RADSTACK_RELIABILITY_SEED
    @settings(max_examples=n_hyp, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(q=SQL, extra=SQL_EXTRA)
    def one(q: str, extra: dict[str, Any]) -> None:
        q = q.replace("{secret}", secrets[0])
        body = _sql_body(q, extra)
        t0 = time.monotonic()
        r = c.post("/druid/v2/sql", json=body)
        slow.append((time.monotonic() - t0, q[:300]))
        _check("sql", r, (q, extra), body, slow[-1][0])

    one()
    rnd = random.Random(SEED)
    for q in _mutations(rnd, N_SQL - n_hyp):
        ctype = rnd.choice(["application/json", "text/plain", "application/x-www-form-urlencoded", "text/csv", ""])
        if ctype == "application/json":
            r = c.post("/druid/v2/sql", json={"query": q})
        else:
            r = c.post("/druid/v2/sql", content=q.encode(), headers={"content-type": ctype} if ctype else {})
        _check("sql", r, q)
    _still_alive(c)
    REPORT["sql"]["seconds"] = round(time.monotonic() - start, 1)
    REPORT["sql"]["slowest_s"] = round(max(slow)[0], 2) if slow else 0
    assert sum(statuses("sql").values()) >= N_SQL
    assert _OPENED == []


# ---- native -----------------------------------------------------------------------------------

JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-2**64, 2**64), st.floats(allow_nan=False),
                        st.text(max_size=10))
ANY_JSON = st.recursive(JSON_SCALAR, lambda ch: st.one_of(st.lists(ch, max_size=4),
                                                          st.dictionaries(st.text(max_size=8), ch, max_size=4)),
                        max_leaves=12)
DIM = st.one_of(st.sampled_from(["page", "user", "country", "ns", "__time", "nope", ""]), ANY_JSON)
FILTER = st.recursive(
    st.one_of(
        st.fixed_dictionaries({"type": st.just("selector"), "dimension": DIM, "value": JSON_SCALAR}),
        st.fixed_dictionaries({"type": st.just("in"), "dimension": DIM, "values": st.one_of(st.lists(JSON_SCALAR), ANY_JSON)}),
        st.fixed_dictionaries({"type": st.just("bound"), "dimension": DIM, "lower": JSON_SCALAR, "upper": JSON_SCALAR,
                               "ordering": st.sampled_from(["numeric", "lexicographic", "bogus"])}),
        st.fixed_dictionaries({"type": st.sampled_from(["regex", "like", "search", "expression", "interval",
                                                        "equals", "range", "null", "true", "false", "columnComparison"]),
                               "dimension": DIM, "pattern": st.text(max_size=10), "expression": st.text(max_size=30),
                               "intervals": ANY_JSON, "column": DIM, "matchValue": JSON_SCALAR}),
        ANY_JSON,
    ),
    lambda ch: st.one_of(st.fixed_dictionaries({"type": st.sampled_from(["and", "or"]), "fields": st.lists(ch, max_size=3)}),
                         st.fixed_dictionaries({"type": st.just("not"), "field": ch})),
    max_leaves=8)
AGG = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["count", "longSum", "doubleSum", "floatMin", "longMax", "doubleMean",
                                                    "stringFirst", "longLast", "cardinality", "hyperUnique",
                                                    "thetaSketch", "HLLSketchBuild", "filtered", "min", "max", "bogus"]),
                           "name": st.one_of(st.text(max_size=6), JSON_SCALAR), "fieldName": DIM,
                           "expression": st.text(max_size=20), "fields": ANY_JSON, "aggregator": ANY_JSON,
                           "filter": FILTER}),
    ANY_JSON)
INTERVALS = st.one_of(st.just(["2024-01-01/2024-01-03"]), st.just(["2024-01-01/P1D"]), st.just("2024-01-01/2024-01-03"),
                      st.lists(st.text(max_size=25), max_size=2), ANY_JSON,
                      st.just({"type": "intervals", "intervals": 5}), st.just(["3000-01-01/1000-01-01"]))
GRAN = st.one_of(st.sampled_from(["all", "none", "hour", "day", "week", "month", "fifteen_minute", "bogus", "PT0S", "P1D"]),
                 st.fixed_dictionaries({"type": st.sampled_from(["period", "duration", "all", "x"]),
                                        "period": st.sampled_from(["PT1H", "PT0S", "P1M", "P-1D", "nope"]),
                                        "duration": st.one_of(st.integers(-5, 10**12), st.text(max_size=3)),
                                        "timeZone": st.sampled_from(["UTC", "America/Los_Angeles", "Mars/Base", ""]),
                                        "origin": JSON_SCALAR}),
                 ANY_JSON)
NATIVE = st.one_of(
    st.fixed_dictionaries(
        {"queryType": st.sampled_from(["timeseries", "topN", "groupBy", "scan", "search", "timeBoundary",
                                       "segmentMetadata", "dataSourceMetadata"])},
        optional={
            "dataSource": st.one_of(st.sampled_from(["wiki", "ads", "nope", ""]), ANY_JSON,
                                    st.just({"type": "union", "dataSources": ["wiki", "ads"]}),
                                    st.just({"type": "query", "query": {"queryType": "scan", "dataSource": "wiki"}})),
            "intervals": INTERVALS, "granularity": GRAN, "filter": FILTER,
            "aggregations": st.one_of(st.lists(AGG, max_size=3), ANY_JSON),
            "postAggregations": st.one_of(st.lists(ANY_JSON, max_size=2), ANY_JSON),
            "virtualColumns": st.one_of(st.lists(st.fixed_dictionaries({
                "type": st.sampled_from(["expression", "x"]), "name": st.text(max_size=5),
                "expression": st.one_of(st.text(max_size=40), st.just("(" * 300 + "1" + ")" * 300)),
                "outputType": st.sampled_from(["LONG", "STRING", "DOUBLE", "nope"])}), max_size=2), ANY_JSON),
            "dimension": DIM, "dimensions": st.one_of(st.lists(DIM, max_size=3), ANY_JSON),
            "metric": st.one_of(st.text(max_size=6), ANY_JSON), "threshold": JSON_SCALAR,
            "limit": JSON_SCALAR, "offset": JSON_SCALAR, "columns": st.one_of(st.lists(JSON_SCALAR, max_size=3), ANY_JSON),
            "limitSpec": ANY_JSON, "having": ANY_JSON, "query": ANY_JSON, "searchDimensions": ANY_JSON,
            "bound": JSON_SCALAR, "context": st.one_of(st.dictionaries(st.sampled_from(
                ["timeout", "priority", "queryId", "skipEmptyBuckets", "grandTotal"]), JSON_SCALAR, max_size=3), ANY_JSON),
            "descending": JSON_SCALAR, "order": JSON_SCALAR, "resultFormat": JSON_SCALAR, "toInclude": ANY_JSON,
            "analysisTypes": ANY_JSON, "merge": JSON_SCALAR, "subtotalsSpec": ANY_JSON,
        }),
    ANY_JSON,
)


def test_native_fuzz(server: tuple[TestClient, list[str]]) -> None:
    c, _ = server
    start = time.monotonic()

    @hypothesis_seed(SEED)  # the corpus follows RADSTACK_RELIABILITY_SEED
    @settings(max_examples=N_NATIVE, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(q=NATIVE)
    def one(q: Any) -> None:
        t0 = time.monotonic()
        r = c.post("/druid/v2", content=json.dumps(q).encode(), headers={"content-type": "application/json"})
        _check("native", r, q, q, time.monotonic() - t0)

    one()
    for body in [b"", b"{", b"[]", b"null", b"\xff\xfe", b"{" * 5000 + b"}" * 5000, b'{"queryType": "scan"' * 100]:
        _check("native", c.post("/druid/v2", content=body), body[:50])
    _still_alive(c)
    REPORT["native"]["seconds"] = round(time.monotonic() - start, 1)
    assert sum(statuses("native").values()) >= N_NATIVE
    assert _OPENED == []


# ---- tasks ------------------------------------------------------------------------------------


def hostile_sources(secrets: list[str]) -> list[dict[str, Any]]:
    """Input sources that must always be refused (files outside the allowed dirs, private URLs)."""
    secret, config, link = secrets
    return [
        {"type": "local", "files": [secret]}, {"type": "local", "files": [config]},
        {"type": "local", "files": ["/etc/passwd"]}, {"type": "local", "files": ["/proc/self/environ"]},
        {"type": "local", "baseDir": "/etc", "filter": "passwd"}, {"type": "local", "baseDir": str(Path(secret).parent)},
        {"type": "local", "baseDir": "../../../../../../etc", "filter": "*"},
        {"type": "local", "baseDir": str(Path(link).parent), "filter": "link.json"},
        {"type": "local", "files": [link]}, {"type": "local", "files": ["data/../../../../etc/passwd"]},
        {"type": "http", "uris": ["http://127.0.0.1:8888/status/health"]},
        {"type": "http", "uris": ["http://localhost/"]}, {"type": "http", "uris": ["http://169.254.169.254/latest"]},
        {"type": "http", "uris": ["http://[::1]:9092/"]}, {"type": "http", "uris": ["file:///etc/passwd"]},
        {"type": "http", "uris": ["http://10.0.0.1/x"], "httpAuthenticationUsername": "u",
         "httpAuthenticationPassword": {"type": "environment", "variable": "HOME"}},
        {"type": "http", "uris": ["gopher://127.0.0.1:25/"]}]


def _input_sources(secrets: list[str]) -> st.SearchStrategy[Any]:
    other = st.one_of(
        st.fixed_dictionaries({"type": st.just("inline"), "data": st.text(max_size=200)}),
        st.fixed_dictionaries({"type": st.sampled_from(["s3", "hdfs", "archive", "nope"]),
                               "uris": ANY_JSON, "prefixes": ANY_JSON, "paths": ANY_JSON,
                               "endpointConfig": ANY_JSON}),
        ANY_JSON)
    return st.one_of(st.sampled_from(hostile_sources(secrets)), other)


def _assert_refused(c: TestClient, r: httpx.Response, what: Any) -> None:
    """A hostile source is refused: 400/403 on submission, or, for an allowed directory holding a link
    out of it (only the run can see where the link points), a task that fails naming the setting."""
    if r.status_code != 200:
        assert r.status_code in (400, 403), (what, r.text)  # 400: not an http(s) URI at all
        return
    tid = r.json()["task"]
    for _ in range(300):
        status = c.get(f"/druid/indexer/v1/task/{tid}/status").json()["status"]
        if status["status"] != "RUNNING":
            break
        time.sleep(0.05)
    assert status["status"] == "FAILED" and (
        "ingestion.local.allowed_dirs" in status["errorMsg"] or "radstack's own state" in status["errorMsg"]), (what, status)


def test_task_fuzz(server: tuple[TestClient, list[str]]) -> None:
    c, secrets = server
    start = time.monotonic()
    spec = st.fixed_dictionaries({
        "type": st.sampled_from(["index_parallel", "index", "compact", "kill", "nope"]),
        "spec": st.fixed_dictionaries({
            "dataSchema": st.one_of(st.just({"dataSource": "fz", "timestampSpec": {"column": "ts"},
                                             "dimensionsSpec": {"dimensions": ["page"]},
                                             "granularitySpec": {"segmentGranularity": "day"}}), ANY_JSON),
            "ioConfig": st.one_of(st.fixed_dictionaries({
                "inputSource": _input_sources(secrets),
                "inputFormat": st.one_of(st.sampled_from([{"type": "json"}, {"type": "csv", "columns": ["a"]},
                                                          {"type": "parquet"}, {"type": "x"}]), ANY_JSON)}), ANY_JSON),
            "tuningConfig": st.one_of(st.just({}), ANY_JSON)}),
    }, optional={"id": JSON_SCALAR, "context": ANY_JSON, "dataSource": JSON_SCALAR, "interval": JSON_SCALAR})

    @hypothesis_seed(SEED)  # the corpus follows RADSTACK_RELIABILITY_SEED
    @settings(max_examples=N_TASKS, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(task=spec)
    def one(task: Any) -> None:
        r = c.post("/druid/indexer/v1/task", content=json.dumps(task).encode(), headers={"content-type": "application/json"})
        _check("tasks", r, task)
        src = (task.get("spec") or {}).get("ioConfig", {})
        src = src.get("inputSource") if isinstance(src, dict) else None
        if isinstance(src, dict) and src.get("type") in ("local", "http") and task["type"] in ("index_parallel", "index") \
                and isinstance(task["spec"].get("dataSchema"), dict) and task["spec"]["dataSchema"].get("dataSource") == "fz":
            _assert_refused(c, r, task)  # every hostile local/http source is refused

    one()
    # and every hostile source once more with an otherwise valid task: each must be refused
    for source in hostile_sources(secrets):
        task = {"type": "index_parallel", "spec": {
            "dataSchema": {"dataSource": "fz", "timestampSpec": {"column": "ts"}, "dimensionsSpec": {"dimensions": ["page"]},
                           "granularitySpec": {"segmentGranularity": "day"}},
            "ioConfig": {"inputSource": source, "inputFormat": {"type": "json"}}}}
        r = c.post("/druid/indexer/v1/task", json=task)
        _check("tasks", r, task)
        _assert_refused(c, r, source)
    deadline = time.monotonic() + 60
    while any(t["statusCode"] == "RUNNING" for t in c.get("/druid/indexer/v1/tasks").json()):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    rows = c.post("/druid/v2/sql", json={"query": "SELECT * FROM sys.tasks"})
    _check("tasks", rows, "sys.tasks")
    _still_alive(c)
    REPORT["tasks"]["seconds"] = round(time.monotonic() - start, 1)
    assert _OPENED == [], _OPENED


# ---- every route --------------------------------------------------------------------------------

MANGLE = ["", "x", "..", "../../etc/passwd", "%00", "a%00b", "%2e%2e%2f", "ü" * 3, "9" * 300, "-1",
          "2024-01-01_2024-01-02", "_default", "wiki", "%ff", "a/b", "'", "${jndi:x}"]


def _routes(app: Any) -> list[tuple[str, str]]:
    """(method, path) of every route, included routers too (FastAPI keeps those as candidates)."""
    out: list[tuple[str, str]] = []
    for r in app.routes:
        candidates = r.effective_candidates() if hasattr(r, "effective_candidates") else [r]
        for x in candidates:
            out += [(m, x.path) for m in sorted(getattr(x, "methods", None) or [])]
    return sorted(set(out))


def test_every_route(server: tuple[TestClient, list[str]]) -> None:
    c, _ = server
    rnd = random.Random(SEED + 1)
    routes = _routes(c.app)
    assert len(routes) > 40
    for method, path in routes:
        for _ in range(8):
            p = path
            while "{" in p:
                a, rest = p.split("{", 1)
                name, b = rest.split("}", 1)
                p = a + (rnd.choice(MANGLE) if ":path" not in name else rnd.choice(MANGLE + ["a/b/c"])) + b
            query = urllib.parse.urlencode(rnd.choice([{}, {"full": ""}, {"interval": rnd.choice(MANGLE)},
                                                       {"state": "x", "datasource": "wiki"}, {"simple": "1"}]))
            body = rnd.choice([None, b"{}", b"[]", b"null", b"{", b"x" * 100, json.dumps({"a": [1] * 10}).encode()])
            r = c.request(method, p + ("?" + query if query else ""), content=body)
            _check("routes", r, (method, p, query, body))
    REPORT["routes"]["routes"] = len(routes)
    _still_alive(c)
    assert _OPENED == []
