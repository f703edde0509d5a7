"""The whole Lambda loop with a real Apache Druid 33 serving too (``make test-druid``; docs/druid-cluster.md).

radstack's settings name the local Druid (``druid:``) and the datasource it serves; nothing else is done by
hand. The server's ``druid_sync`` duty posts Druid's Kafka supervisor on the processed topic; the ``ads``
workload (duplicates re-sent, late events) streams through radstack's streaming job into that topic, and
Druid's real-time answer undercounts (the late events are missing). A rebuild through the Airflow DAG
(``dag.test()`` of the real DAG: wait → rebuild → druid → verify) re-indexes the chunks in Druid: Druid's
answer equals the generator's truth, its own timeline has the batch version over its real-time segments,
and ``sys.corrections`` has the correction measured against Druid's answer. A rebuild from ``radctl
backfill`` and one from the task API reach Druid too. Then Druid's historical is killed during a re-index
and restarted: the re-index finishes, with no event lost or counted twice in Druid's answer.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from radstack.time.intervals import Interval, format_instant, parse_instant
from tests.fixtures.airflow import REPO, airflow_environment, run_dag_test
from tests.fixtures.server import running_server
from tests.integration.test_druid_cluster import ADS_SPEC, ads_events

pytestmark = [pytest.mark.slow, pytest.mark.druid]

DS = "ads_loop"


def _druid_events(druid: Any, interval: Interval) -> dict[str, int]:
    """Druid's answer per hour: the sum of the count metric (rows are rolled up)."""
    q = {"queryType": "timeseries", "dataSource": DS, "intervals": [interval.iso()], "granularity": "hour",
         "aggregations": [{"type": "longSum", "name": "n", "fieldName": "count"}],
         "context": {"skipEmptyBuckets": True, "useCache": False, "populateCache": False}}
    with contextlib.suppress(Exception):
        return {r["timestamp"]: int(r["result"]["n"]) for r in druid.native(q)}
    return {}


def _truth(events: list[dict[str, Any]], interval: Interval) -> dict[str, int]:
    out: dict[str, int] = {}
    seen: set[str] = set()
    for e in events:
        if e["impression_id"] in seen:
            continue
        seen.add(e["impression_id"])
        hour = parse_instant(e["timestamp"]) // 3_600_000 * 3_600_000
        if interval.contains_instant(hour):
            key = format_instant(hour)
            out[key] = out.get(key, 0) + 1
    return out


def _wait(what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1)


def _used_segments(druid: Any) -> list[dict[str, Any]]:
    r = httpx.get(f"{druid.coordinator_url}/druid/coordinator/v1/metadata/datasources/{DS}/segments?full", timeout=30)
    return list(r.json()) if r.status_code == 200 else []


def _newest_version(druid: Any) -> str:
    return max((str(s["version"]) for s in _used_segments(druid)), default="")


