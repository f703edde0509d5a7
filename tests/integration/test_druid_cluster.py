"""The Druid-cluster path against a real Apache Druid 33 (single machine, from Maven Central jars), used
as the oracle for radstack's serving layer.

One small ads dataset (3 hours, hourly segments, minute rollup, some missing cities) goes
1. into radstack through its task API (``index_parallel``, JSON input) → Parquet segment files, the
   same files a batch rebuild writes;
2. into Druid through the ``index_parallel`` spec ``radctl druid specs`` generates from the datasource
   spec and radstack's visible segments (``appendToExisting: false``, combining aggregators,
   ``__time`` millis). Druid's Parquet extension is not on Maven Central, so the spec's local
   ``files`` are those Parquet files converted to JSON lines — same rows, same columns;
3. into Druid once more from the raw events with the datasource's own ``dataSchema`` (Druid's rollup
   vs radstack's).
Then a suite of Druid SQL and native queries must answer the same on all three.

Marked ``druid`` (excluded by default; ``make test-druid``) and ``slow``. The test of ``radctl druid
submit`` against radstack's own compatible task API is marked ``slow`` only.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from radstack.druid_cluster.specs import chunk_interval, index_parallel_spec
from radstack.druid_cluster.submit import OverlordClient
from radstack.spec import load_datasource_spec
from radstack.time.intervals import Interval, format_instant, parse_instant

REPO = Path(__file__).resolve().parents[2]
ADS_SPEC = REPO / "examples" / "ads" / "ads.yaml"
START = parse_instant("2026-01-01T00:00:00Z")
INTERVAL = Interval(START, START + 3 * 3600_000)
PUBLISHERS = ["bieberfever.com", "ultratrimfast.com", "gizmodo.com", "nytimes.com", "cnn.com", "wired.com"]
ADVERTISERS = ["google.com", "bing.com", "yahoo.com", "duckduckgo.com"]
CITIES = ["San Francisco", "Berlin", "Tokyo", "Paris", "Lagos", "Lima", "Oslo", None]


def ads_events(n: int = 2400, seed: int = 7, interval: Interval = INTERVAL) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ts = interval.start + rng.randrange(interval.duration_ms)
        ev: dict[str, Any] = {
            "timestamp": format_instant(ts),
            "impression_id": f"imp-{i}",
            "publisher": rng.choice(PUBLISHERS),
            "advertiser": rng.choice(ADVERTISERS),
            "gender": rng.choice(["male", "female"]),
            "price": round(rng.uniform(0.01, 5.0), 2),
        }
        city = rng.choice(CITIES)
        if city is not None:
            ev["city"] = city
        out.append(ev)
    return out


def write_events(directory: Path, events: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "events.json"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def raw_task(data_source: str, events_dir: Path, interval: Interval = INTERVAL) -> dict[str, Any]:
    schema = load_datasource_spec(ADS_SPEC).data_schema.to_json()
    schema["dataSource"] = data_source
    schema["granularitySpec"]["intervals"] = [interval.iso()]
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": schema,
            "ioConfig": {"type": "index_parallel",
                         "inputSource": {"type": "local", "baseDir": str(events_dir), "filter": "*.json"},
                         "inputFormat": {"type": "json"}, "appendToExisting": False},
            "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"},
                             "maxNumConcurrentSubTasks": 1},
        },
    }


def parquet_to_json_lines(files: list[str], out_dir: Path) -> list[str]:
    """The segment files' rows as JSON lines (``__time`` → epoch millis), one output file per input."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for i, f in enumerate(files):
        table = pq.read_table(f)
        rows = table.to_pylist()
        dest = out_dir / f"part-{i:04d}.json"
        with dest.open("w") as fh:
            for r in rows:
                r["__time"] = int(r["__time"].timestamp() * 1000)
                fh.write(json.dumps(r) + "\n")
        out.append(str(dest))
    return out


# ---- comparison ----------------------------------------------------------------------------------


