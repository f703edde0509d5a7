"""Planning a rebuild: chunks, closedness against windowPeriod and the archiver watermark, tombstones,
in-flight job cleanup, the spark-submit command, and backfill input errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from batch.planning import BackfillPlanError, NotClosedError, check_closed, parse_interval, plan_chunks
from radstack.config import DeepStorageSettings
from radstack.time.granularity import Granularity
from radstack.time.intervals import Interval, Period, parse_instant

DAY = 86_400_000
HOUR = 3_600_000


def test_parse_interval_forms() -> None:
    assert parse_interval("2026-11-20/P1D") == Interval(parse_instant("2026-11-20"), parse_instant("2026-11-21"))
    assert parse_interval("2026-11-20T00:00:00Z/2026-11-20T06:00:00Z").duration_ms == 6 * HOUR
    assert parse_interval("P1D/2026-11-21").start == parse_instant("2026-11-20")
    for bad in ("2026-11-20", "yesterday/today", "2026-11-21/2026-11-20", ""):
        with pytest.raises(BackfillPlanError):
            parse_interval(bad)


def test_plan_chunks_widens_to_whole_buckets() -> None:
    iv = Interval(parse_instant("2026-11-20T05:30:00Z"), parse_instant("2026-11-20T08:10:00Z"))
    chunks = plan_chunks(iv, Granularity.parse("hour"))
    assert [c.iso() for c in chunks] == [
        "2026-11-20T05:00:00.000Z/2026-11-20T06:00:00.000Z",
        "2026-11-20T06:00:00.000Z/2026-11-20T07:00:00.000Z",
        "2026-11-20T07:00:00.000Z/2026-11-20T08:00:00.000Z",
        "2026-11-20T08:00:00.000Z/2026-11-20T09:00:00.000Z",
    ]
    days = plan_chunks(parse_interval("2026-11-20/P3D"), Granularity.parse("day"))
    assert len(days) == 3 and all(c.duration_ms == DAY for c in days)
    with pytest.raises(BackfillPlanError):
        plan_chunks(iv, Granularity.parse("all"))


def test_check_closed_window_and_watermark() -> None:
    chunk = parse_interval("2026-11-20/P1D")
    wp = Period.parse("PT10M")
    needed = chunk.end + 10 * 60_000
    # end + windowPeriod still in the future
    c = check_closed(chunk, wp, {"t": needed + 1}, now_ms=needed - 1)
    assert not c.closed and "in the future" in c.reason
    # watermark behind end + windowPeriod: the message names the topic and the watermark
    c = check_closed(chunk, wp, {"t": needed - 60_000, "u": needed + 5}, now_ms=needed + DAY)
    assert not c.closed
    assert "'t'" in c.reason and "2026-11-21T00:09:00.000Z" in c.reason and "'u'" not in c.reason
    # never archived
    c = check_closed(chunk, wp, {"t": None}, now_ms=needed + DAY)
    assert not c.closed and "no archiver watermark" in c.reason
    # closed
    c = check_closed(chunk, wp, {"t": needed, "u": needed + 1}, now_ms=needed)
    assert c.closed
    err = NotClosedError([check_closed(chunk, wp, {"t": 0}, now_ms=needed + DAY)])
    assert "--force" in str(err) and "1970-01-01T00:00:00.000Z" in str(err)
    # a day of minute chunks not closed is four lines, not 1,440: the first two, a count, the last
    minutes = plan_chunks(parse_interval("2026-11-20/P1D"), Granularity.parse("minute"))
    err = NotClosedError([check_closed(c, wp, {"t": 0}, now_ms=needed + DAY) for c in minutes])
    assert len(err.checks) == 1440 and str(err).count("\n") == 4 and "1,437 more chunk(s) not closed" in str(err)
    assert minutes[-1].iso() in str(err)


def test_tombstones_fill_empty_chunks() -> None:
    from batch.tombstones import with_tombstones
    from radstack.storage.segments import DataSegment, ShardSpec

    chunks = plan_chunks(parse_interval("2026-11-20T00/PT3H"), Granularity.parse("hour"))
    seg = DataSegment("web", chunks[1], "v2", {"type": "local", "path": "/x"}, shard_spec=ShardSpec("numbered", 0, 1))
    out = with_tombstones("web", chunks, [seg], "v2", metrics=("count",))
    tomb = [s for s in out if s.is_tombstone]
    assert [t.interval for t in tomb] == [chunks[0], chunks[2]]
    assert tomb[0].load_spec == {"type": "tombstone"}
    assert tomb[0].shard_spec.to_json() == {"type": "tombstone", "partitionNum": 0, "partitions": 1}
    assert tomb[0].version == "v2" and tomb[0].num_rows == 0


def test_adjacent_empty_chunks_share_a_tombstone_within_a_day() -> None:
    from batch.tombstones import coalesce, with_tombstones
    from radstack.storage.segments import DataSegment, ShardSpec

    minutes = plan_chunks(parse_interval("2026-11-20T00:00/P1D"), Granularity.parse("minute"))
    busy = [minutes[5], minutes[6], minutes[700]]
    segs = [DataSegment("web", m, "v2", {"type": "local", "path": "/x"}, shard_spec=ShardSpec("numbered", 0, 1))
            for m in busy]
    tomb = [s.interval for s in with_tombstones("web", minutes, segs, "v2") if s.is_tombstone]
    assert tomb == [Interval(minutes[0].start, minutes[5].start), Interval(minutes[7].start, minutes[700].start),
                    Interval(minutes[701].start, minutes[-1].end)]  # 3 tombstones, not 1,437
    # every empty minute is covered exactly once, no busy one is
    covered = [m for m in minutes if any(t.contains(m) for t in tomb)]
    assert len(covered) == 1437 and not any(t.overlaps(b) for t in tomb for b in busy)
    # never across midnight
    hours = plan_chunks(parse_interval("2026-11-20T20/PT8H"), Granularity.parse("hour"))
    assert [iv.iso() for iv in coalesce(hours)] == ["2026-11-20T20:00:00.000Z/2026-11-21T00:00:00.000Z",
                                                    "2026-11-21T00:00:00.000Z/2026-11-21T04:00:00.000Z"]


def test_tombstone_overshadows_realtime(tmp_path: Path) -> None:
    from batch.tombstones import tombstone
    from radstack.storage.segments import DataSegment, ShardSpec
    from radstack.storage.timeline import VersionedIntervalTimeline

    chunk = parse_interval("2026-11-20T00/PT1H")
    rt = DataSegment("web", chunk, "2026-11-20T00:00:00.000Z", {"type": "local", "path": "/x"},
                     shard_spec=ShardSpec("numbered", 0, 0))  # fmt: skip
    tl = VersionedIntervalTimeline.from_segments([rt, tombstone("web", chunk, "2026-11-22T00:00:00.000Z")])
    assert tl.is_overshadowed(rt)
    assert tl.visible_segments(chunk) == []


def test_clean_dead_jobs(tmp_path: Path) -> None:
    from batch import job_state
    from radstack.storage.deep_storage.local import LocalDeepStorage
    from radstack.storage.metadata import MetadataStore
    from radstack.storage.segments import DataSegment, ShardSpec

    md = MetadataStore.from_url(f"sqlite:///{tmp_path / 'm.db'}")
    md.create_tables()
    ds = LocalDeepStorage(tmp_path / "deep")
    chunks = plan_chunks(parse_interval("2026-11-20T00/PT2H"), Granularity.parse("hour"))
    dead, published = "2026-11-21T00:00:00.000Z", "2026-11-21T01:00:00.000Z"
    for v in (dead, published):
        for p in job_state.version_prefixes("web", chunks, v):
            ds.put_bytes(b"x", p + "0/data.parquet")
    md.publish([DataSegment("web", c, published, {"type": "local", "path": "/x"}, shard_spec=ShardSpec("numbered", 0, 1))
                for c in chunks])  # fmt: skip
    job_state.register(md, "web", dead, chunks)
    job_state.register(md, "web", published, chunks)
    # a record of this very process counts as dead (an earlier call failed without cleaning up)
    deleted = job_state.clean_dead_jobs(md, ds, "web")
    assert sorted(deleted) == sorted(job_state.version_prefixes("web", chunks, dead))
    assert ds.list("segments/") and all(published.replace(":", "_") in k for k in ds.list("segments/"))
    assert md.get_state(job_state.inflight_key("web")) == {"jobs": []}
    # a live run elsewhere is left alone until it is stale
    job_state._save(md, "web", [job_state.InflightJob("v9", (chunks[0].iso(),), 1, "another-host", 10**13)])
    assert job_state.clean_dead_jobs(md, ds, "web", now_ms=10**13 + 1000) == []
    assert len(md.get_state(job_state.inflight_key("web"))["jobs"]) == 1
    md.close()


def test_spark_submit_command(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from batch.spark_submit import build_package, is_cluster_master, spark_submit_command

    assert not is_cluster_master("local[*]") and not is_cluster_master("local")
    assert is_cluster_master("spark://h:7077") and is_cluster_master("yarn")
    s = settings.with_overrides({"spark": {"master": "spark://10.0.0.1:7077", "conf": {"spark.executor.memory": "4g"}},
                                 "deep_storage": {"type": "hdfs", "namenode_url": "http://nn:9870",
                                                  "hdfs_fs_url": "hdfs://nn:8020", "path": "/r"}})  # fmt: skip
    pkg = build_package(tmp_path)
    cmd = spark_submit_command(s, "web", "2026-11-20/P1D", force=True, py_files=str(pkg))
    assert cmd[:3] == ["spark-submit", "--master", "spark://10.0.0.1:7077"]
    assert cmd[cmd.index("--py-files") + 1] == str(pkg)
    assert "spark.hadoop.fs.defaultFS=hdfs://nn:8020" in cmd and "spark.executor.memory=4g" in cmd
    assert cmd[-6:] == ["--datasource", "web", "--interval", "2026-11-20/P1D", "--force"][-6:] or cmd[-1] == "--force"
    app = cmd.index(next(c for c in cmd if c.endswith("batch/rebuild_job.py")))
    assert cmd[app + 1 :] == ["--datasource", "web", "--interval", "2026-11-20/P1D", "--force"]
    import zipfile

    names = zipfile.ZipFile(pkg).namelist()
    assert "batch/rebuild_job.py" in names and "radstack/storage/indexer.py" in names and "radstack/spec/__init__.py" in names and "radstack/time/floor.py" in names


def test_radctl_submit_command(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Any radctl command as a spark-submit application; the streaming job gets the Kafka connector."""
    from batch.spark_submit import build_package, radctl_submit_command
    from radstack.jvm import jars

    s = settings.with_overrides({"spark": {"master": "spark://10.0.0.1:7077"}})
    pkg = str(build_package(tmp_path))
    stream = radctl_submit_command(s, ["stream", "-d", "ads"], py_files=pkg)
    assert stream[:3] == ["spark-submit", "--master", "spark://10.0.0.1:7077"]
    assert stream[stream.index("--deploy-mode") + 1] == "client" and stream[stream.index("--py-files") + 1] == pkg
    app = next(i for i, c in enumerate(stream) if c.endswith("deploy/spark/radctl_app.py"))
    assert stream[app + 1 :] == ["stream", "-d", "ads"]
    shipped = stream[stream.index("--jars") + 1].split(",")
    assert {str(j) for j in jars("spark-kafka")} <= set(shipped)
    compact = radctl_submit_command(s, ["compact", "-d", "ads", "--runner", "spark"], py_files=pkg)
    assert "--jars" not in compact and compact[-5:] == ["compact", "-d", "ads", "--runner", "spark"]
    with pytest.raises(ValueError):
        radctl_submit_command(s, [], py_files=pkg)


