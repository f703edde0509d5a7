"""Live query subscriptions against the real server (uvicorn, SQLite metadata, local deep storage):
the answer at connect equals /druid/v2/sql's (or /druid/v2's), a publish pushes the new answer, a
change elsewhere pushes nothing, a sliding window slides, DELETE ends the stream, a restart keeps the
subscription, errors are Druid's, and with auth a subscription is its owner's."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pyarrow as pa
import pytest

from radstack.passwords import hash_password
from radstack.spec import parse_data_schema
from radstack.storage.indexer import index_partition
from radstack.storage.publish import publish
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant
from tests.fixtures.broker import WIKI_SCHEMA, wiki_table
from tests.fixtures.server import RunningServer, running_server

pytestmark = pytest.mark.slow

TOPK = "SELECT page, SUM(added) AS added, COUNT(*) AS n FROM wiki GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 2"
SUBS = "/radstack/v1/subscriptions"


class Events:
    """A Server-Sent Events reader on its own thread: ``next(timeout)`` → ``{"event", "id", "data"}``."""

    def __init__(self, url: str, auth: tuple[str, str] | None = None) -> None:
        self.q: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.status: int | None = None
        self._client = httpx.Client(timeout=httpx.Timeout(60, read=None), auth=auth)
        self._thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self._thread.start()

    def _read(self, url: str) -> None:
        try:
            with self._client.stream("GET", url) as r:
                self.status = r.status_code
                ev: dict[str, Any] = {}
                for line in r.iter_lines():
                    if line == "":
                        if "data" in ev:
                            self.q.put({"event": ev.get("event", "message"), "id": ev.get("id"),
                                        "data": orjson.loads(ev["data"])})
                        ev = {}
                    elif not line.startswith(":"):
                        k, _, v = line.partition(":")
                        ev[k] = v[1:] if v.startswith(" ") else v
        except httpx.HTTPError:
            pass
        finally:
            self.q.put(None)

    def next(self, timeout: float = 15.0) -> dict[str, Any] | None:
        return self.q.get(timeout=timeout)

    def quiet_for(self, seconds: float) -> bool:
        try:
            self.q.get(timeout=seconds)
            return False
        except queue.Empty:
            return True

    def close(self) -> None:
        self._client.close()


@contextmanager
def events(url: str, auth: tuple[str, str] | None = None) -> Iterator[Events]:
    e = Events(url, auth)
    try:
        yield e
    finally:
        e.close()


def _index(srv: RunningServer, table: pa.Table, schema: dict[str, Any], version: str) -> None:
    ctx = srv.ctx
    result = index_partition(table, parse_data_schema(schema), version=version, deep_storage=ctx.deep_storage)
    publish(ctx.metadata, ctx.deep_storage, result.segments)


def _sql(srv: RunningServer, query: str, auth: tuple[str, str] | None = None) -> Any:
    r = httpx.post(f"{srv.url}/druid/v2/sql", json={"query": query}, auth=auth, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def _wait_sql(srv: RunningServer, query: str, predicate: Any, timeout: float = 20) -> Any:
    """Poll until the broker (it polls the metadata store every second) serves what ``predicate`` wants."""
    deadline = time.monotonic() + timeout
    while True:
        r = httpx.post(f"{srv.url}/druid/v2/sql", json={"query": query}, timeout=30)
        if r.status_code == 200 and predicate(r.json()):
            return r.json()
        assert time.monotonic() < deadline, r.text
        time.sleep(0.1)


def _day(table: pa.Table, day: str) -> pa.Table:
    return table.filter(pa.compute.starts_with(table.column("ts"), day))


def test_sql_subscription_pushes_each_change_and_only_then(tmp_path: Path) -> None:
    with running_server(tmp_path) as srv:
        _index(srv, _day(wiki_table(), "2024-01-01"), WIKI_SCHEMA, "2024-02-01T00:00:00.000Z")
        _wait_sql(srv, "SELECT COUNT(*) AS c FROM wiki", lambda r: r and r[0]["c"] > 0)
        r = httpx.post(f"{srv.url}{SUBS}", json={"query": TOPK}, timeout=30)
        assert r.status_code == 200, r.text
        sub = r.json()
        assert sub["query"] == TOPK and sub["events"] == f"{SUBS}/{sub['id']}/events"
        with events(f"{srv.url}{sub['events']}") as ev:
            first = ev.next()
            assert first is not None and first["event"] == "message"
            assert first["data"] == _sql(srv, TOPK) == [{"page": "Main", "added": 16, "n": 2}, {"page": "Talk", "added": 7, "n": 1}]

            t0 = time.monotonic()
            _index(srv, _day(wiki_table(), "2024-01-02"), WIKI_SCHEMA, "2024-02-01T00:00:00.000Z")  # a new day
            pushed = ev.next()
            latency = time.monotonic() - t0
            assert pushed is not None and pushed["data"] == _sql(srv, TOPK)
            assert pushed["data"][0] == {"page": "Main", "added": 38, "n": 4}
            assert int(pushed["id"]) > int(first["id"])

            hub = srv.ctx.subscriptions
            before = hub.evaluations
            other = {**WIKI_SCHEMA, "dataSource": "other"}  # another datasource changes: nothing to re-run
            _index(srv, wiki_table(), other, "2024-02-01T00:00:00.000Z")
            _wait_sql(srv, "SELECT COUNT(*) AS c FROM other", lambda r: r and r[0]["c"] > 0)
            assert ev.quiet_for(1.5) and hub.evaluations == before

            # a newer version of day 1 (as a batch rebuild publishes) overshadows the old one
            rebuilt = _day(wiki_table(), "2024-01-01").set_column(5, "added", pa.array([100, 0, 0, 0], pa.int64()))
            _index(srv, rebuilt, WIKI_SCHEMA, "2024-03-01T00:00:00.000Z")
            pushed = ev.next()
            assert pushed is not None and pushed["data"] == _sql(srv, TOPK)
            assert pushed["data"][0] == {"page": "Main", "added": 122, "n": 4}
            print(f"\nsubscription: publish → pushed answer in {latency:.2f}s (broker poll 1 s)")

            # the same query subscribed twice shares one evaluation
            twin = httpx.post(f"{srv.url}{SUBS}", json={"query": TOPK}).json()
            assert twin["id"] != sub["id"]
            with events(f"{srv.url}{twin['events']}") as ev2:
                assert ev2.next()["data"] == pushed["data"]  # type: ignore[index]
                n = hub.evaluations
                day2 = _day(wiki_table(), "2024-01-02")
                _index(srv, day2.set_column(5, "added", pa.array([1, 1, 1, 1], pa.int64())), WIKI_SCHEMA,
                       "2024-04-01T00:00:00.000Z")
                a, b = ev.next(), ev2.next()
                assert a is not None and b is not None and a["data"] == b["data"]
                assert hub.evaluations == n + 1

            r = httpx.delete(f"{srv.url}{SUBS}/{sub['id']}")
            assert r.status_code == 200 and r.json() == {"id": sub["id"], "deleted": True}
            end = ev.next()
            assert end is not None and end["event"] == "end"
        assert httpx.get(f"{srv.url}{SUBS}/{sub['id']}").status_code == 404
        assert [s["id"] for s in httpx.get(f"{srv.url}{SUBS}").json()] == [twin["id"]]


def test_native_subscription_survives_a_restart(tmp_path: Path) -> None:
    native = {"queryType": "timeseries", "dataSource": "wiki", "granularity": "day",
              "intervals": ["2024-01-01/2024-01-03"], "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]}
    with running_server(tmp_path) as srv:
        _index(srv, wiki_table(), WIKI_SCHEMA, "2024-02-01T00:00:00.000Z")
        _wait_sql(srv, "SELECT COUNT(*) AS c FROM wiki", lambda r: r and r[0]["c"] > 0)
        sub = httpx.post(f"{srv.url}{SUBS}", json={"nativeQuery": native}, timeout=30).json()
        expected = httpx.post(f"{srv.url}/druid/v2", json=native).json()
        with events(f"{srv.url}{sub['events']}") as ev:
            assert ev.next()["data"] == expected  # type: ignore[index]
    with running_server(tmp_path) as srv:  # the same home: the subscription is still there
        assert [s["id"] for s in httpx.get(f"{srv.url}{SUBS}").json()] == [sub["id"]]
        with events(f"{srv.url}{sub['events']}") as ev:
            assert ev.next()["data"] == expected  # type: ignore[index]


def test_sliding_window_slides_without_new_data(tmp_path: Path) -> None:
    schema = {**WIKI_SCHEMA, "dataSource": "live",
              "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "none", "rollup": False}}
    now = now_millis()
    table = pa.table({"ts": [format_instant(now - 500), format_instant(now - 200)], "page": ["A", "B"],
                      "user": ["u", "u"], "country": ["US", "US"], "ns": [0, 0], "added": [1, 2], "delta": [0.0, 0.0]})
    window = ("SELECT page, SUM(added) AS added FROM live WHERE __time >= CURRENT_TIMESTAMP - INTERVAL '4' SECOND "
              "GROUP BY 1 ORDER BY 2 DESC LIMIT 5")
    with running_server(tmp_path, {"server": {"subscription_tick_ms": 200}}) as srv:
        _index(srv, table, schema, format_instant(now - 3_600_000))
        _wait_sql(srv, "SELECT COUNT(*) AS c FROM live", lambda r: r and r[0]["c"] == 2)
        sub = httpx.post(f"{srv.url}{SUBS}", json={"query": window}, timeout=30).json()
        with events(f"{srv.url}{sub['events']}") as ev:
            first = ev.next()
            assert first is not None and first["data"] == [{"page": "B", "added": 2}, {"page": "A", "added": 1}]
            slid = ev.next(timeout=10)  # the events leave the 4-second window: pushed without any publish
            assert slid is not None and slid["data"] == []
            assert ev.quiet_for(1.0)  # and nothing more while nothing changes


def test_errors_and_owners(tmp_path: Path) -> None:
    users = [{"name": "admin", "password_hash": hash_password("a"), "roles": ["admin"]},
             {"name": "reader", "password_hash": hash_password("r"), "roles": ["read"]},
             {"name": "limited", "password_hash": hash_password("l"), "roles": ["other_only"]}]
    roles = {"other_only": [{"resource": {"type": "DATASOURCE", "name": "other"}, "action": "READ"}]}
    with running_server(tmp_path, {"server": {"auth": {"enabled": True, "users": users, "roles": roles}}}) as srv:
        _index(srv, wiki_table(), WIKI_SCHEMA, "2024-02-01T00:00:00.000Z")
        deadline = time.monotonic() + 20
        while httpx.post(f"{srv.url}/druid/v2/sql", json={"query": "SELECT COUNT(*) FROM wiki"},
                         auth=("reader", "r")).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        url = f"{srv.url}{SUBS}"
        assert httpx.post(url, json={"query": TOPK}).status_code == 401
        r = httpx.post(url, json={"query": "SELECT nope FROM wiki"}, auth=("reader", "r"))
        assert r.status_code == 400 and r.json()["errorCode"] == "invalidInput", r.text
        r = httpx.post(url, json={"query": TOPK, "nativeQuery": {}}, auth=("reader", "r"))
        assert r.status_code == 400 and "exactly one" in r.json()["errorMessage"]
        r = httpx.post(url, content=b"{", auth=("reader", "r"))
        assert r.status_code == 400
        r = httpx.post(url, json={"query": TOPK, "resultFormat": "csv"}, auth=("reader", "r"))
        assert r.status_code == 400
        r = httpx.post(url, json={"query": TOPK}, auth=("limited", "l"))  # may not read wiki
        assert r.status_code == 403, r.text
        sub = httpx.post(url, json={"query": TOPK, "resultFormat": "array"}, auth=("reader", "r")).json()
        assert httpx.get(f"{url}/{sub['id']}", auth=("limited", "l")).status_code == 404  # not theirs
        assert httpx.delete(f"{url}/{sub['id']}", auth=("limited", "l")).status_code == 404
        assert httpx.get(url, auth=("limited", "l")).json() == []
        assert [s["id"] for s in httpx.get(url, auth=("admin", "a")).json()] == [sub["id"]]  # admins see all
        with events(f"{srv.url}{sub['events']}", auth=("reader", "r")) as ev:
            assert ev.next()["data"] == [["Main", 38, 4], ["Talk", 15, 2]]  # type: ignore[index]
        assert httpx.delete(f"{url}/{sub['id']}", auth=("reader", "r")).status_code == 200
