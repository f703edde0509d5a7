"""Hostile statements cannot read, list, write or confirm a file, nor read what the user may not (#34).

A real serving process (its own OS process, auth on) serves ``wiki``, which user ``ana`` may read, and
``secret_ds``, which she may not (its rows hold a canary). Canary files with unique contents sit in the
server's working directory, in ``/tmp``, in its home; the segment cache holds ``secret_ds``'s segment.
As ``ana``, the suite sends several hundred statements — paths, globs, URLs, table functions, internal
names, each through CTEs at every nesting level, subqueries, joins, LATERAL, UNNEST, set operations,
EXPLAIN, subscriptions, and native queries' expression, filter and virtual-column strings — plus
statements that would write, attach, load or configure. It fails if any canary's content or file name
appears in any answer, if any file appears outside the data directories, or if any answer is a 5xx
other than 501 (a Druid feature this broker does not implement). Counts go to the reliability report.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from radstack.passwords import hash_password
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.metadata import MetadataStore
from tests.fixtures.broker import WIKI_SCHEMA, index_and_publish, wiki_table
from tests.fixtures.server import server_settings
from tests.reliability.conftest import REPORT, statuses
from tests.reliability.serving_process import ServingProcess

pytestmark = [pytest.mark.slow, pytest.mark.reliability]

TOKEN = secrets.token_hex(5)
ANA = ("ana", "ana-password-probe")
DATA_DIRS = ("segment-cache", "deep-storage", "logs", "tmp", "metadata.db", "credentials")
ALLOWED_STATUS = {200, 400, 403, 404, 501}


class Canaries:
    """Canary files (unique names and contents) around the server, and what must never leave it."""

    def __init__(self, cwd: Path, home: Path) -> None:
        self.tmp_dir = Path("/tmp") / f"radstack_canary_{TOKEN}"
        self.tmp_dir.mkdir()
        self.contents: list[str] = []
        self.files: list[Path] = []
        for where, folder in (("cwd", cwd), ("tmp", self.tmp_dir), ("home", home)):
            self._csv(folder / f"canary_{TOKEN}_{where}.csv", f"CANARY_{where.upper()}_{TOKEN}")
        self._csv(Path("/tmp") / f"canary_{TOKEN}_top.csv", f"CANARY_TOP_{TOKEN}")
        content = f"CANARY_JSON_{TOKEN}"
        path = self.tmp_dir / f"canary_{TOKEN}.json"
        path.write_text(json.dumps({"secret": content}) + "\n")
        self._add(path, content)
        content = f"CANARY_PARQUET_{TOKEN}"
        path = self.tmp_dir / f"canary_{TOKEN}.parquet"
        pq.write_table(pa.table({"secret": [content]}), path)
        self._add(path, content)
        self.segment = f"CANARY_SEGMENT_{TOKEN}"  # a value of secret_ds, which ana may not read
        self.contents.append(self.segment)

    def _csv(self, path: Path, content: str) -> None:
        path.write_text(f"secret,n\n{content},42\n")
        self._add(path, content)

    def _add(self, path: Path, content: str) -> None:
        self.files.append(path)
        self.contents.append(content)

    def leaks(self, text: str) -> list[str]:
        names = [p.name for p in self.files] + [self.tmp_dir.name]
        return [s for s in self.contents + names if s in text]

    def remove(self) -> None:
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        for p in self.files:
            p.unlink(missing_ok=True)


def _listing(root: Path, skip: tuple[str, ...] = ()) -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        if rel.parts and rel.parts[0] in skip:
            continue
        dirnames[:] = [d for d in dirnames if not (not rel.parts and d in skip)]
        out.update(str(rel / f) for f in filenames if not (not rel.parts and f.startswith(skip)))
    return out


def _tmp_with_token() -> set[str]:
    return {str(p) for p in Path("/tmp").iterdir() if TOKEN in p.name} | _listing(Path("/tmp") / f"radstack_canary_{TOKEN}")


@pytest.fixture(scope="module")
def probe_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Canaries, Path, Path]]:
    base = tmp_path_factory.mktemp("probe")
    home, cwd = base / "home", base / "cwd"
    home.mkdir()
    cwd.mkdir()
    canaries = Canaries(cwd, home)
    config = {"server": {"auth": {
        "enabled": True, "max_failed_logins": 0,
        "roles": {"wiki_reader": [{"resource": {"type": "DATASOURCE", "name": "wiki"}, "action": "READ"},
                                  {"resource": {"type": "SYSTEM_TABLE", "name": ".*"}, "action": "READ"},
                                  {"resource": {"type": "STATE", "name": ".*"}, "action": "READ"}]},
        "users": [{"name": ANA[0], "password_hash": hash_password(ANA[1]), "roles": ["wiki_reader"]}]}}}
    (home / "radstack.yaml").write_text(yaml.safe_dump(config))
    srv = ServingProcess(home, cwd=cwd, RADSTACK_CONFIG=str(home / "radstack.yaml"),
                         RADSTACK_COORDINATOR__METADATA_POLL_SECONDS="0.2")
    srv.start()
    try:
        settings = server_settings(home, {"server": {"port": srv.port}})
        metadata, deep = MetadataStore.from_settings(settings), open_deep_storage(settings)
        secret = wiki_table()
        secret = secret.set_column(secret.schema.get_field_index("page"), "page",
                                   pa.array([canaries.segment] * secret.num_rows))
        for ds, table in (("wiki", wiki_table()), ("secret_ds", secret)):
            index_and_publish(metadata, deep, table, {**WIKI_SCHEMA, "dataSource": ds}, version="2026-01-01T00:00:00.000Z")
        with httpx.Client(base_url=srv.url, auth=ANA, timeout=30) as c:
            deadline = time.monotonic() + 30
            while c.post("/druid/v2/sql", json={"query": "SELECT COUNT(*) AS n FROM wiki"}).json() != [{"n": 7}]:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert (home / "segment-cache" / "segments.duckdb").is_file(), "secret_ds's rows are in the segment cache"
        yield srv.url, canaries, home, cwd
    finally:
        srv.kill9()
        canaries.remove()


def _targets(canaries: Canaries, home: Path, cwd: Path) -> tuple[list[str], list[str]]:
    """(names a FROM clause may quote, table-function calls)."""
    t = canaries.tmp_dir
    paths = [
        f"canary_{TOKEN}_cwd.csv", f"./canary_{TOKEN}_cwd.csv", str(cwd / f"canary_{TOKEN}_cwd.csv"),
        str(t / f"canary_{TOKEN}_tmp.csv"), str(t / f"canary_{TOKEN}.parquet"), str(t / f"canary_{TOKEN}.json"),
        f"/tmp/canary_{TOKEN}_top.csv", str(home / f"canary_{TOKEN}_home.csv"),
        "/tmp/radstack_canary_*/*.csv", f"{t}/*", "/tmp/*.csv", "**/*.csv", "*.csv",
        f"{home}/segment-cache/**/*.parquet", f"{home}/segment-cache/segments.duckdb",
        f"{home}/deep-storage/**/*.parquet", f"{home}/metadata.db",
        "http://127.0.0.1:9/x.csv", "s3://radstack/x.parquet", f"file://{t}/canary_{TOKEN}_tmp.csv",
        "/etc/passwd", "/proc/self/environ",
    ]
    internal = ["__seg_1", "__seg_2", "__seg_3", "__ds_1", "__ds_2", "__rs_generation", "__rs_segment_cache", "__rs_cte_1", "__druid_sys_segments",
                "__projection_store__wiki__p", "duckdb_tables", "duckdb_settings", "duckdb_secrets", "secret_ds"]
    names = [f'"{p}"' for p in paths] + [f'"{n}"' for n in internal] + [
        "main.secret_ds", "memory.main.__seg_1", "segments.main.__seg_1", "segments.__rs_segment_cache", "system.main.duckdb_tables", "information_schema.tables",
        "pg_catalog.pg_class", "temp.main.x", "druid.__seg_1", "lookup.__seg_1", "sys.__seg_1"]
    f = f"canary_{TOKEN}_tmp.csv"
    functions = [
        f"read_csv('{t / f}')", f"read_csv_auto('{t}/*.csv')", f"read_parquet('{t}/*.parquet')",
        f"read_json_auto('{t / f'canary_{TOKEN}.json'}')", f"read_text('{t / f}')", f"read_blob('{t / f}')",
        "glob('/tmp/*')", f"glob('{t}/*')", "query_table('__seg_1')", f"query('SELECT * FROM read_text(''{t / f}'')')",
        f"sniff_csv('{t / f}')", f"parquet_schema('{t / f'canary_{TOKEN}.parquet'}')", "duckdb_tables()",
        "duckdb_settings()", "pragma_table_info('__seg_1')", f"TABLE(read_csv('{t / f}'))",
        "TABLE(EXTERN('{\"type\":\"local\",\"files\":[\"/etc/passwd\"]}', '{\"type\":\"csv\"}', '[]'))",
    ]
    return names, functions


def _wrap(x: str, identifier: bool) -> list[str]:
    out = [
        f"SELECT * FROM {x}",
        f"WITH c AS (SELECT 1 AS a) SELECT * FROM c, {x}",
        f"WITH c AS (SELECT * FROM {x}) SELECT * FROM c",
        f"SELECT * FROM (SELECT * FROM {x}) s",
        f"SELECT * FROM wiki w JOIN {x} x ON TRUE",
        f"SELECT (SELECT COUNT(*) FROM {x}) AS n",
        f"SELECT COUNT(*) AS n FROM wiki WHERE page IN (SELECT * FROM {x})",
        f"SELECT * FROM wiki, LATERAL (SELECT * FROM {x}) l",
        f"SELECT * FROM {x} CROSS JOIN UNNEST(ARRAY[1, 2]) AS u(v)",
        f"SELECT page FROM wiki UNION ALL SELECT * FROM {x}",
        f"SELECT page FROM wiki EXCEPT SELECT * FROM {x}",
        f"SELECT page FROM wiki INTERSECT SELECT * FROM {x}",
        f"EXPLAIN PLAN FOR SELECT * FROM {x}",
    ]
    if identifier:  # a CTE of that name in an inner scope, the name read in an outer one: every level
        out += [
            f"SELECT * FROM (WITH {x} AS (SELECT 1 AS a) SELECT a FROM {x}) t1, {x}",
            f"SELECT * FROM (SELECT * FROM (WITH {x} AS (SELECT 1 AS a) SELECT a FROM {x}) t2) t1, {x}",
            f"SELECT * FROM (SELECT * FROM (SELECT * FROM (WITH {x} AS (SELECT 1 AS a) SELECT a FROM {x}) t3) t2) t1 "
            f"JOIN {x} ON TRUE",
            f"SELECT COUNT(*) AS n FROM wiki WHERE EXISTS (WITH {x} AS (SELECT 1 AS a) SELECT a FROM {x}) "
            f"AND page IN (SELECT * FROM {x})",
            f"(WITH {x} AS (SELECT 1 AS a) SELECT a FROM {x}) UNION ALL SELECT * FROM {x}",
            f"WITH a AS (WITH {x} AS (SELECT 1 AS q) SELECT q FROM {x}) SELECT * FROM a, {x}",
            f"SELECT (WITH {x} AS (SELECT 1 AS a) SELECT a FROM {x}) AS y, (SELECT COUNT(*) FROM {x}) AS z",
            f"WITH {x} AS (SELECT 1 AS a) SELECT * FROM {x} WHERE a IN (SELECT 1 FROM {x} s, (SELECT 2) t)",
        ]
    return out


def _writes(canaries: Canaries, cwd: Path) -> list[str]:
    out = f"/tmp/radstack_probe_{TOKEN}_out"
    return [
        f"COPY (SELECT 1) TO '{out}.csv'", f"COPY wiki TO '{out}.parquet' (FORMAT parquet)",
        f"SELECT * FROM wiki; COPY (SELECT 1) TO '{out}.csv'", f"EXPORT DATABASE '{out}_db'",
        f"ATTACH '{out}.duckdb' AS x", f"CREATE TABLE x AS SELECT * FROM read_csv('{canaries.files[0]}')",
        "INSTALL httpfs", "LOAD httpfs", f"LOAD '{out}.duckdb_extension'", "SET enable_external_access = true",
        "SET allowed_directories = ['/']", "RESET lock_configuration", "PRAGMA database_list", "PRAGMA show_tables",
        "CALL duckdb_tables()", "SELECT current_setting('allowed_directories') AS s", "SELECT getenv('HOME') AS h",
        f"SELECT * FROM wiki WHERE page = (SELECT content FROM read_text('{canaries.files[0]}'))",
        f"SELECT * FROM wiki WHERE page LIKE (SELECT secret FROM read_csv('{cwd / canaries.files[0].name}'))",
        "SELECT * FROM wiki AS OF TIMESTAMP '2020-01-01'", "DETACH x", "USE secret_ds", "CHECKPOINT",
        "SELECT * FROM sys.segments", "SELECT * FROM INFORMATION_SCHEMA.COLUMNS",
        "SELECT page FROM secret_ds", "SELECT COUNT(*) FROM wiki, secret_ds",
    ]


def _native(canaries: Canaries) -> list[dict[str, Any]]:
    t = canaries.tmp_dir
    f = str(t / f"canary_{TOKEN}_tmp.csv")
    exprs = [f"read_csv('{f}')", f"(SELECT * FROM read_text('{f}'))", "getenv('HOME')",
             f"concat(page, (SELECT content FROM read_text('{f}')))", "current_setting('allowed_directories')",
             f"\"{f}\"", "__seg_1", f"glob('{t}/*')"]
    iv = ["2024-01-01/2024-01-03"]
    out: list[dict[str, Any]] = []
    for e in exprs:
        out.append({"queryType": "scan", "dataSource": "wiki", "intervals": iv, "limit": 5,
                    "virtualColumns": [{"type": "expression", "name": "v", "expression": e, "outputType": "STRING"}],
                    "columns": ["v"]})
        out.append({"queryType": "timeseries", "dataSource": "wiki", "intervals": iv, "granularity": "all",
                    "filter": {"type": "expression", "expression": f"{e} == 'x'"},
                    "aggregations": [{"type": "count", "name": "n"}]})
        out.append({"queryType": "groupBy", "dataSource": "wiki", "intervals": iv, "granularity": "all",
                    "dimensions": ["page"], "aggregations": [
                        {"type": "longSum", "name": "s", "fieldName": "added", "expression": e}],
                    "postAggregations": [{"type": "expression", "name": "p", "expression": e}]})
    for ds in (f, f"{t}/*.csv", "__seg_1", "secret_ds", "duckdb_tables", f"read_csv('{f}')"):
        out.append({"queryType": "timeseries", "dataSource": {"type": "table", "name": ds}, "intervals": iv,
                    "granularity": "all", "aggregations": [{"type": "count", "name": "n"}]})
        out.append({"queryType": "scan", "dataSource": {"type": "query", "query": {
            "queryType": "scan", "dataSource": ds, "intervals": iv}}, "intervals": iv})
        out.append({"queryType": "segmentMetadata", "dataSource": ds, "intervals": iv})
    out.append({"queryType": "topN", "dataSource": "wiki", "intervals": iv, "granularity": "all", "threshold": 5,
                "metric": "n", "aggregations": [{"type": "count", "name": "n"}],
                "dimension": {"type": "extraction", "dimension": "page",
                              "extractionFn": {"type": "registeredLookup", "lookup": "__seg_1"}}})
    return out


def test_hostile_statements_read_no_file_and_no_other_datasource(probe_server: Any) -> None:
    url, canaries, home, cwd = probe_server
    names, functions = _targets(canaries, home, cwd)
    sql = [s for n in names for s in _wrap(n, True)] + [s for f in functions for s in _wrap(f, False)]
    sql += _writes(canaries, cwd)
    before = (_listing(cwd), _listing(home, DATA_DIRS), _tmp_with_token())
    codes: Counter[int] = Counter()
    failures: list[str] = []
    sent = Counter()

    def check(kind: str, what: Any, r: httpx.Response) -> None:
        codes[r.status_code] += 1
        sent[kind] += 1
        leaked = canaries.leaks(r.text)
        if leaked or r.status_code not in ALLOWED_STATUS:
            failures.append(f"{kind} {r.status_code} leaked={leaked}: {str(what)[:160]} → {r.text[:200]}")

    with httpx.Client(base_url=url, auth=ANA, timeout=60) as c:
        for q in sql:
            check("sql", q, c.post("/druid/v2/sql", json={"query": q}))
        for q in sql[::7]:
            check("subscription", q, c.post("/radstack/v1/subscriptions", json={"query": q}))
        for q in _native(canaries):
            check("native", q, c.post("/druid/v2", json=q))
            check("subscription", q, c.post("/radstack/v1/subscriptions", json={"nativeQuery": q}))
        for sub in c.get("/radstack/v1/subscriptions").json():
            c.delete(f"/radstack/v1/subscriptions/{sub['id']}")
        # the server still answers, and answers right
        assert c.post("/druid/v2/sql", json={"query": "SELECT COUNT(*) AS n FROM wiki"}).json() == [{"n": 7}]
    after = (_listing(cwd), _listing(home, DATA_DIRS), _tmp_with_token())
    created = [sorted(a - b) for a, b in zip(after, before, strict=True)]
    statuses("hostile statements").update(codes)
    REPORT["hostile statements"].update({"sent": dict(sent), "leaks or 5xx": len(failures),
                                         "files created outside data dirs": sum(map(len, created))})
    assert sum(sent.values()) >= 200
    assert not failures, "\n".join(failures[:20])
    assert created == [[], [], []], created
