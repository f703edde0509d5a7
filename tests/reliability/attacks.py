"""Attack shapes against a serving process (#49): one request, or a crowd of them, that tries to take the
server's memory, its query slots, its time or its sockets away from everyone else.

Every shape runs against the same server (``server.memory_limit`` 512 MiB, auth on, a 4,000-row datasource,
run under an address-space limit), from the attacker's own loopback address (127.0.0.2) while a second
user (the *victim*, from 127.0.0.1) sends a simple query in a loop. Per shape :func:`measure` reports: the
server alive afterwards, its peak RSS (``VmHWM``, reset before the shape), the victim's p50/p99 during the
attack against idle (a shape that ends sooner is repeated for :data:`SUSTAIN_SECONDS`), and the seconds from
the attack's end until no query held or waited for a slot.

``python -m tests.reliability.attacks [--cwd TREE] [--only NAME …]`` prints the table (``--cwd`` runs the
server of another checkout — the *before* column of the closing note); ``test_attacks.py`` asserts it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import resource
import socket
import ssl
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import yaml

from radstack.passwords import hash_password

MEMORY_LIMIT_MIB = 512
#: ``server.memory_headroom``: the memory guard's budget is memory_limit plus this
MEMORY_HEADROOM_MIB = 300
#: ``server.duckdb_threads`` (fixed, so the bound below does not follow the machine's cores)
DUCKDB_THREADS = 2
#: the address-space limit the server runs under: a regression fails the test, it cannot take the machine
ADDRESS_SPACE_BYTES = 12 * 2**30
ATTACKER_ADDRESS = "127.0.0.2"
USERS = {"admin": "admin-password-1", "mallory": "mallory-password-1", "victim": "victim-password-1"}
VICTIM_SQL = "SELECT page, COUNT(*) AS n FROM wiki WHERE country = 'US' GROUP BY page ORDER BY n DESC LIMIT 5"
ROWS = 4000
#: how long an attack crowd runs before the shape stops it (its requests are then abandoned)
ATTACK_SECONDS = 8.0
#: a shape that ends sooner is sent again until this long has passed
SUSTAIN_SECONDS = 3.0

DATA_SCHEMA: dict[str, Any] = {
    "dataSource": "wiki",
    "timestampSpec": {"column": "ts", "format": "millis"},
    "dimensionsSpec": {"dimensions": ["page", "user", "country"]},
    "metricsSpec": [{"type": "count", "name": "count"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False},
}


def wiki_rows(n: int = ROWS) -> pa.Table:
    t0 = 1_704_067_200_000  # 2024-01-01
    return pa.table({
        "ts": [t0 + i * 20_000 for i in range(n)],
        "page": [f"Page_{i % 97}" for i in range(n)],
        "user": [f"user{i % 31}" for i in range(n)],
        "country": [("US", "DE", "FR", "JP")[i % 4] for i in range(n)],
        "added": [i % 100 for i in range(n)],
    })


_TLS = ssl.create_default_context()


# ---- the server under attack ----------------------------------------------------------------------------


@dataclass
class Target:
    url: str
    pid: int
    port: int

    def client(self, user: str = "mallory", *, timeout: float = 30, attacker: bool = True) -> httpx.Client:
        # one TLS context for every client: building one costs ~20 ms of this process's CPU per request, which
        # on a shared machine the attacker would take from the server it measures (the server is plain HTTP)
        transport = httpx.HTTPTransport(local_address=ATTACKER_ADDRESS if attacker else None, verify=_TLS)
        return httpx.Client(base_url=self.url, auth=(user, USERS[user]), timeout=timeout, transport=transport)

    def raw(self, *, attacker: bool = True) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if attacker:
            s.bind((ATTACKER_ADDRESS, 0))
        s.settimeout(5)
        s.connect(("127.0.0.1", self.port))
        return s

    def basic(self, user: str = "mallory") -> str:
        import base64

        return "Basic " + base64.b64encode(f"{user}:{USERS[user]}".encode()).decode()


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


@contextlib.contextmanager
def serving(home: Path, cwd: Path | None = None) -> Iterator[Target]:
    """A serving process of ``cwd`` (this checkout by default) with the datasource loaded and three users."""
    import subprocess

    from operations.processes import free_port

    home.mkdir(parents=True, exist_ok=True)
    config = {
        "server": {
            "memory_limit": f"{MEMORY_LIMIT_MIB}MiB", "memory_headroom": f"{MEMORY_HEADROOM_MIB}MiB",
            "duckdb_threads": DUCKDB_THREADS,
            "auth": {"enabled": True, "users": [
                {"name": "admin", "password_hash": hash_password(USERS["admin"]), "roles": ["admin"]},
                {"name": "mallory", "password_hash": hash_password(USERS["mallory"]), "roles": ["reader"]},
                {"name": "victim", "password_hash": hash_password(USERS["victim"]), "roles": ["reader"]}],
                "roles": {"reader": [{"resource": {"type": "DATASOURCE", "name": "wiki"}, "action": "READ"}]}},
        },
        "coordinator": {"metadata_poll_seconds": 0.2, "period_seconds": 1},
    }
    (home / "radstack.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")},
           "RADSTACK_HOME": str(home), "RADSTACK_CONFIG": str(home / "radstack.yaml"),
           "RADSTACK_SERVER__PORT": str(port)}
    if cwd is not None:
        env["PYTHONPATH"] = str(cwd)
    log = (home / "server.log").open("ab")
    proc = subprocess.Popen([sys.executable, "-m", "operations", "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=cwd, preexec_fn=_limit_address_space)
    target = Target(f"http://127.0.0.1:{port}", proc.pid, port)
    try:
        deadline = time.monotonic() + 90
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(target.url + "/status/health", timeout=1).json() is True:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, f"the server did not start: {home}/server.log"
            time.sleep(0.2)
        _load(home, target)
        yield target
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(30)


def _load(home: Path, target: Target) -> None:
    from radstack.config import load_settings
    from radstack.spec import parse_data_schema
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.indexer import index_partition
    from radstack.storage.metadata import MetadataStore
    from radstack.storage.publish import publish

    settings = load_settings(home / "radstack.yaml", env={"RADSTACK_HOME": str(home)})
    deep = open_deep_storage(settings)
    res = index_partition(wiki_rows(), parse_data_schema(DATA_SCHEMA), version="2026-01-01T00:00:00.000Z",
                          deep_storage=deep, shard="core")
    publish(MetadataStore.from_settings(settings), deep, res.segments)
    with target.client("victim", attacker=False) as c:
        deadline = time.monotonic() + 60
        while True:
            r = c.post("/druid/v2/sql", json={"query": "SELECT COUNT(*) AS n FROM wiki"})
            if r.status_code == 200 and r.json() == [{"n": ROWS}]:
                return
            assert time.monotonic() < deadline, r.text
            time.sleep(0.2)


# ---- measuring ------------------------------------------------------------------------------------------


def _proc_status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def reset_peak(pid: int) -> None:
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


def alive(t: Target) -> bool:
    try:
        with t.client("victim", timeout=10, attacker=False) as c:
            return c.post("/druid/v2/sql", json={"query": "SELECT COUNT(*) AS n FROM wiki"}).json() == [{"n": ROWS}]
    except (httpx.HTTPError, ValueError):
        return False


def queries_in_flight(t: Target) -> int | None:
    """Queries holding or waiting for a slot, from the server's own gauges (None: not answered)."""
    try:
        with t.client("admin", timeout=5, attacker=False) as c:
            text = c.get("/metrics").text
    except httpx.HTTPError:
        return None
    n = 0.0
    for line in text.splitlines():
        if line.startswith(("radstack_broker_queries_running ", "radstack_broker_query_queue_depth ")):
            n += float(line.split()[1])
    return int(n)