def _radctl(home: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env.update(RADSTACK_HOME=str(home), RADSTACK_SPARK__SHUFFLE_PARTITIONS="2", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "operations", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def test_the_lambda_loop_on_druid(
    radstack_home: Path, local_druid: Any, kafka_bootstrap: str, kafka_topic: str, stream_spark: Any, tmp_path: Path,
) -> None:  # fmt: skip
    from confluent_kafka import Producer

    from radstack.datasources import get_spec
    from radstack.storage.deep_storage import open_deep_storage
    from realtime.archiver import Archiver, ArchiverConfig
    from realtime.streaming.job import StreamingJob, stream_options
    from realtime.topics import ensure_topics

    druid = local_druid
    processed = f"{kafka_topic}-processed"
    ensure_topics(kafka_bootstrap, {processed: 2})
    config = {
        "kafka": {"embedded": False, "bootstrap_servers": kafka_bootstrap},
        "coordinator": {"period_seconds": 1, "metadata_poll_seconds": 0.2},
        "druid": {"overlord_url": druid.overlord_url, "coordinator_url": druid.coordinator_url,
                  "broker_url": druid.broker_url, "datasources": [DS], "sync_period_seconds": 1,
                  "supervisor_task_duration": "PT1M", "reindex_timeout_seconds": 600},
    }
    (radstack_home / "radstack.yaml").write_text(yaml.safe_dump(config))
    raw = yaml.safe_load(ADS_SPEC.read_text())
    raw["dataSchema"]["dataSource"] = DS
    raw["processing"].update(topics=[kafka_topic], processedTopic=processed)
    (radstack_home / "datasources").mkdir(exist_ok=True)
    (radstack_home / "datasources" / f"{DS}.yaml").write_text(yaml.safe_dump(raw))

    # -- the workload: on-time events, re-sent duplicates, and late events behind the watermark ------------
    now = int(time.time() * 1000)
    on_time = ads_events(600, seed=31, interval=Interval(now - 5 * 60_000, now - 1000))
    late = [dict(e, impression_id=f"late-{i}")
            for i, e in enumerate(ads_events(40, seed=32, interval=Interval(now - 40 * 60_000, now - 30 * 60_000)))]
    sent = on_time + on_time[:60] + late
    hours = Interval(now // 3_600_000 * 3_600_000 - 3_600_000, (now // 3_600_000 + 1) * 3_600_000)
    truth = _truth(sent, hours)
    counts: dict[str, Any] = {"produced": len(sent), "unique": sum(truth.values())}

    with running_server(radstack_home) as srv:
        settings = srv.settings
        assert settings.druid.serves(DS)
        spec = get_spec(settings, DS)
        md = srv.ctx.metadata
        # the server's druid_sync duty posts Druid's supervisor: no hand step
        _wait("Druid's supervisor", lambda: httpx.get(f"{druid.overlord_url}/druid/indexer/v1/supervisor/{DS}",
                                                       timeout=10).status_code == 200, 60)
        producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
        for e in sent:  # the late ones arrive last: behind the watermark the others set
            producer.produce(kafka_topic, orjson.dumps(e))
        assert producer.flush(30) == 0
        opts = stream_options(settings, bootstrap_servers=kafka_bootstrap, available_now=True, handoff=False,
                              max_offsets_per_trigger=200)
        StreamingJob(settings, spec, opts, spark=stream_spark, metadata=md).run(timeout=300)

        # -- Druid's real-time answer: what the stream kept, the late events missing -------------------------
        realtime = _wait("Druid's real-time answer", lambda: (
            (a := _druid_events(druid, hours)) and sum(a.values()) == len(on_time) and a), 240)
        counts["accepted"] = counts["druid_realtime"] = sum(realtime.values())
        assert counts["druid_realtime"] < counts["unique"]
        # its real-time segments are handed off (published) before the rebuild, as the schedule delay makes
        # sure in production: a Kafka task holding the chunks' lock would keep the re-index waiting
        _wait("Druid's handoff", lambda: _used_segments(druid), 240)
        rt_versions = {str(s["version"]) for s in _used_segments(druid)}

        Archiver(ArchiverConfig(bootstrap_servers=kafka_bootstrap, topics=[kafka_topic], group_id=f"arch-{kafka_topic}",
                                max_age_seconds=1.0, timestamp_fields={kafka_topic: ("timestamp", "iso")}),
                 open_deep_storage(settings), md).run(idle_exit_seconds=5)  # fmt: skip

        # -- the rebuild through the Airflow DAG: rebuild → druid → verify ----------------------------------
        airflow_env = airflow_environment(radstack_home, tmp_path / "airflow")
        res = run_dag_test(airflow_env, f"radstack_rebuild_{DS}", {"interval": hours.iso(), "force": True})
        assert res["state"] == "success", res["output"]
        assert res["tasks"] == {"wait_for_archive": "success", "rebuild": "success", "druid": "success",
                                "verify": "success"}, res
        after = _druid_events(druid, hours)
        counts["druid_after_rebuild"] = sum(after.values())
        assert after == truth, (after, truth)
        # Druid's own timeline: a new version over every chunk, newer than its real-time segments, which are
        # overshadowed (still listed until Druid's coordinator marks them unused, then gone)
        newest: dict[str, str] = {}
        for seg in _used_segments(druid):
            if Interval.parse(seg["interval"]).overlaps(hours):
                newest[seg["interval"]] = max(newest.get(seg["interval"], ""), str(seg["version"]))
        assert newest and all(v > max(rt_versions) for v in newest.values()), (newest, rt_versions)
        batch_version = max(newest.values())
        rows = druid.sql(f"SELECT version, is_active, is_overshadowed FROM sys.segments WHERE datasource = '{DS}'")
        assert {r["version"] for r in rows if r["is_active"]} == set(newest.values()), rows
        assert all(r["is_overshadowed"] for r in rows if r["version"] in rt_versions), rows
        # the correction, measured against Druid's real-time answer
        fixes = [c for c in md.corrections(DS) if c.served_by == "druid"]
        assert sum(c.realtime_events for c in fixes) == counts["druid_realtime"]
        assert sum(c.batch_events for c in fixes) == counts["unique"]
        sql = httpx.post(srv.url + "/druid/v2/sql", json={
            "query": "SELECT served_by, SUM(realtime_events) AS rt, SUM(batch_events) AS b FROM sys.corrections "
                     f"WHERE datasource = '{DS}' GROUP BY 1 ORDER BY 1"}, timeout=30).json()
        assert {"served_by": "druid", "rt": counts["druid_realtime"], "b": counts["unique"]} in sql, sql

        # -- a rebuild from the CLI reaches Druid -------------------------------------------------------------
        proc = _radctl(radstack_home, "backfill", "--via", "local", "--force", "--no-wait", "--datasource", DS,
                       "--interval", hours.iso())
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "Druid serves version" in proc.stderr, proc.stderr[-3000:]
        cli_version = _newest_version(druid)
        assert cli_version > batch_version and _druid_events(druid, hours) == truth

        # -- a rebuild from the task API reaches Druid --------------------------------------------------------
        schema = spec.data_schema.to_json()
        schema["granularitySpec"]["intervals"] = [hours.iso()]
        task = {"type": "index_parallel", "spec": {
            "dataSchema": schema,
            "ioConfig": {"type": "index_parallel", "appendToExisting": False,
                         "inputSource": {"type": "archive", "topics": [kafka_topic], "eventId": "impression_id"},
                         "inputFormat": {"type": "json"}},
            "tuningConfig": {"type": "index_parallel"}}}
        r = httpx.post(srv.url + "/druid/indexer/v1/task", json=task, timeout=30)
        assert r.status_code == 200, r.text
        tid = r.json()["task"]
        status = _wait("the task", lambda: (st := httpx.get(f"{srv.url}/druid/indexer/v1/task/{tid}/status",
                                                             timeout=30).json()["status"])["status"] != "RUNNING" and st, 900)
        assert status["status"] == "SUCCESS", status
        api_version = _newest_version(druid)
        assert api_version > cli_version and _druid_events(druid, hours) == truth
        # each path's re-index is a task of its own (sys.tasks, the console), named after who started it
        started = {str(t.payload.get("startedBy")).split(" ")[0] for t in md.list_tasks(datasource=DS)
                   if t.type == "druid_reindex" and t.status == "SUCCESS"}
        assert {"airflow", "radctl", "overlord"} <= started, started

        # -- Druid's historical killed during a re-index, restarted: the loop finishes, nothing lost or doubled -
        done: dict[str, Any] = {}

        def second() -> None:
            done["proc"] = _radctl(radstack_home, "druid", "reindex", DS, "--interval", hours.iso())

        # a new radstack version first, without Druid (so the re-index below has new work to do)
        proc = _radctl(radstack_home, "backfill", "--via", "local", "--force", "--no-wait", "--no-druid",
                       "--datasource", DS, "--interval", hours.iso())
        assert proc.returncode == 0, proc.stderr[-3000:]
        worker = threading.Thread(target=second)
        worker.start()
        _wait("the re-index task", lambda: any(
            t.get("dataSource") == DS for t in httpx.get(f"{druid.overlord_url}/druid/indexer/v1/tasks",
                                                         params={"state": "running"}, timeout=30).json()), 300)
        druid.kill_service("historical")
        time.sleep(10)
        druid.restart_service("historical")
        worker.join(900)
        proc = done["proc"]
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        final = _wait("Druid's answer", lambda: _druid_events(druid, hours), 120)  # its broker reconnects first
        counts["truth"] = sum(truth.values())
        counts["druid_after_historical_restart"] = sum(final.values())
        counts["lost"] = sum(max(truth[h] - final.get(h, 0), 0) for h in truth)
        counts["duplicated"] = sum(max(final.get(h, 0) - truth.get(h, 0), 0) for h in final)
        print("druid lambda loop:", orjson.dumps(counts).decode())
        assert counts["lost"] == 0 and counts["duplicated"] == 0, (final, truth)

        # -- retention and compaction set in radstack reach Druid's coordinator (the druid_sync duty) ---------
        rules = [{"type": "loadByPeriod", "period": "P30D", "includeFuture": True,
                  "tieredReplicants": {"_default_tier": 1}}, {"type": "dropForever"}]
        assert httpx.post(f"{srv.url}/druid/coordinator/v1/rules/{DS}", json=rules, timeout=30).status_code == 200
        compaction = {"dataSource": DS, "skipOffsetFromLatest": "P1D",  # nothing this recent is compacted
                      "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour"}}
        r = httpx.post(f"{srv.url}/druid/coordinator/v1/config/compaction", json=compaction, timeout=30)
        assert r.status_code == 200, r.text
        _wait("Druid's rules", lambda: [x.get("type") for x in httpx.get(
            f"{druid.coordinator_url}/druid/coordinator/v1/rules/{DS}", timeout=30).json()] == ["loadByPeriod", "dropForever"], 60)
        pushed = _wait("Druid's compaction config", lambda: (c := httpx.get(
            f"{druid.coordinator_url}/druid/coordinator/v1/config/compaction/{DS}", timeout=30)).status_code == 200 and c.json(), 60)
        assert pushed["skipOffsetFromLatest"] == "P1D" and pushed["granularitySpec"]["segmentGranularity"] == "DAY", pushed
        # the datasource spec changes: Druid's supervisor is updated; the spec goes: the supervisor is terminated
        def druid_dimensions() -> list[str]:
            r = httpx.get(f"{druid.overlord_url}/druid/indexer/v1/supervisor/{DS}", timeout=30)
            dims = r.json()["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"] if r.status_code == 200 else []
            return [d if isinstance(d, str) else d["name"] for d in dims]

        raw["dataSchema"]["dimensionsSpec"]["dimensions"].append("device")
        (radstack_home / "datasources" / f"{DS}.yaml").write_text(yaml.safe_dump(raw))
        _wait("the supervisor's update", lambda: "device" in druid_dimensions(), 60)
        (radstack_home / "datasources" / f"{DS}.yaml").unlink()
        _wait("the supervisor's end", lambda: httpx.get(f"{druid.overlord_url}/druid/indexer/v1/supervisor/{DS}",
                                                        timeout=30).status_code == 404, 60)
        # status shows Druid's side
        view = httpx.get(f"{srv.url}/radstack/v1/druid", timeout=60).json()
        side = view["datasources"][DS]
        assert side["supervisor"]["state"] == "MISSING" and side["pendingReindex"] == [], side
        assert side["lastCorrection"]["batchEvents"] > 0 and side["loadPercent"] == 100.0, side