def same(a: Any, b: Any, path: str = "$") -> list[str]:
    """Differences between two JSON values (floats compared with a relative tolerance)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return [] if a == b else [f"{path}: {a!r} != {b!r}"]
    if isinstance(a, int | float) and isinstance(b, int | float):
        if isinstance(a, int) and isinstance(b, int):
            return [] if a == b else [f"{path}: {a!r} != {b!r}"]
        return [] if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) else [f"{path}: {a!r} != {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict):
        diffs = [f"{path}: keys {sorted(a)} != {sorted(b)}"] if set(a) != set(b) else []
        for k in sorted(set(a) & set(b)):
            diffs += same(a[k], b[k], f"{path}.{k}")
        return diffs
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)} items"]
        out: list[str] = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += same(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


SCAN_ORDER_BY_DIMS = 'SELECT __time, publisher FROM {t} ORDER BY __time, publisher LIMIT 5'


def sql_suite(table: str) -> list[str]:
    """Queries whose answers must match row for row (the last one: as sets, for ties in __time)."""
    t = f'"{table}"'
    return [
        f'SELECT COUNT(*) AS "rows", SUM("count") AS events, SUM(price) AS revenue, MAX(max_price) AS top FROM {t}',
        f'SELECT publisher, SUM("count") AS events, SUM(price) AS revenue FROM {t} GROUP BY publisher ORDER BY publisher',
        f"SELECT TIME_FLOOR(__time, 'PT1H') AS h, SUM(\"count\") AS events, COUNT(*) AS n FROM {t} GROUP BY 1 ORDER BY 1",
        f"SELECT city, gender, COUNT(*) AS n, SUM(\"count\") AS events FROM {t} WHERE advertiser = 'bing.com' "
        "GROUP BY city, gender ORDER BY city, gender",
        f"SELECT advertiser, SUM(price) AS revenue FROM {t} GROUP BY advertiser ORDER BY revenue DESC LIMIT 2",
        f'SELECT MIN(__time) AS first_t, MAX(__time) AS last_t FROM {t}',
        f"SELECT COUNT(*) AS n FROM {t} WHERE city IS NULL",
        f"SELECT __time, publisher, advertiser, gender, city, \"count\", price, max_price FROM {t} "
        "WHERE __time >= TIMESTAMP '2026-01-01 01:00:00' AND __time < TIMESTAMP '2026-01-01 01:03:00' "
        "ORDER BY __time",
    ]


def native_suite(ds: str) -> list[dict[str, Any]]:
    aggs = [{"type": "longSum", "name": "events", "fieldName": "count"},
            {"type": "doubleSum", "name": "revenue", "fieldName": "price"},
            {"type": "doubleMax", "name": "top", "fieldName": "max_price"}]
    iv = [INTERVAL.iso()]
    return [
        {"queryType": "timeseries", "dataSource": ds, "granularity": "hour", "intervals": iv, "aggregations": aggs},
        {"queryType": "topN", "dataSource": ds, "granularity": "all", "intervals": iv, "dimension": "publisher",
         "metric": "revenue", "threshold": 3, "aggregations": aggs},
        {"queryType": "groupBy", "dataSource": ds, "granularity": "all", "intervals": iv,
         "dimensions": ["gender", "city"], "filter": {"type": "selector", "dimension": "publisher", "value": "cnn.com"},
         "aggregations": aggs, "limitSpec": {"type": "default", "columns": ["gender", "city"]}},
        {"queryType": "timeBoundary", "dataSource": ds},
        {"queryType": "timeseries", "dataSource": ds, "granularity": "all", "intervals": iv,
         "filter": {"type": "and", "fields": [{"type": "selector", "dimension": "gender", "value": "female"},
                                              {"type": "not", "field": {"type": "selector", "dimension": "city",
                                                                         "value": None}}]},
         "aggregations": [*aggs, {"type": "count", "name": "rows"}]},
    ]


def sql(url: str, query: str) -> Any:
    r = httpx.post(f"{url}/druid/v2/sql", json={"query": query, "resultFormat": "object"}, timeout=120)
    assert r.status_code == 200, f"{url}: {query}: {r.status_code} {r.text[:1000]}"
    return r.json()


def native(url: str, query: dict[str, Any]) -> Any:
    r = httpx.post(f"{url}/druid/v2", json=query, timeout=120)
    assert r.status_code == 200, f"{url}: {query}: {r.status_code} {r.text[:1000]}"
    return r.json()


def wait_broker_serves(broker: str, ds: str, timeout_s: float = 60.0) -> None:
    """Until Druid's broker sees every active segment of ``ds`` as available."""
    q = ("SELECT COUNT(*) AS active, SUM(CASE WHEN is_available = 1 THEN 1 ELSE 0 END) AS available "
         f"FROM sys.segments WHERE datasource = '{ds}' AND is_active = 1")
    deadline = time.monotonic() + timeout_s
    while True:
        row = sql(broker, q)[0]
        if row["active"] and row["active"] == row["available"]:
            return
        assert time.monotonic() < deadline, f"Druid's broker does not serve all of {ds}: {row}"
        time.sleep(0.5)


