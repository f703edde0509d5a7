"""The Airflow DAGs, in Airflow's own virtualenv (``make airflow`` → ``.venv-airflow``): the DAG folder
imports without errors (one DAG per datasource, schedule at the segment granularity with explicit data
intervals, wait → rebuild → verify), and ``dag.test()`` runs a real rebuild of a small interval end to
end (the rebuild task runs ``radctl backfill --via local`` of the main venv: real Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from radstack.time.intervals import Interval, format_instant, parse_instant
from tests.fixtures.airflow import REPO, airflow_environment, run_airflow_python, run_dag_test
from tests.fixtures.batch import set_watermark, write_archive

pytestmark = pytest.mark.slow

T0 = parse_instant("2026-11-20T00:00:00Z")
HOUR = 3_600_000

SPEC = """\
dataSchema:
  dataSource: {name}
  timestampSpec: {{column: timestamp, format: iso}}
  dimensionsSpec: {{dimensions: [page]}}
  metricsSpec: [{{type: count, name: count}}]
  granularitySpec: {{segmentGranularity: {gran}, queryGranularity: minute}}
processing: {{topics: [{name}], eventId: id, windowPeriod: PT10M}}
"""

INSPECT = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
out = {"errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": {}}
for dag_id, dag in bag.dags.items():
    out["dags"][dag_id] = {
        "tasks": sorted(t.task_id for t in dag.tasks),
        "upstream": {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks},
        "timetable": type(dag.timetable).__name__,
        "summary": dag.timetable.summary,
        "catchup": dag.catchup,
    }
print(json.dumps(out))
"""


@pytest.fixture
def airflow_env(radstack_home: Path, tmp_path: Path) -> dict[str, str]:
    ds_dir = radstack_home / "datasources"
    ds_dir.mkdir()
    (ds_dir / "web.yaml").write_text(SPEC.format(name="web", gran="hour"))
    (ds_dir / "shop.yaml").write_text(SPEC.format(name="shop", gran="day"))
    (ds_dir / "ticks.yaml").write_text(SPEC.format(name="ticks", gran="minute"))
    return airflow_environment(radstack_home, tmp_path / "airflow")


def test_dag_import(airflow_env: dict[str, str], settings) -> None:  # type: ignore[no-untyped-def]
    """Spec files and a supervisor posted to the Overlord API (kept in the metadata store, read through
    radstack's own virtualenv) each get a rebuild DAG."""
    from radstack.storage.metadata import MetadataStore
    from radstack.storage.supervisors import (
        SupervisorRecord,
        datasource_spec_from_supervisor,
        save_supervisor,
    )

    posted = {"type": "kafka", "spec": {"ioConfig": {"topic": "clicks"}, "dataSchema": {
        "dataSource": "clicks", "timestampSpec": {"column": "timestamp", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["page"]}, "granularitySpec": {"segmentGranularity": "hour"}}}}
    with MetadataStore.from_settings(settings) as md:
        save_supervisor(md, SupervisorRecord(id="clicks", spec=posted, datasource=datasource_spec_from_supervisor(posted)))
    proc = run_airflow_python(airflow_env, INSPECT, str(REPO / "dags"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["errors"] == {}
    assert set(out["dags"]) == {"radstack_rebuild_web", "radstack_rebuild_shop", "radstack_rebuild_clicks",
                                "radstack_rebuild_ticks"}
    # minute segments: one run an hour rebuilds its 60 chunks (airflow.run_granularity), not 60 runs
    assert out["dags"]["radstack_rebuild_ticks"]["summary"] == "0 * * * *"
    assert out["dags"]["radstack_rebuild_clicks"]["summary"] == "0 * * * *"
    web, shop = out["dags"]["radstack_rebuild_web"], out["dags"]["radstack_rebuild_shop"]
    for d in (web, shop):
        assert d["tasks"] == ["druid", "rebuild", "verify", "wait_for_archive"]
        assert d["upstream"] == {"wait_for_archive": [], "rebuild": ["wait_for_archive"], "druid": ["rebuild"],
                                 "verify": ["druid"]}
        assert d["timetable"] == "CronDataIntervalTimetable"
        assert d["catchup"] is False
    assert web["summary"] == "0 * * * *" and shop["summary"] == "0 0 * * *"


def test_dag_test_rebuilds_an_interval(airflow_env: dict[str, str], settings) -> None:  # type: ignore[no-untyped-def]
    from batch.backfill import visible
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore

    storage = open_deep_storage(settings)
    events = [{"timestamp": format_instant(T0 + i * 7_000), "id": f"e{i}", "page": f"/p{i % 3}"} for i in range(200)]
    write_archive(storage, "web", [orjson.dumps(e) for e in events + events[:30]])
    with MetadataStore.from_settings(settings) as md:
        set_watermark(md, "web", T0 + 2 * HOUR)
    interval = Interval(T0, T0 + HOUR).iso()
    res = run_dag_test(airflow_env, "radstack_rebuild_web", {"interval": interval})
    assert res["state"] == "success", res
    assert res["tasks"] == {"wait_for_archive": "success", "rebuild": "success", "druid": "success",
                            "verify": "success"}
    with MetadataStore.from_settings(settings) as md:
        segs = [s for s, _ in visible(md, "web", Interval(T0, T0 + HOUR))]
        assert segs and all(s.shard_spec.type == "numbered" and s.shard_spec.partitions == len(segs) for s in segs)
        groups = {((T0 + i * 7_000) // 60_000, i % 3) for i in range(200)}
        assert sum(s.num_rows for s in segs) == len(groups)  # rolled up to (minute, page)
        from batch.backfill import chunk_summary
        from radstack.datasources import get_spec

        rows, events, versions = chunk_summary(md, storage, get_spec(settings, "web"), Interval(T0, T0 + HOUR))
        assert (rows, events) == (len(groups), 200)  # the 30 duplicates are gone