def test_s3_storage_conf() -> None:
    from batch.storage_conf import storage_spark_conf

    conf = storage_spark_conf(DeepStorageSettings(type="s3", bucket="b", endpoint_url="http://127.0.0.1:5000"))
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:5000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert "hadoop-aws-3.4.1.jar" in conf["spark.jars"] and "bundle-" in conf["spark.jars"]
    assert storage_spark_conf(DeepStorageSettings(type="local", path="/x")) == {}


def test_archive_paths_lists_existing_hours(tmp_path: Path) -> None:
    from batch.archive_reader import archive_paths
    from radstack.storage.deep_storage.local import LocalDeepStorage
    from radstack.storage.raw_archive import data_key

    ds = LocalDeepStorage(tmp_path / "deep")
    h = parse_instant("2026-11-20T23:00:00Z")
    for hour in (h - HOUR, h, h + HOUR, h + 2 * HOUR):
        ds.put_bytes(b"x", data_key("web", 0, 0, 9, hour))
    paths = archive_paths(ds, "web", Interval(h, h + 2 * HOUR))
    assert paths == [
        "file://" + str(tmp_path / "deep" / "raw/web/dt=2026-11-20/hour=23"),
        "file://" + str(tmp_path / "deep" / "raw/web/dt=2026-11-21/hour=00"),
    ]
    assert archive_paths(ds, "other", Interval(h, h + HOUR)) == []