def install_spec(home: Path) -> None:
    d = home / "datasources"
    d.mkdir(exist_ok=True)
    shutil.copy(ADS_SPEC, d / "ads.yaml")


def sync_broker(srv: Any) -> None:
    """Make radstack's broker read the metadata store now (instead of at its next poll)."""
    srv.ctx.broker.refresh(force=True)


def load_into_radstack(srv: Any, tmp_path: Path, events: list[dict[str, Any]] | None = None,
                       interval: Interval = INTERVAL) -> None:
    events_dir = srv.settings.data_dir / "raw-events"  # where local inputs may come from by default
    write_events(events_dir, ads_events() if events is None else events)
    with OverlordClient(srv.url) as client:
        task_id = client.submit_task(raw_task("ads", events_dir, interval))
        st = client.wait_for_task(task_id, timeout_s=300, poll_s=0.5)
    assert st.ok
    sync_broker(srv)


# ---- tests ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_radctl_druid_submit_against_radstack_task_api(radstack_server: Any, tmp_path: Path) -> None:
    """`radctl druid specs` + `radctl druid submit --wait` with radstack itself as the Overlord: the
    generated re-index reads radstack's deep storage through `local`, which radstack's own task API
    refuses (#50: its own state is never an input); the same task through the `druid` input source
    replaces the interval with a new version and the answers stay the same."""
    from operations.cli import app

    install_spec(radstack_server.home)
    load_into_radstack(radstack_server, tmp_path)
    before = {q: sql(radstack_server.url, q) for q in sql_suite("ads")}
    old_versions = {s.version for s in radstack_server.ctx.metadata.segments("ads")}

    runner = CliRunner()
    env = {"RADSTACK_HOME": str(radstack_server.home)}
    res = runner.invoke(app, ["druid", "specs", "ads", "--interval", INTERVAL.iso(), "--only", "index_parallel"], env=env)
    assert res.exit_code == 0, res.output
    task = json.loads(res.stdout)
    assert task["spec"]["ioConfig"]["appendToExisting"] is False
    assert task["spec"]["ioConfig"]["inputFormat"]["type"] == "parquet"
    assert len(task["spec"]["ioConfig"]["inputSource"]["files"]) == 3  # one file per hourly segment

    res = runner.invoke(app, ["druid", "submit", "ads", "--overlord", radstack_server.url,
                              "--interval", INTERVAL.iso(), "--wait", "--timeout", "300"], env=env)
    assert res.exit_code != 0 and "403" in res.output and "'druid' input source" in res.output, res.output

    task["spec"]["ioConfig"]["inputSource"] = {"type": "druid", "dataSource": "ads", "interval": INTERVAL.iso()}
    task["spec"]["ioConfig"].pop("inputFormat")
    with OverlordClient(radstack_server.url, timeout=60) as overlord:
        status = overlord.wait_for_task(overlord.submit_task(task), timeout_s=300)
    assert status.ok, status

    new_segments = radstack_server.ctx.metadata.segments("ads")
    from radstack.storage.timeline import VersionedIntervalTimeline

    visible = VersionedIntervalTimeline.from_segments(new_segments).visible_segments(INTERVAL)
    assert visible and all(v.segment.version not in old_versions for v in visible)
    sync_broker(radstack_server)
    after = {q: sql(radstack_server.url, q) for q in sql_suite("ads")}
    for q in before:
        assert not same(before[q], after[q]), q


