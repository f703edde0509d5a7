"""``/druid/v2/sql`` over HTTP against a live server on the real broker: bodies, formats, headers,
errors and cancellation, byte for byte where Druid's shape matters."""

from __future__ import annotations

import threading
import time

import httpx
import orjson
import pytest

pytestmark = pytest.mark.slow

Q = "SELECT page, SUM(added) AS added FROM wiki GROUP BY page ORDER BY added DESC"


def post(base: str, body: object, path: str = "/druid/v2/sql", **kw: object) -> httpx.Response:
    return httpx.post(base + path, json=body, timeout=30, **kw)  # type: ignore[arg-type]


def test_object_default_and_query_id(sql_server: str) -> None:
    r = post(sql_server, {"query": Q, "context": {"sqlQueryId": "q-1"}})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.headers["x-druid-sql-query-id"] == "q-1"
    assert "x-druid-sql-header-included" not in r.headers
    assert r.text == '[{"page":"Main","added":38},{"page":"Talk","added":15},{"page":"Help","added":3}]\n'
    r = post(sql_server, {"query": Q}, path="/druid/v2/sql/")
    assert r.status_code == 200 and len(r.headers["x-druid-sql-query-id"]) == 36


def test_formats_and_headers(sql_server: str) -> None:
    r = post(sql_server, {"query": Q + " LIMIT 1", "resultFormat": "array", "header": True,
                          "typesHeader": True, "sqlTypesHeader": True})
    assert r.headers["x-druid-sql-header-included"] == "yes"
    assert r.text == '[["page","added"],["STRING","LONG"],["VARCHAR","BIGINT"],["Main",38]]\n'
    r = post(sql_server, {"query": Q, "resultFormat": "arrayLines"})
    assert r.headers["content-type"].startswith("text/plain")
    assert r.text == '["Main",38]\n["Talk",15]\n["Help",3]\n\n'
    r = post(sql_server, {"query": Q, "resultFormat": "objectLines"})
    assert r.text == '{"page":"Main","added":38}\n{"page":"Talk","added":15}\n{"page":"Help","added":3}\n\n'
    r = post(sql_server, {"query": Q, "resultFormat": "csv", "header": True})
    assert r.headers["content-type"].startswith("text/csv")
    assert r.text == "page,added\nMain,38\nTalk,15\nHelp,3\n\n"
    r = post(sql_server, {"query": "SELECT MIN(__time) AS t FROM wiki", "resultFormat": "array"})
    assert r.text == '[["2024-01-01T00:00:00.000Z"]]\n'


def test_plain_and_form_bodies(sql_server: str) -> None:
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "text/plain; charset=utf-8"):
        r = httpx.post(sql_server + "/druid/v2/sql", content=Q.encode(), headers={"Content-Type": ctype})
        assert r.status_code == 200, r.text
        assert orjson.loads(r.content)[0] == {"page": "Main", "added": 38}
    r = httpx.post(sql_server + "/druid/v2/sql", content=b"<q/>", headers={"Content-Type": "application/xml"})
    assert r.status_code == 415 and r.json()["error"] == "druidException"


def test_parameters(sql_server: str) -> None:
    r = post(sql_server, {"query": "SELECT COUNT(*) AS c FROM wiki WHERE page = ? AND ns >= ?",
                          "parameters": [{"type": "VARCHAR", "value": "Talk"}, {"type": "BIGINT", "value": 1}]})
    assert r.json() == [{"c": 2}]


@pytest.mark.parametrize("body,status,fragment", [
    ({"query": "SELEC page FROM wiki"}, 400, "Incorrect syntax"),
    ({"query": "SELECT * FROM nosuch"}, 400, "Object 'nosuch' not found"),
    ({"query": "SELECT nosuch FROM wiki"}, 400, "Column 'nosuch' not found"),
    ({"query": "DROP TABLE wiki"}, 400, "read-only"),
    ({"query": "SELECT * FROM read_csv('/etc/passwd')"}, 400, "read-only"),
    ({"query": "SELECT LOOKUP(page, 'x') FROM wiki"}, 400, "Lookup [x] not found"),
    ({"query": "SELECT TDIGEST_QUANTILE(added, 0.5) FROM wiki"}, 501, "not supported"),
    ({"query": Q, "typesHeader": True}, 400, "header"),
    ({"query": Q, "resultFormat": "xml"}, 400, "resultFormat"),
    ({"nope": 1}, 400, "query"),
])
def test_errors(sql_server: str, body: dict, status: int, fragment: str) -> None:
    r = post(sql_server, body)
    assert r.status_code == status, r.text
    err = r.json()
    assert err["error"] == "druidException" and fragment in err["errorMessage"]
    assert set(err) >= {"errorCode", "category", "persona", "errorMessage", "errorClass"}
    # the server keeps serving
    assert post(sql_server, {"query": "SELECT 1 AS one"}).json() == [{"one": 1}]


def test_bad_json(sql_server: str) -> None:
    r = httpx.post(sql_server + "/druid/v2/sql", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["category"] == "INVALID_INPUT"


SLOW = ("SELECT SUM(a.added * b.added + c.added - d.added * e.added + f.added + g.added + h.added + i.added"
        " + j.added + k.added) AS s FROM wiki a, wiki b, wiki c, wiki d, wiki e, wiki f, wiki g, wiki h, wiki i,"
        " wiki j, wiki k")


def test_timeout_is_504(sql_server: str) -> None:
    t0 = time.monotonic()
    r = post(sql_server, {"query": SLOW, "context": {"timeout": 200}})
    assert r.status_code == 504, r.text
    assert r.json()["category"] == "TIMEOUT"
    assert time.monotonic() - t0 < 20


def test_cancel(sql_server: str) -> None:
    assert httpx.delete(sql_server + "/druid/v2/sql/nope").status_code == 404
    result: dict[str, httpx.Response] = {}
    t = threading.Thread(target=lambda: result.setdefault(
        "r", post(sql_server, {"query": SLOW, "context": {"sqlQueryId": "to-cancel"}})))
    t.start()
    deadline = time.monotonic() + 10
    while True:
        d = httpx.delete(sql_server + "/druid/v2/sql/to-cancel")
        if d.status_code == 202 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    t.join(timeout=30)
    assert d.status_code == 202
    assert result["r"].status_code == 500 and result["r"].json()["category"] == "CANCELED"