def test_archived_records_bound_and_the_quick_jit_choice(tmp_path: Path) -> None:
    """The records a rebuild may read, from the file names alone (a flush spread over two hours names
    its whole range in both); a rebuild at most ``batch.quick_jit_max_records`` gets the C1 JIT only."""
    from batch.archive_reader import archived_records_at_most
    from batch.rebuild_job import _small_job
    from radstack.config import load_settings
    from radstack.datasources import get_spec
    from radstack.storage.deep_storage.local import LocalDeepStorage
    from radstack.storage.raw_archive import data_key

    ds = LocalDeepStorage(tmp_path / "deep")
    h = parse_instant("2026-11-20T10:00:00Z")
    ds.put_bytes(b"x", data_key("web", 0, 0, 99, h))  # 100 records
    ds.put_bytes(b"x", data_key("web", 1, 50, 249, h))  # 200, spread over this hour …
    ds.put_bytes(b"x", data_key("web", 1, 50, 249, h + HOUR))  # … and the next
    ds.put_bytes(b"x", data_key("web", 0, 100, 109, h - HOUR))  # an hour not asked for
    ds.put_bytes(b"not a data file", "raw/web/dt=2026-11-20/hour=10/_manifest.json")
    assert archived_records_at_most(ds, {"web": Interval(h, h + HOUR)}) == 300
    assert archived_records_at_most(ds, {"web": Interval(h, h + 2 * HOUR)}) == 500
    assert archived_records_at_most(ds, {"web": Interval(h, h + HOUR), "other": Interval(h, h + HOUR)}) == 300

    settings = load_settings(env={"RADSTACK_HOME": str(tmp_path / "home")})
    _write_spec(settings)
    spec = get_spec(settings, "web")
    hour = [Interval(h, h + HOUR)]
    for limit, small in ((300, True), (299, False), (0, False)):
        s2 = settings.model_copy(update={"batch": settings.batch.model_copy(update={"quick_jit_max_records": limit})})
        assert _small_job(s2, ds, spec, hour) is small, limit