class Victim:
    """The second user: a simple query in a loop from its own address, latencies recorded — in its own
    process, so the attacker's client threads (up to 150 in this one) do not slow its measurement."""

    def __init__(self, t: Target) -> None:
        self.t, self.latencies, self.statuses = t, [], Counter()  # type: ignore[var-annotated]
        ctx = multiprocessing.get_context("spawn")
        self._ctx = ctx
        self._stop = ctx.Event()
        self._results: Any = None
        self._proc: Any = None

    def run_for(self, n: int) -> list[float]:
        out = []
        with self.t.client("victim", attacker=False) as c:
            for _ in range(n):
                t0 = time.perf_counter()
                r = c.post("/druid/v2/sql", json={"query": VICTIM_SQL})
                out.append(time.perf_counter() - t0)
                assert r.status_code == 200, r.text
        return out

    def start(self) -> None:
        self.latencies, self.statuses = [], Counter()
        self._stop.clear()
        self._results = self._ctx.Queue()
        started = self._ctx.Event()
        self._proc = self._ctx.Process(target=_victim_loop, args=(self.t, self._stop, started, self._results),
                                       daemon=True)
        self._proc.start()
        started.wait(60)

    def stop(self) -> None:
        self._stop.set()
        if self._proc is not None:
            self.latencies, statuses = self._results.get(timeout=120)
            self.statuses = Counter(statuses)
            self._proc.join(30)


