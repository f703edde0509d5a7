"""Airflow DAGs: one ``radstack_rebuild_<datasource>`` per datasource that reads topics: the spec files of
the catalog and the supervisors posted to the Overlord API (read through ``python -m
batch.airflow_tasks supervised`` in radstack's own virtualenv, which has the metadata store's driver).

Thin on purpose — the work is in ``batch/``, run in radstack's own virtualenv (Airflow lives in
``.venv-airflow``: its pins fight pyspark's):

``wait_for_archive`` (sensor, reschedule mode: ``python -m batch.airflow_tasks check`` until the interval
is closed — window period passed and the archiver watermark past end + windowPeriod — and the configured
delay has passed) → ``rebuild`` (``radctl backfill --via local --no-druid``; ``SparkSubmitOperator`` when
``spark.master`` is a cluster) → ``druid`` (``python -m batch.airflow_tasks druid``: for a datasource the
Druid cluster of the settings serves, re-index the rebuilt chunks there until Druid's broker serves them;
nothing to do otherwise; retried like the rebuild) → ``verify`` (``python -m batch.airflow_tasks verify``:
the new version serves the interval, in radstack and in Druid).

Schedule: the segment granularity — or ``airflow.run_granularity`` (an hour) when the segments are finer —
as explicit data intervals (``CronDataIntervalTimetable``), so a run covers whole segment buckets. Clearing a run's tasks in the UI rebuilds that interval again (a newer
version); triggering with conf ``{"interval": "2026-11-20/P1D"}`` rebuilds any interval, and
``{"force": true}`` skips the closedness wait.

Environment: ``RADSTACK_PYTHON`` (default ``<repo>/.venv/bin/python``) and the usual ``RADSTACK_*`` /
``RADSTACK_CONFIG`` for the settings.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # the DAG folder is dags/; radstack's packages are beside it
    sys.path.insert(0, str(REPO))

from airflow.sdk import DAG, task  # noqa: E402
from airflow.timetables.interval import CronDataIntervalTimetable, DeltaDataIntervalTimetable  # noqa: E402

from batch.spark_submit import is_cluster_master, submit_args  # noqa: E402
from radstack.config import Settings, load_settings  # noqa: E402
from radstack.datasources import load_catalog  # noqa: E402
from radstack.spec import DatasourceSpec, load_datasource_spec  # noqa: E402
from radstack.storage.supervisors import merge_catalog  # noqa: E402
from radstack.time.granularity import Granularity  # noqa: E402
from radstack.time.intervals import Period  # noqa: E402

log = logging.getLogger(__name__)

#: segment granularity → cron (UTC)
CRONS = {
    "minute": "* * * * *", "five_minute": "*/5 * * * *", "ten_minute": "*/10 * * * *",
    "fifteen_minute": "*/15 * * * *", "thirty_minute": "*/30 * * * *", "hour": "0 * * * *",
    "six_hour": "0 */6 * * *", "eight_hour": "0 */8 * * *", "day": "0 0 * * *", "week": "0 0 * * 1",
    "month": "0 0 1 * *", "quarter": "0 0 1 */3 *", "year": "0 0 1 1 *",
}  # fmt: skip
INTERVAL_TEMPLATE = (
    "{{ dag_run.conf.get('interval') or (data_interval_start.strftime('%Y-%m-%dT%H:%M:%S.000Z') ~ '/' "
    "~ data_interval_end.strftime('%Y-%m-%dT%H:%M:%S.000Z')) }}"
)


def radstack_python() -> str:
    return os.environ.get("RADSTACK_PYTHON") or str(REPO / ".venv" / "bin" / "python")


def run_granularity(segment: Granularity, settings: Settings) -> Granularity:
    """What one scheduled run covers: the segment granularity, or ``airflow.run_granularity`` when the
    segments are finer (60 MINUTE chunks in one hourly run, not 60 runs each waiting out the delay)."""
    floor = Granularity.parse(str(settings.airflow.run_granularity or "hour"))
    return floor if segment.is_finer_than(floor) else segment


def timetable_for(granularity: Any) -> Any:
    """Explicit data intervals at ``granularity`` (cron when it has one, else fixed steps)."""
    name = granularity.to_json()
    if isinstance(name, str) and name.lower() in CRONS:
        return CronDataIntervalTimetable(CRONS[name.lower()], timezone="UTC")
    return DeltaDataIntervalTimetable(dt.timedelta(milliseconds=granularity.approx_millis()))


def _interval(context: dict[str, Any]) -> str:
    conf = (context.get("dag_run").conf if context.get("dag_run") is not None else None) or {}
    if conf.get("interval"):
        return str(conf["interval"])
    start, end = context.get("data_interval_start"), context.get("data_interval_end")
    if start is None or end is None:
        raise ValueError('a run without a data interval needs conf {"interval": "START/END"}')
    fmt = "%Y-%m-%dT%H:%M:%S.000Z"
    return f"{start.astimezone(dt.UTC).strftime(fmt)}/{end.astimezone(dt.UTC).strftime(fmt)}"


def _force(context: dict[str, Any]) -> bool:
    dag_run = context.get("dag_run")
    return bool(((dag_run.conf if dag_run is not None else None) or {}).get("force"))


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(REPO))
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    for line in (proc.stdout + proc.stderr).splitlines():
        log.info("%s", line)
    return proc


def make_dag(name: str, spec: Any, settings: Settings) -> DAG:
    delay = Period.parse(str(settings.airflow.schedule_delay or "PT0S")).fixed_millis
    master = str(settings.spark.master or "local[*]")
    with DAG(
        dag_id=f"{settings.airflow.dag_prefix or 'radstack_rebuild_'}{name}",
        description=f"Rebuild {name} from the raw archive (batch layer)",
        schedule=timetable_for(run_granularity(spec.data_schema.segment_granularity, settings)),
        start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        catchup=False,
        max_active_runs=4,
        tags=["radstack", "batch", name],
        default_args={"retries": int(settings.airflow.task_retries),
                      "retry_delay": dt.timedelta(seconds=float(settings.airflow.retry_delay_seconds))},
        params={},
    ) as dag:

        # the check is read-only and idempotent: a crash of the poke itself (its process killed, the task
        # runner losing the API server on a loaded machine) is retried at once, whatever task_retries says;
        # the sensor's timeout still fails the run without a retry (Airflow does not retry a sensor timeout)
        @task.sensor(task_id="wait_for_archive", poke_interval=60, timeout=24 * 3600, mode="reschedule", retries=2,
                     retry_delay=dt.timedelta(seconds=15))
        def wait_for_archive(**context: Any) -> bool:
            interval = _interval(context)
            if _force(context):
                log.info("force: not waiting for %s to close", interval)
                return True
            end = context.get("data_interval_end")
            if not (context.get("dag_run").conf or {}).get("interval") and end is not None:
                ready_at = end + dt.timedelta(milliseconds=delay)
                if dt.datetime.now(dt.UTC) < ready_at:
                    log.info("waiting for the schedule delay: until %s", ready_at.isoformat())
                    return False
            proc = _run([radstack_python(), "-m", "batch.airflow_tasks", "check",
                         "--datasource", name, "--interval", interval])  # fmt: skip
            if proc.returncode == 0:
                return True
            if proc.returncode == 75:
                return False
            raise RuntimeError(f"archive check failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")

        rebuild: Any
        if is_cluster_master(master):
            # lazy: the Spark provider is needed only where DAGs submit to a cluster master
            from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

            a = submit_args(settings, name, INTERVAL_TEMPLATE, force=True)
            rebuild = SparkSubmitOperator(
                task_id="rebuild", application=a["application"], application_args=a["application_args"],
                conf=a["conf"], jars=a["jars"], py_files=a["py_files"], name=a["name"],
                deploy_mode=a["deploy_mode"], driver_memory=a["driver_memory"], conn_id="spark_default",
            )  # fmt: skip
        else:

            @task(task_id="rebuild")
            def rebuild_local(**context: Any) -> str:
                interval = _interval(context)
                run = context.get("run_id") or ""
                proc = _run([radstack_python(), "-m", "operations", "backfill", "--via", "local", "--json",
                             "--force", "--no-druid", "--interval", interval, "--datasource", name,
                             "--started-by", f"airflow {context['dag'].dag_id} {run}".strip()])  # fmt: skip
                if proc.returncode != 0:
                    raise RuntimeError(f"rebuild of {name} {interval} failed (exit {proc.returncode}); see the log above")
                return proc.stdout.strip()

            rebuild = rebuild_local()

        @task(task_id="verify", retries=0)
        def verify(**context: Any) -> str:
            interval = _interval(context)
            start = context["dag_run"].start_date or dt.datetime.now(dt.UTC)
            since = start.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{start.microsecond // 1000:03d}Z"
            proc = _run([radstack_python(), "-m", "batch.airflow_tasks", "verify", "--datasource", name,
                         "--interval", interval, "--since", since])  # fmt: skip
            if proc.returncode != 0:
                raise RuntimeError(f"verification failed: {proc.stdout.strip() or proc.stderr.strip()[-500:]}")
            return proc.stdout.strip()

        @task(task_id="druid")
        def druid(**context: Any) -> str:
            interval = _interval(context)
            run = context.get("run_id") or ""
            proc = _run([radstack_python(), "-m", "batch.airflow_tasks", "druid", "--datasource", name,
                         "--interval", interval, "--started-by", f"airflow {context['dag'].dag_id} {run}".strip()])  # fmt: skip
            if proc.returncode != 0:
                raise RuntimeError(f"the Druid cluster did not take {name} {interval} (exit {proc.returncode}): "
                                   f"{(proc.stdout + proc.stderr).strip()[-500:]}")
            return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""

        wait_for_archive() >> rebuild >> druid() >> verify()
    return dag


def supervised_specs() -> dict[str, DatasourceSpec]:
    """The supervisors' datasource specs, from radstack's virtualenv; none (logged) when it cannot tell."""
    try:
        env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", str(REPO)))
        proc = subprocess.run([radstack_python(), "-m", "batch.airflow_tasks", "supervised"], cwd=REPO, env=env,
                              capture_output=True, text=True, check=False, timeout=20)  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip()[-500:])
        return {name: load_datasource_spec(raw) for name, raw in json.loads(proc.stdout).items()}
    except Exception:  # noqa: BLE001 - the spec files' DAGs must still load
        log.warning("could not read the supervisors' datasources; their rebuild DAGs are missing", exc_info=True)
        return {}


def build_dags() -> dict[str, DAG]:
    settings = load_settings()
    out: dict[str, DAG] = {}
    for name, spec in sorted(merge_catalog(load_catalog(settings), supervised_specs()).items()):
        if not spec.processing.topics:
            continue  # nothing archived to rebuild from
        dag = make_dag(name, spec, settings)
        out[dag.dag_id] = dag
    return out


for _dag_id, _dag in build_dags().items():
    globals()[_dag_id] = _dag