def _write_spec(settings) -> None:  # type: ignore[no-untyped-def]
    d = settings.datasources_dir
    d.mkdir(parents=True, exist_ok=True)
    (d / "web.yaml").write_text(
        "dataSchema:\n  dataSource: web\n  timestampSpec: {column: timestamp, format: iso}\n"
        "  dimensionsSpec: {dimensions: [page]}\n  metricsSpec: [{type: count, name: count}]\n"
        "  granularitySpec: {segmentGranularity: hour, queryGranularity: minute}\n"
        "processing: {topics: [web], windowPeriod: PT10M}\n"
    )


def test_plan_backfill_errors(settings) -> None:  # type: ignore[no-untyped-def]
    from batch.backfill import BackfillError, plan_backfill

    _write_spec(settings)
    plan = plan_backfill(settings, "2026-11-20/P1D", "web")
    assert plan.total == 24 and list(plan.chunks) == ["web"]
    assert plan_backfill(settings, "2026-11-20T00/PT2H").total == 2
    with pytest.raises(BackfillError, match="unknown datasource 'nope'.*known: web"):
        plan_backfill(settings, "2026-11-20/P1D", "nope")
    with pytest.raises(BackfillError, match="bad interval"):
        plan_backfill(settings, "2026-11-20", "web")


def test_cli_errors(settings, radstack_home: Path) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from operations.cli import app

    _write_spec(settings)
    r = CliRunner().invoke(app, ["backfill", "--interval", "2026-13-45/P1D", "--via", "local"])
    assert r.exit_code == 2 and "bad interval" in r.output
    r = CliRunner().invoke(app, ["backfill", "--interval", "2026-11-20/P1D", "--datasource", "zzz"])
    assert r.exit_code == 2 and "unknown datasource 'zzz'" in r.output
    # not closed: the archiver never ran, nothing is rebuilt, the reason names the watermark
    r = CliRunner().invoke(app, ["backfill", "--interval", "2026-11-20T00/PT1H", "--via", "local"])
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and "no archiver watermark" in out and "--force" in out
    # an unreachable Airflow
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = CliRunner(env={"RADSTACK_AIRFLOW__URL": f"http://127.0.0.1:{port}"}).invoke(
        app, ["backfill", "--interval", "2026-11-20T00/PT1H", "--via", "airflow"]
    )
    assert r.exit_code == 3 and "unreachable" in r.output