def _victim_loop(t: Target, stop: Any, started: Any, results: Any) -> None:
    latencies: list[float] = []
    statuses: Counter[Any] = Counter()
    with t.client("victim", timeout=60, attacker=False) as c:
        c.get("/status/health")  # the connection is open before the attack starts
        started.set()
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                r = c.post("/druid/v2/sql", json={"query": VICTIM_SQL})
                code: Any = r.status_code if r.status_code == 200 else f"{r.status_code} {_error_name(r)}"
            except httpx.HTTPError as e:
                code = type(e).__name__
            latencies.append(time.perf_counter() - t0)
            statuses[code] += 1
            stop.wait(0.02)
    results.put((latencies, dict(statuses)))


def _error_name(r: httpx.Response) -> str:
    """Druid's error JSON's ``error``/``errorClass`` (what a victim's failure was), or the body's start."""
    try:
        body = r.json()
    except ValueError:
        return r.text[:120]
    if not isinstance(body, dict):
        return r.text[:120]
    return f"{body.get('error')}/{body.get('errorClass')}: {str(body.get('errorMessage'))[:120]}"


def quantile(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


@dataclass
class Result:
    shape: str
    kind: str
    alive: bool
    peak_rss_mb: float
    victim_p50_ms: float
    victim_p99_ms: float
    idle_p50_ms: float
    idle_p99_ms: float
    victim_errors: int
    slot_free_s: float | None
    attack_statuses: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: the server's resident memory when the shape began (the peak counts from here: what earlier shapes left)
    start_rss_mb: float = 0.0
    #: what the victim got, by status (a failure names the victim's error, not only its count)
    victim_statuses: dict[str, int] = field(default_factory=dict)


def measure(t: Target, shape: Shape, idle: list[float]) -> Result:
    victim = Victim(t)
    reset_peak(t.pid)
    start_rss = _proc_status(t.pid, "VmRSS") / 2**20 if Path(f"/proc/{t.pid}").exists() else float("nan")
    started = time.monotonic()
    victim.start()
    statuses: Counter[Any] = Counter()
    while True:  # a quick shape is sent again and again: the victim is measured under a sustained attack
        try:
            statuses.update(shape.attack(t))
        except Exception as e:  # the attack's own client failing is an outcome, not a harness error
            statuses[type(e).__name__] += 1
        if time.monotonic() - started >= SUSTAIN_SECONDS or not Path(f"/proc/{t.pid}").exists():
            break
    ended = time.monotonic()
    slot_free: float | None = None
    deadline = ended + 60
    while time.monotonic() < deadline:
        n = queries_in_flight(t)
        if n == 0:
            slot_free = time.monotonic() - ended
            break
        time.sleep(0.05)
    time.sleep(0.3)
    victim.stop()
    peak = _proc_status(t.pid, "VmHWM") / 2**20 if Path(f"/proc/{t.pid}").exists() else float("nan")
    lat = victim.latencies
    return Result(
        shape.name, shape.kind, alive(t), round(peak, 1),
        round(quantile(lat, 0.5) * 1000, 1), round(quantile(lat, 0.99) * 1000, 1),
        round(quantile(idle, 0.5) * 1000, 1), round(quantile(idle, 0.99) * 1000, 1),
        sum(v for k, v in victim.statuses.items() if k != 200),
        None if slot_free is None else round(slot_free, 2),
        {str(k): v for k, v in statuses.items()}, round(ended - started, 1), round(start_rss, 1),
        {str(k): v for k, v in victim.statuses.items()})


# ---- attack helpers -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    name: str
    kind: str  # memory | time | sharing | http | streaming
    attack: Callable[[Target], Counter[Any]]
    note: str = ""


def _post(t: Target, path: str, body: Any, *, timeout: float = 60, user: str = "mallory") -> Any:
    with t.client(user, timeout=timeout) as c:
        try:
            return c.post(path, json=body).status_code
        except httpx.HTTPError as e:
            return type(e).__name__


def sql(query: str, **context: Any) -> Callable[[Target], Counter[Any]]:
    body = {"query": query, **({"context": context} if context else {})}
    return lambda t: Counter([_post(t, "/druid/v2/sql", body)])


def native(query: dict[str, Any]) -> Callable[[Target], Counter[Any]]:
    return lambda t: Counter([_post(t, "/druid/v2", query)])


def crowd(n: int, send: Callable[[Target, float], Any], seconds: float = ATTACK_SECONDS) -> Callable[[Target], Counter[Any]]:
    """``n`` clients sending ``send(target, client_timeout)`` in a loop for ``seconds``; a request still
    running at the end is abandoned (its client times out and closes the connection). The shape ends
    when every client has given up, so the slot-free time after it is the server's alone."""

    def attack(t: Target) -> Counter[Any]:
        out: Counter[Any] = Counter()
        lock = threading.Lock()
        stop = time.monotonic() + seconds

        def one() -> None:
            while time.monotonic() < stop:
                code = send(t, max(0.2, stop - time.monotonic()))
                with lock:
                    out[code] += 1

        threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
        for th in threads:
            th.start()
        for th in threads:  # each request ends within its client timeout (per phase: connect, send, read)
            th.join(60)
        return out

    return attack


def abandoned(n: int, body: dict[str, Any], path: str = "/druid/v2/sql", *, read_headers: bool,
              hold: float = ATTACK_SECONDS) -> Callable[[Target], Counter[Any]]:
    """``n`` raw connections that send a query and then never read (``read_headers``: they read the
    status line first), held open for ``hold`` seconds, then closed without a word."""
    payload = json.dumps(body).encode()

    def attack(t: Target) -> Counter[Any]:
        out: Counter[Any] = Counter()
        socks = []
        for _ in range(n):
            s = t.raw()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nAuthorization: " + t.basic().encode()
                      + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(payload)).encode()
                      + b"\r\n\r\n" + payload)
            socks.append(s)
        if read_headers:
            for s in socks:
                with contextlib.suppress(OSError):
                    out[s.recv(12)[9:12].decode() or "closed"] += 1
        time.sleep(hold)
        for s in socks:
            s.close()
        out["abandoned"] += n
        return out

    return attack