@pytest.mark.slow
@pytest.mark.druid
def test_druid_is_the_oracle(radstack_server: Any, local_druid: Any, tmp_path: Path) -> None:
    from operations.commands.druid import build_specs

    install_spec(radstack_server.home)
    load_into_radstack(radstack_server, tmp_path)

    # the spec radctl generates from radstack's visible (batch-layout) segment files
    specs = build_specs(radstack_server.settings, "ads", INTERVAL.iso())
    generated = specs["index_parallel"]
    files = generated["spec"]["ioConfig"]["inputSource"]["files"]
    assert len(files) == 3 and all(f.endswith("data.parquet") for f in files)
    json_files = parquet_to_json_lines(files, tmp_path / "as-json")
    spec = load_datasource_spec(ADS_SPEC)
    for_druid = index_parallel_spec(spec, INTERVAL, {"type": "local", "files": json_files},
                                    input_format={"type": "json"})
    # only the input differs from what radctl printed
    assert for_druid["spec"]["dataSchema"] == generated["spec"]["dataSchema"]
    assert {k: v for k, v in for_druid["spec"]["ioConfig"].items() if k not in ("inputSource", "inputFormat")} == \
        {k: v for k, v in generated["spec"]["ioConfig"].items() if k not in ("inputSource", "inputFormat")}

    raw_dir = tmp_path / "raw-events-druid"
    write_events(raw_dir, ads_events())
    with OverlordClient(local_druid.overlord_url) as druid:
        for task in (for_druid, raw_task("ads_raw", raw_dir)):
            task_id = druid.submit_task(task)
            st = druid.wait_for_task(task_id, timeout_s=300, poll_s=1.0)
            assert st.ok, st
        for ds in ("ads", "ads_raw"):
            druid.wait_for_load(ds, timeout_s=120)
            wait_broker_serves(local_druid.broker_url, ds)

    ours, theirs = radstack_server.url, local_druid.broker_url
    failures: list[str] = []
    for druid_table in ("ads", "ads_raw"):
        for q_ours, q_druid in zip(sql_suite("ads"), sql_suite(druid_table), strict=True):
            expected, got = sql(theirs, q_druid), sql(ours, q_ours)
            assert expected, f"Druid returned nothing for {q_druid}"
            if q_druid.endswith("ORDER BY __time"):  # a scan: rows with the same __time come in any order
                expected, got = sorted(expected, key=json.dumps), sorted(got, key=json.dumps)
            failures += [f"SQL {q_druid}: {d}" for d in same(expected, got)[:5]]
        # A scan ordered by a non-time column: Druid refuses to plan it, and so does radstack, with the
        # same status, category and message (serving/broker/sql/rules/scan_order.py).
        bad = SCAN_ORDER_BY_DIMS.format(t=f'"{druid_table}"')
        r_druid = httpx.post(f"{theirs}/druid/v2/sql", json={"query": bad}, timeout=60)
        r_ours = httpx.post(f"{ours}/druid/v2/sql", json={"query": SCAN_ORDER_BY_DIMS.format(t='"ads"')}, timeout=60)
        assert r_druid.status_code == 400 and r_druid.json()["category"] == "INVALID_INPUT", r_druid.text
        theirs_err, ours_err = r_druid.json(), r_ours.json()
        if (r_ours.status_code, ours_err.get("category"), ours_err.get("errorMessage")) != (
                400, "INVALID_INPUT", theirs_err.get("errorMessage")):
            failures.append(f"SQL {bad}: Druid 400 {theirs_err.get('errorMessage')!r}; "
                            f"radstack {r_ours.status_code} {ours_err.get('errorMessage')!r}")
        for q_ours, q_druid in zip(native_suite("ads"), native_suite(druid_table), strict=True):
            expected, got = native(theirs, q_druid), native(ours, q_ours)
            assert expected, f"Druid returned nothing for {q_druid}"
            failures += [f"native {q_druid['queryType']} on {druid_table}: {d}" for d in same(expected, got)[:5]]
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@pytest.mark.druid
def test_druid_accepts_the_generated_supervisor_spec(local_druid: Any) -> None:
    """Druid parses and starts the generated Kafka supervisor (its spec is checked by Druid's own
    Jackson model); no Kafka is needed for that — it points at a closed loopback port — and it is
    terminated again."""
    from operations.processes import free_port
    from radstack.druid_cluster.specs import kafka_supervisor_spec

    schema = {**load_datasource_spec(ADS_SPEC).data_schema.to_json(), "dataSource": "ads_stream"}
    spec = load_datasource_spec({"dataSchema": schema, "processing": {"topics": ["impressions"], "windowPeriod": "PT10M"}})
    sup = kafka_supervisor_spec(spec, bootstrap_servers=f"127.0.0.1:{free_port()}")
    with OverlordClient(local_druid.overlord_url) as druid:
        assert druid.submit_supervisor(sup) == "ads_stream"
        status = druid.supervisor_status("ads_stream")
        assert status["id"] == "ads_stream"
        payload = status["payload"]
        assert payload.get("stream", payload.get("topic")) == "ads_stream-processed", payload
        assert status["payload"]["dataSource"] == "ads_stream"
        r = httpx.post(f"{local_druid.overlord_url}/druid/indexer/v1/supervisor/ads_stream/terminate", timeout=60)
        assert r.status_code == 200, r.text


