"""pydruid's DB-API and SQLAlchemy dialect (what Superset uses) against the live server."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

pytestmark = pytest.mark.slow


def _hostport(base: str) -> tuple[str, int]:
    u = urlparse(base)
    assert u.hostname is not None and u.port is not None
    return u.hostname, u.port


def test_dbapi(sql_server: str) -> None:
    from pydruid.db import connect

    host, port = _hostport(sql_server)
    conn = connect(host=host, port=port, path="/druid/v2/sql/", scheme="http")
    cur = conn.cursor()
    cur.execute("SELECT page, SUM(added) AS added, MIN(__time) AS t FROM wiki GROUP BY page ORDER BY 2 DESC")
    rows = cur.fetchall()
    assert [tuple(r) for r in rows] == [("Main", 38, "2024-01-01T00:00:00.000Z"),
                                        ("Talk", 15, "2024-01-01T01:00:00.000Z"),
                                        ("Help", 3, "2024-01-02T02:00:00.000Z")]
    assert [d[0] for d in cur.description] == ["page", "added", "t"]
    cur.execute("SELECT COUNT(*) AS c FROM wiki WHERE page = %(p)s", {"p": "Talk"})
    assert cur.fetchone()[0] == 2


def test_dbapi_errors(sql_server: str) -> None:
    from pydruid.db import connect
    from pydruid.db.exceptions import ProgrammingError

    host, port = _hostport(sql_server)
    cur = connect(host=host, port=port, path="/druid/v2/sql/", scheme="http").cursor()
    for bad in ("SELECT * FROM nosuch", "SELEC 1", "DROP TABLE wiki"):
        with pytest.raises(ProgrammingError) as ei:
            cur.execute(bad)
            cur.fetchall()
        assert "druidException" in str(ei.value) or "INVALID_INPUT" in str(ei.value)


def test_sqlalchemy_inspector(sql_server: str) -> None:
    import sqlalchemy as sa

    host, port = _hostport(sql_server)
    engine = sa.create_engine(f"druid://{host}:{port}/druid/v2/sql/")
    insp = sa.inspect(engine)
    assert "wiki" in insp.get_table_names()
    assert "druid" in insp.get_schema_names()
    cols = {c["name"]: c for c in insp.get_columns("wiki")}
    assert set(cols) == {"__time", "page", "user", "country", "ns", "count", "added", "delta"}
    assert isinstance(cols["__time"]["type"], sa.types.TIMESTAMP) and cols["__time"]["nullable"] is False
    assert isinstance(cols["page"]["type"], sa.types.String) and cols["page"]["nullable"] is True
    assert isinstance(cols["added"]["type"], sa.types.BigInteger)
    assert isinstance(cols["delta"]["type"], sa.types.Float)
    with engine.connect() as conn:
        # pydruid's has_table predates SQLAlchemy 2's inspector keywords: call the dialect directly
        # (it sends SELECT COUNT(*) > 0 AS exists_ FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_NAME = ...).
        assert engine.dialect.has_table(conn, "wiki") and not engine.dialect.has_table(conn, "nosuch")
        assert conn.execute(sa.text("SELECT 1")).scalar() == 1
        n = conn.execute(sa.text("SELECT SUM(\"count\") FROM wiki WHERE __time >= TIME_PARSE('2024-01-02T00:00:00')"))
        assert n.scalar() == 4