def _open_many(t: Target, n: int, first: bytes, hold: float) -> Counter[Any]:
    out: Counter[Any] = Counter()
    socks = []
    for _ in range(n):
        try:
            s = t.raw()
            if first:
                s.sendall(first)
            socks.append(s)
            out["opened"] += 1
        except OSError as e:
            out[type(e).__name__] += 1
    time.sleep(hold)
    for s in socks:
        s.setblocking(False)
        try:
            data = s.recv(65536)
            out["refused 503" if data.startswith(b"HTTP/1.1 503") else "closed by server" if not data
                else data[9:12].decode()] += 1
        except BlockingIOError:
            out["still open"] += 1
        except OSError:
            out["closed by server"] += 1
        s.close()
    return out


#: longer than server.header_timeout_seconds (10): the partial requests must be closed by then
SLOW_HOLD = 12.0


def slowloris(n: int) -> Callable[[Target], Counter[Any]]:
    return lambda t: _open_many(t, n, b"POST /druid/v2/sql HTTP/1.1\r\nHost: x\r\nX-A: ", SLOW_HOLD)


def idle_sockets(n: int) -> Callable[[Target], Counter[Any]]:
    return lambda t: _open_many(t, n, b"", SLOW_HOLD)


def slow_body(n: int) -> Callable[[Target], Counter[Any]]:
    head = (b"POST /druid/v2/sql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000\r\n\r\n{\"query\": \"")
    return lambda t: _open_many(t, n, head, ATTACK_SECONDS)


