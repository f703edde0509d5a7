"""An idle streaming job is alive: the job rewrites its progress state (a heartbeat) while the query
is active, and ``radctl status`` reads health from that state's age."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from radstack.config import load_settings
from realtime.streaming import job as job_mod
from realtime.streaming.progress import streaming_health
from realtime.streaming.sink import progress_key

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ads" / "ads.yaml"


class _NoProgress:
    """The JVM side of a query that has reported nothing yet."""

    def recentProgress(self) -> list[Any]:  # noqa: N802 - the JVM method's name
        return []


class IdleQuery:
    """What an active query with no new micro-batches reports."""

    isActive = True
    _jsq = _NoProgress()


def _job(tmp_path: Path) -> Any:
    from radstack.spec import load_datasource_spec

    home = tmp_path / "home"
    (home / "datasources").mkdir(parents=True)
    (home / "datasources" / "ads.yaml").write_text(EXAMPLE.read_text())
    settings = load_settings(env={"RADSTACK_HOME": str(home)})
    spec = load_datasource_spec(yaml.safe_load(EXAMPLE.read_text()))
    opts = job_mod.stream_options(settings, bootstrap_servers="127.0.0.1:1")
    return settings, job_mod.StreamingJob(settings, spec, opts)


def test_an_idle_active_query_keeps_its_progress_fresh(tmp_path: Path, monkeypatch: Any) -> None:
    settings, job = _job(tmp_path)
    assert not streaming_health(settings)  # never reported
    job.query = IdleQuery()
    job.poll_progress()
    first = job.metadata.get_state(progress_key("ads"))["updated"]
    assert streaming_health(settings)
    # within the heartbeat nothing is rewritten; after it the state is rewritten without a new batch
    job.poll_progress()
    assert job.metadata.get_state(progress_key("ads"))["updated"] == first
    monkeypatch.setattr(job_mod, "HEARTBEAT_SECONDS", 0.0)
    import time

    time.sleep(0.002)
    job.poll_progress()
    assert job.metadata.get_state(progress_key("ads"))["updated"] > first
    assert streaming_health(settings)


def test_a_report_from_before_the_process_started_is_not_its_health(tmp_path: Path) -> None:
    """``radctl up`` right after ``down``: the previous process's last report is recent, but the new
    process has not reported yet — it is not "started" until it does (#51)."""
    from radstack.time.clock import now_millis

    settings, job = _job(tmp_path)
    job.query = IdleQuery()
    job.poll_progress()
    assert streaming_health(settings) and streaming_health(settings, since_ms=now_millis() - 60_000)
    assert not streaming_health(settings, since_ms=now_millis() + 1)  # started after the last report


def test_a_stopped_query_is_not_heartbeated(tmp_path: Path) -> None:
    settings, job = _job(tmp_path)
    stopped = IdleQuery()
    stopped.isActive = False
    job.query = stopped
    job.poll_progress()
    assert job.metadata.get_state(progress_key("ads")) is None
    assert not streaming_health(settings, max_age_seconds=60)


def test_rows_spark_drops_at_dedup_count_as_dropped_by_watermark() -> None:
    """Spark 4 filters rows behind the dedup watermark ahead of the state operator without always
    reporting them; the tracker finds them from the rows counted into and out of each dedup step
    (observed metrics), so a plan that reads a source twice (a stream join) counts them right too."""
    from realtime.streaming.progress import ProgressTracker

    def progress(batch: int, counts: dict[str, tuple[int, int]], dupes: int, reported: int) -> dict[str, Any]:
        observed: dict[str, Any] = {"someone_elses": {"rows": 99}}
        for name, (entered, passed) in counts.items():
            observed[f"radstack_entered_{name}"] = {"rows": entered}
            observed[f"radstack_passed_{name}"] = {"rows": passed}
        return {"runId": "r", "batchId": batch, "numInputRows": 10**6, "durationMs": {"addBatch": 5},
                "observedMetrics": observed,
                "stateOperators": [{"numRowsDroppedByWatermark": reported,
                                    "customMetrics": {"numDroppedDuplicateRows": dupes}}]}

    t = ProgressTracker()
    assert t.update([progress(0, {"input": (100, 95)}, 5, 0), progress(1, {"input": (50, 10)}, 0, 10)])
    assert t.totals == {"duplicatesDropped": 5, "droppedByWatermark": 40}  # batch 1: 10 reported + 30 not
    # a stream join: the impressions' and the clicks' dedup steps add up
    t2 = ProgressTracker()
    t2.update([progress(2, {"input": (40, 30), "join_clicks": (20, 12)}, 6, 4)])
    assert t2.totals == {"duplicatesDropped": 6, "droppedByWatermark": 60 - 42 - 6}
    # without counted steps only what Spark reports
    t3 = ProgressTracker()
    t3.update([{**progress(3, {}, 0, 10), "observedMetrics": {}}])
    assert t3.totals["droppedByWatermark"] == 10
    # a batch seen again is not counted twice
    assert not t.update([progress(1, {"input": (50, 10)}, 0, 10)])


def test_an_idle_trigger_does_not_hide_the_next_batch() -> None:
    """Spark's idle progress events carry the id of the batch that has not run yet (and no addBatch);
    the real batch with that id must still be counted."""
    from realtime.streaming.progress import ProgressTracker

    idle = {"runId": "r", "batchId": 7, "numInputRows": 0, "timestamp": "t1",
            "durationMs": {"latestOffset": 1, "triggerExecution": 1},
            "stateOperators": [{"numRowsDroppedByWatermark": 3, "customMetrics": {"numDroppedDuplicateRows": 4}}]}
    real = {"runId": "r", "batchId": 7, "numInputRows": 100, "timestamp": "t2", "durationMs": {"addBatch": 9},
            "observedMetrics": {"radstack_entered_input": {"rows": 100}, "radstack_passed_input": {"rows": 0}},
            "stateOperators": [{"numRowsDroppedByWatermark": 0, "customMetrics": {"numDroppedDuplicateRows": 2}}]}
    t = ProgressTracker()
    assert t.update([idle])  # the rates/lag are updated ...
    assert t.totals == {"duplicatesDropped": 0, "droppedByWatermark": 0}  # ... nothing is counted
    assert t.update([idle, real])
    assert t.totals == {"duplicatesDropped": 2, "droppedByWatermark": 98}
    assert t.latest is real


def test_only_new_progress_events_are_read_from_the_jvm() -> None:
    """The job reads Spark's progress events back from the newest to the first one it has seen, one
    JSON string each, instead of PySpark's ``recentProgress`` (which converts all 100 retained events
    over py4j on every poll)."""
    import json

    from realtime.streaming.progress import ProgressTracker, new_progress

    class JProgress:
        def __init__(self, p: dict[str, Any], reads: list[int]) -> None:
            self.p, self.reads = p, reads

        def json(self) -> str:
            self.reads.append(self.p["batchId"])
            return json.dumps(self.p)

    reads: list[int] = []
    events = [JProgress({"runId": "r", "batchId": b, "durationMs": {"addBatch": 1}}, reads) for b in range(100)]

    class JQuery:
        def recentProgress(self) -> list[JProgress]:  # noqa: N802 - the JVM method's name
            return events

    class Query:
        _jsq = JQuery()

    t = ProgressTracker()
    first = new_progress(Query(), t)
    assert [p["batchId"] for p in first] == list(range(100))  # oldest first
    t.update(first)
    reads.clear()
    events.append(JProgress({"runId": "r", "batchId": 100, "durationMs": {"addBatch": 1}}, reads))
    events.append(JProgress({"runId": "r", "batchId": 101, "timestamp": "t", "durationMs": {}}, reads))  # idle
    del events[:2]  # Spark keeps the newest 100
    new = new_progress(Query(), t)
    assert [p["batchId"] for p in new] == [100, 101]
    assert reads == [101, 100, 99]  # stopped at the first event already seen
    assert t.update(new) and not new_progress(Query(), t)


def test_the_streaming_job_passes_its_java_options_to_spark(tmp_path: Path, monkeypatch: Any) -> None:
    """``streaming.java_options`` reaches the streaming job's Spark session, after radstack's own
    options."""
    from radstack.pipeline.spark_session import jvm_options

    log_conf = tmp_path / "log4j2.properties"
    assert jvm_options(log_conf) == (f"-Dlog4j2.configurationFile=file:{log_conf} "
                                     f"-Dlog4j.configurationFile=file:{log_conf}")
    assert jvm_options(log_conf, "  -XX:TieredStopAtLevel=1 ").endswith(f"file:{log_conf} -XX:TieredStopAtLevel=1")

    from radstack.spec import load_datasource_spec

    settings = load_settings(env={"RADSTACK_HOME": str(tmp_path / "home")},
                             overrides={"streaming": {"java_options": "-XX:TieredStopAtLevel=1"}})
    spec = load_datasource_spec(yaml.safe_load(EXAMPLE.read_text()))
    job = job_mod.StreamingJob(settings, spec, job_mod.stream_options(settings, bootstrap_servers="127.0.0.1:1"))
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(job_mod, "build_spark_session", lambda *a, **kw: calls.append(kw) or "spark")
    assert job.spark == "spark"
    assert calls[0]["java_options"] == "-XX:TieredStopAtLevel=1"
