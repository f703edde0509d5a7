"""The second wall (#34): the broker's DuckDB is locked, so even a statement that got past the SQL
checks (sent to DuckDB directly here) cannot read or write a file outside its spill directory, attach a
database, load or install an extension, or change a setting. The other connections that run what a
spec names (indexer, projections, timestamp parsing) are locked the same way."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from radstack.duckdb_sandbox import sandboxed_connection
from radstack.time.timestamps import utc_connection
from tests.fixtures.broker import BrokerEnv

CANARY = "CANARY-5f1c9e-engine-lock"


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    path = tmp_path / "secret.csv"
    path.write_text(f"a,b\n{CANARY},42\n")
    return path


def _refused(cur: duckdb.DuckDBPyConnection, sql: str) -> str:
    with pytest.raises(duckdb.Error) as ei:
        cur.execute(sql).fetchall()
    assert CANARY not in str(ei.value)
    return str(ei.value)


def _hostile(canary: Path, outside: Path) -> list[str]:
    return [
        f"SELECT * FROM '{canary}'",
        f"SELECT * FROM read_csv('{canary}')",
        f"SELECT * FROM read_text('{canary}')",
        f"SELECT * FROM read_blob('{canary}')",
        f"SELECT * FROM glob('{canary.parent}/*')",
        f"SELECT * FROM read_csv('{canary.parent}/*.csv')",
        "SELECT * FROM read_text('/etc/passwd')",
        f"COPY (SELECT 1) TO '{outside / 'written.csv'}'",
        f"ATTACH '{outside / 'other.db'}' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        f"LOAD '{outside / 'evil.duckdb_extension'}'",  # json, parquet, icu are built in: a LOAD of them is a no-op
        "SELECT * FROM read_csv('http://127.0.0.1:9/x.csv')",
        "SET enable_external_access = true",
        "SET allowed_directories = ['/']",
        "SET memory_limit = '100TB'",
        "SET lock_configuration = false",
        "SET autoload_known_extensions = true",
        "RESET enable_external_access",
    ]


def test_the_brokers_connection_refuses_files_extensions_and_settings(wiki: BrokerEnv, canary: Path,
                                                                       tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cur = wiki.service.connection()
    try:
        assert cur.execute('SELECT count(*) FROM "wiki"').fetchone() == (7,)  # still serves
        for sql in _hostile(canary, outside):
            _refused(cur, sql)
        settings = dict(cur.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access', "
            "'lock_configuration', 'autoload_known_extensions', 'autoinstall_known_extensions')").fetchall())
        assert settings == {"enable_external_access": "false", "lock_configuration": "true",
                            "autoload_known_extensions": "false", "autoinstall_known_extensions": "false"}
    finally:
        cur.close()
    assert list(outside.iterdir()) == []


def test_memory_limit_comes_from_settings(tmp_path: Path) -> None:
    from radstack.storage.metadata import MetadataStore
    from serving.broker.service import BrokerService
    from tests.fixtures.server import server_settings

    settings = server_settings(tmp_path / "home", {"server": {"memory_limit": "300MiB"}})
    service = BrokerService(settings, MetadataStore.from_url(f"sqlite:///{tmp_path / 'm.db'}"), None)
    try:
        cur = service.connection()
        (limit,) = cur.execute("SELECT current_setting('memory_limit')").fetchone()  # type: ignore[misc]
        assert limit.replace(" ", "") in ("300.0MiB", "300MiB")
        _refused(cur, "SET memory_limit = '2GiB'")
    finally:
        service.stop()


@pytest.mark.parametrize("open_connection", [sandboxed_connection, utc_connection], ids=["sandbox", "timestamps"])
def test_spec_connections_are_locked_too(open_connection, canary: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outside = tmp_path / "outside"
    outside.mkdir()
    con = open_connection()
    try:
        for sql in _hostile(canary, outside):
            _refused(con, sql)
    finally:
        con.close()
    assert list(outside.iterdir()) == []


def test_allowed_directory_is_the_only_place(tmp_path: Path, canary: Path) -> None:
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "rows.csv").write_text("x\n1\n2\n")
    con = sandboxed_connection(allowed_dirs=[staged])
    try:
        assert con.execute(f"SELECT sum(x) FROM read_csv('{staged / 'rows.csv'}')").fetchone() == (3,)
        _refused(con, f"SELECT * FROM read_csv('{canary}')")
        _refused(con, f"SELECT * FROM read_csv('{staged}/../secret.csv')")
    finally:
        con.close()


def test_an_engine_refusal_is_the_clients_4xx_not_a_5xx(canary: Path) -> None:
    from serving.broker.sql.engine import duckdb_error

    con = sandboxed_connection()
    try:
        with pytest.raises(duckdb.PermissionException) as ei:
            con.execute(f"SELECT * FROM read_csv('{canary}')")
        err = duckdb_error(ei.value, "q-1")
        assert err.status == 403 and str(canary) not in err.message and "secret" not in err.message
        with pytest.raises(duckdb.Error) as ei2:
            con.execute("SET memory_limit = '1GiB'")
        assert duckdb_error(ei2.value, "q-2").status < 500
    finally:
        con.close()