def _raw_requests(parts: Callable[[Target], list[bytes]], times: int = 20) -> Callable[[Target], Counter[Any]]:
    """``times`` raw requests, each sent as ``parts`` then the status read (or how the socket failed)."""

    def attack(t: Target) -> Counter[Any]:
        out: Counter[Any] = Counter()
        for _ in range(times):
            s = t.raw()
            try:
                for part in parts(t):
                    s.sendall(part)
                out[s.recv(12)[9:12].decode() or "closed"] += 1
            except OSError as e:
                out[type(e).__name__] += 1
            finally:
                s.close()
        return out

    return attack


big_header = _raw_requests(lambda t: [b"GET /status/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (4 * 2**20)
                                      + b"\r\n\r\n"])
declared_huge_body = _raw_requests(lambda t: [
    b"POST /druid/v2 HTTP/1.1\r\nHost: x\r\nAuthorization: " + t.basic().encode()
    + b"\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n", b"{" * 65536])


def scan(virtual_expression: str | None = None, filter_expression: str | None = None, **extra: Any) -> dict[str, Any]:
    q: dict[str, Any] = {"queryType": "scan", "dataSource": "wiki", "intervals": ["2024-01-01/2024-02-01"],
                         "columns": ["page"], **extra}
    if virtual_expression is not None:
        q["virtualColumns"] = [{"type": "expression", "name": "v", "expression": virtual_expression,
                                "outputType": "STRING"}]
        q["columns"] = ["v"]
    if filter_expression is not None:
        q["filter"] = {"type": "expression", "expression": filter_expression}
    return q


def _doubling_virtual_columns(levels: int) -> dict[str, Any]:
    cols = [{"type": "expression", "name": "v0", "expression": "repeat(page, 100)", "outputType": "STRING"}]
    for i in range(1, levels + 1):
        cols.append({"type": "expression", "name": f"v{i}", "expression": f"concat(v{i-1}, v{i-1})",
                     "outputType": "STRING"})
    return {"queryType": "scan", "dataSource": "wiki", "intervals": ["2024-01-01/2024-02-01"],
            "virtualColumns": cols, "columns": [f"v{levels}"], "limit": 10}


def _doubling_cte(levels: int, seed: str = "REPEAT('ab', 5000)", op: str = "{x} || {x}") -> str:
    parts = [f"l0 AS (SELECT {seed} AS x FROM wiki)"]
    for i in range(1, levels + 1):
        parts.append(f"l{i} AS (SELECT {op.format(x='x')} AS x FROM l{i-1})")
    return f"WITH {', '.join(parts)} SELECT SUM(CHAR_LENGTH(x)) FROM l{levels}"


def _array_doubling(levels: int) -> str:
    parts = ["l0 AS (SELECT ARRAY[page, page, page, page] AS x FROM wiki)"]
    for i in range(1, levels + 1):
        parts.append(f"l{i} AS (SELECT ARRAY_CONCAT(x, x) AS x FROM l{i-1})")
    return f"WITH {', '.join(parts)} SELECT SUM(ARRAY_LENGTH(x)) FROM l{levels}"


CROSS3 = "SELECT COUNT(*) FROM wiki a, wiki b, wiki c WHERE a.added + b.added + c.added > -1"
LONG_SQL = "SELECT COUNT(*) FROM wiki a, wiki b, wiki c WHERE a.added + b.added + c.added > -1 AND a.page <> b.user"
SORT_BIG = ("SELECT a.page || b.user || c.country AS k FROM wiki a, wiki b, wiki c ORDER BY k DESC LIMIT 1")


def _subscription(t: Target) -> Counter[Any]:
    body = {"query": "SELECT a.page, b.user, REPEAT(a.page, 100) AS r FROM wiki a, wiki b"}
    return Counter([_post(t, "/radstack/v1/subscriptions", body)])