STREAM_SQL = [
    'SELECT SUM("count") AS events, SUM(price) AS revenue, MAX(max_price) AS top FROM {t}',
    'SELECT publisher, SUM("count") AS events, SUM(price) AS revenue FROM {t} GROUP BY publisher ORDER BY publisher',
    "SELECT TIME_FLOOR(__time, 'PT1M') AS m, SUM(\"count\") AS events FROM {t} GROUP BY 1 ORDER BY 1",
    'SELECT city, SUM("count") AS events, MAX(max_price) AS top FROM {t} GROUP BY city ORDER BY city',
]


@pytest.mark.slow
@pytest.mark.druid
def test_druid_supervisor_streams_the_processed_topic(
    radstack_server: Any, local_druid: Any, kafka_bootstrap: str, kafka_topic: str, tmp_path: Path
) -> None:
    """The generated supervisor on a real Kafka topic of processed rows (``__time`` millis): Druid's
    real-time answers equal radstack's for the same events (sums only — real-time rollup in Druid is
    per in-memory index, so row counts may differ)."""
    from confluent_kafka import Producer

    from radstack.druid_cluster.specs import kafka_supervisor_spec

    now = int(time.time() * 1000)
    window = Interval(now - 5 * 60_000, now - 1000)  # inside lateMessageRejectionPeriod (PT10M)
    events = ads_events(600, seed=11, interval=window)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    for ev in events:
        row = {k: v for k, v in ev.items() if k not in ("timestamp", "impression_id")}
        row["__time"] = parse_instant(ev["timestamp"])
        producer.produce(kafka_topic, json.dumps(row).encode())
    assert producer.flush(30) == 0

    schema = {**load_datasource_spec(ADS_SPEC).data_schema.to_json(), "dataSource": "ads_rt"}
    spec = load_datasource_spec({"dataSchema": schema,
                                 "processing": {"topics": ["impressions"], "processedTopic": kafka_topic}})
    sup = kafka_supervisor_spec(spec, bootstrap_servers=kafka_bootstrap, task_duration="PT10M")
    with OverlordClient(local_druid.overlord_url) as druid:
        assert druid.submit_supervisor(sup) == "ads_rt"
        try:
            deadline = time.monotonic() + 180
            while True:  # until Druid's real-time task has read every produced event
                with contextlib.suppress(AssertionError):
                    got = sql(local_druid.broker_url, 'SELECT SUM("count") AS n FROM "ads_rt"')
                    if got and got[0]["n"] == len(events):
                        break
                assert time.monotonic() < deadline, f"Druid's supervisor did not ingest {len(events)} events"
                time.sleep(1)
            chunks = chunk_interval(spec, window)
            load_into_radstack(radstack_server, tmp_path, events, chunks)
            failures: list[str] = []
            for q in STREAM_SQL:
                expected = sql(local_druid.broker_url, q.format(t='"ads_rt"'))
                got = sql(radstack_server.url, q.format(t='"ads"'))
                failures += [f"SQL {q}: {d}" for d in same(expected, got)[:5]]
            assert not failures, "\n".join(failures)
        finally:
            httpx.post(f"{local_druid.overlord_url}/druid/indexer/v1/supervisor/ads_rt/terminate", timeout=60)