def _task_with_repeat(t: Target) -> Counter[Any]:
    spec = {"type": "index_parallel", "spec": {
        "dataSchema": {"dataSource": "wiki", "timestampSpec": {"column": "ts", "format": "millis"},
                       "dimensionsSpec": {"dimensions": ["x"]},
                       "transformSpec": {"transforms": [
                           {"type": "expression", "name": "x", "expression": "repeat(page, 2000000000)"}]},
                       "granularitySpec": {"segmentGranularity": "day", "rollup": False}},
        "ioConfig": {"type": "index_parallel", "inputSource": {"type": "inline", "data": '{"ts": 1704067200000, '
                                                                                           '"page": "abc"}'},
                     "inputFormat": {"type": "json"}}}}
    return Counter([_post(t, "/druid/indexer/v1/task", spec, user="admin")])


def _priority(t: Target, timeout: float) -> Any:
    return _post(t, "/druid/v2/sql", {"query": LONG_SQL, "context": {"priority": 100, "timeout": 30000}},
                 timeout=timeout)


def _cross(t: Target, timeout: float) -> Any:
    return _post(t, "/druid/v2/sql", {"query": LONG_SQL, "context": {"timeout": 30000}}, timeout=timeout)


def _health(t: Target, timeout: float) -> Any:
    with t.client(timeout=timeout) as c:
        try:
            return c.get("/status/health").status_code
        except httpx.HTTPError as e:
            return type(e).__name__


SHAPES: tuple[Shape, ...] = (
    # memory: SQL
    Shape("sql-repeat-huge", "memory", sql("SELECT MAX(CHAR_LENGTH(REPEAT(page, 1000000000))) FROM wiki")),
    Shape("sql-repeat-just-under-cap", "memory", sql("SELECT MAX(CHAR_LENGTH(REPEAT(page || user, 100000))) FROM wiki")),
    Shape("sql-replace-growth", "memory",
          sql("SELECT CHAR_LENGTH(REPLACE(REPEAT('a', 1048576), 'a', REPEAT('b', 1000)))")),
    Shape("sql-replace-per-row", "memory",
          sql("SELECT MAX(CHAR_LENGTH(REPLACE(REPEAT(page, 10000), 'a', REPEAT(user, 100)))) FROM wiki")),
    Shape("sql-lpad-huge", "memory", sql("SELECT MAX(CHAR_LENGTH(LPAD(page, 2000000000, 'xy'))) FROM wiki")),
    Shape("sql-concat-doubling", "memory", sql(_doubling_cte(24))),
    Shape("sql-concat-fn-doubling", "memory", sql(_doubling_cte(24, op="CONCAT({x}, {x}, {x})"))),
    Shape("sql-regexp-replace-growth", "memory",
          sql("SELECT MAX(CHAR_LENGTH(REGEXP_REPLACE(REPEAT(page, 1000), '(.)', '$1$1$1$1$1$1$1$1$1$1'))) FROM wiki")),
    Shape("sql-string-format-width", "memory",
          sql("SELECT MAX(CHAR_LENGTH(STRING_FORMAT('%900000000s', page))) FROM wiki")),
    Shape("sql-string-agg-size", "memory",
          sql("SELECT CHAR_LENGTH(STRING_AGG(REPEAT(a.page, 1000), '', 100000000000)) FROM wiki a, wiki b")),
    Shape("sql-array-agg-size", "memory",
          sql("SELECT ARRAY_LENGTH(ARRAY_AGG(REPEAT(a.page, 100), 100000000000)) FROM wiki a, wiki b")),
    Shape("sql-array-concat-doubling", "memory", sql(_array_doubling(26))),
    Shape("sql-group-by-wide-keys", "memory",
          sql("SELECT COUNT(*) FROM (SELECT REPEAT(a.page || b.user, 2000) AS k FROM wiki a, wiki b GROUP BY 1)")),
    Shape("sql-sort-spill", "memory", sql(SORT_BIG, timeout=20000)),
    # memory: native
    Shape("native-virtual-repeat", "memory", native(scan("strlen(repeat(page, 1000000000))"))),
    Shape("native-filter-repeat", "memory", native(scan(filter_expression="strlen(repeat(page, 100000)) > 0"))),
    Shape("native-lpad", "memory", native(scan("lpad(page, 1000000000, 'x')"))),
    Shape("native-replace-growth", "memory",
          native(scan("strlen(replace(repeat(page, 100000), 'a', repeat(page, 1000)))"))),
    Shape("native-concat-doubling", "memory", native(_doubling_virtual_columns(24))),
    Shape("native-groupby-repeat", "memory", native({
        "queryType": "groupBy", "dataSource": "wiki", "intervals": ["2024-01-01/2024-02-01"], "granularity": "all",
        "virtualColumns": [{"type": "expression", "name": "v", "expression": "repeat(page, 50000000)",
                            "outputType": "STRING"}],
        "dimensions": ["v"], "aggregations": [{"type": "count", "name": "n"}]})),
    Shape("native-scan-big-answer", "streaming", native(scan("repeat(page, 6000)"))),
    Shape("subscription-big-answer", "streaming", _subscription),
    Shape("task-transform-repeat", "memory", _task_with_repeat),
    # time
    Shape("timeout-interrupts", "time", sql(CROSS3 + " AND a.user <> c.user", timeout=1500)),
    Shape("timeout-zero", "time", sql(LONG_SQL, timeout=0)),
    Shape("timeout-huge", "time", lambda t: Counter([_post(
        t, "/druid/v2/sql", {"query": LONG_SQL, "context": {"timeout": 1e30}}, timeout=15)])),
    Shape("abandoned-after-send", "time", abandoned(8, {"query": LONG_SQL, "context": {"timeout": 60000}},
                                                    read_headers=False, hold=1.0)),
    Shape("stops-reading-after-headers", "time", abandoned(
        16, {"query": "SELECT a.page, b.user FROM wiki a, wiki b", "context": {"timeout": 5000}}, read_headers=True)),
    # fair sharing
    Shape("slot-flood", "sharing", crowd(24, _cross)),
    Shape("priority-flood", "sharing", crowd(16, _priority)),
    Shape("queue-flood", "sharing", crowd(150, lambda t, timeout: _post(t, "/druid/v2/sql", {"query": CROSS3},
                                                                       timeout=timeout), seconds=6)),
    # HTTP
    Shape("slowloris-headers", "http", slowloris(3000)),
    Shape("idle-sockets", "http", idle_sockets(3000)),
    Shape("slow-body", "http", slow_body(500)),
    Shape("big-header", "http", big_header),
    Shape("declared-huge-body", "http", declared_huge_body),
    Shape("health-flood", "http", crowd(64, _health, seconds=5)),
)


def by_name(names: list[str] | None) -> list[Shape]:
    if not names:
        return list(SHAPES)
    known = {s.name: s for s in SHAPES}
    return [known[n] for n in names]


def run(home: Path, shapes: list[Shape], cwd: Path | None = None) -> list[Result]:
    """Every shape in turn; after one that took the server down, a fresh server for the next."""
    results: list[Result] = []
    todo = list(shapes)
    attempt = 0
    while todo:
        attempt += 1
        with serving(home / f"run{attempt}", cwd) as t:
            victim = Victim(t)
            victim.run_for(20)
            idle = victim.run_for(100)
            while todo:
                res = measure(t, todo.pop(0), idle)
                results.append(res)
                print(json.dumps(asdict(res)), flush=True)
                if not res.alive:
                    break
    return results


def table(results: list[Result]) -> str:
    lines = ["| shape | kind | alive | peak RSS MB | victim p50/p99 ms (idle) | slot free s | attack answers |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.shape} | {r.kind} | {'yes' if r.alive else '**no**'} | {r.peak_rss_mb:.0f} | "
                     f"{r.victim_p50_ms}/{r.victim_p99_ms} ({r.idle_p50_ms}/{r.idle_p99_ms}) | {r.slot_free_s} | "
                     f"{', '.join(f'{k}×{v}' for k, v in r.attack_statuses.items())} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cwd", type=Path, help="run the server of this checkout")
    p.add_argument("--home", type=Path, default=Path("build/attacks"))
    p.add_argument("--only", nargs="*")
    args = p.parse_args(argv)
    import shutil

    shutil.rmtree(args.home, ignore_errors=True)
    results = run(args.home, by_name(args.only), args.cwd)
    print(table(results))


if __name__ == "__main__":
    main()
