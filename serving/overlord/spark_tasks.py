"""Index tasks that run as a Spark job in a child process (the batch layer's Overlord task).

:func:`runs_on_spark` routes: the raw archive always; ``hdfs``/``s3`` JSON inputs when the task context
says ``"useSpark": true`` or they total at least ``tasks.spark_min_bytes``. :func:`run_spark_task` runs
``python -m <module> TASK.json RESULT.json`` (the module comes from :class:`serving.jobs.BatchJobs`;
radstack's is :mod:`batch.overlord_task`), in its own process group with its own JVM, logging to
``{home}/logs/task-<id>.log``; shutting the task down kills the group. The server never imports the
batch layer: it knows only the module's name.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from radstack.config import Settings
from radstack.private_files import private_dir, write_private
from radstack.process_state import spawn_group, stop_groups
from radstack.storage.ingest_stats import IngestStats
from radstack.storage.task_records import spark_task_log_path
from radstack.time.intervals import parse_instant
from serving.overlord.cancel import TaskCancelled
from serving.overlord.input_sources import SOURCES, resolve_input_source, source_of
from serving.overlord.task_state import TaskHost, TaskState

__all__ = ["runs_on_spark", "run_spark_task"]

DEFAULT_SPARK_MIN_BYTES = 256 * 1024 * 1024
_REPO_ROOT = Path(__file__).resolve().parents[2]


def _input_bytes(spec: Any, settings: Settings) -> int:
    try:
        return sum(int(e.size or 0) for e in resolve_input_source(spec.input_source, settings))
    except Exception:  # noqa: BLE001 - cannot list: let the native path report the error
        return 0


def runs_on_spark(spec: Any, settings: Settings) -> bool:
    """Whether an index task should run as a Spark job (see the module docs)."""
    source = SOURCES.get((spec.input_source or {}).get("type"))
    if source is None or source.spark == "never":
        return False
    if source.spark == "always":
        return True
    if (spec.input_format or {}).get("type", "json") != "json":
        return False
    if spec.append_to_existing or not spec.data_schema.granularity.intervals:
        return False
    if spec.data_schema.needs_discovery:  # types come from all the rows: the in-process indexer
        return False
    ctx = (spec.payload or {}).get("context") or {}
    if ctx.get("useSpark") is True:
        return True
    if ctx.get("useSpark") is False:
        return False
    threshold = int(settings.tasks.spark_min_bytes or DEFAULT_SPARK_MIN_BYTES)
    return _input_bytes(spec, settings) >= threshold


def run_spark_task(runner: TaskHost, state: TaskState, module: str) -> int:
    """Run ``state.spec`` as a Spark job in a child process; returns the number of segments published."""
    spec = state.spec
    settings = runner.settings
    private_dir(settings.home / "tmp")
    work = private_dir(settings.home / "tmp" / f"task-{spec.id}")  # its settings.yaml holds passwords
    floor = ""
    for seg in runner.metadata.segments(spec.data_source, used=True):
        try:
            parse_instant(seg.version)
        except ValueError:
            continue
        floor = max(floor, seg.version)
    write_private(work / "settings.yaml", yaml.safe_dump(settings.to_dict()))
    uris = source_of(spec.input_source).spark_uris(spec.input_source, settings)
    write_private(work / "task.json", json.dumps({"payload": spec.payload, "min_version": floor, "spark_uris": uris}))
    log_path = spark_task_log_path(settings, spec.id)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    result = work / "result.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env["RADSTACK_CONFIG"] = str(work / "settings.yaml")
    proc = spawn_group([sys.executable, "-m", module, str(work / "task.json"), str(result)], log_path, env=env,
                       cwd=_REPO_ROOT)
    try:
        while proc.poll() is None:
            if state.cancel.is_set():
                stop_groups([proc], 15)
                raise TaskCancelled()
            time.sleep(0.2)
    finally:
        if proc.poll() is None:  # an error here: nothing to wait for
            stop_groups([proc], 0)
    if proc.returncode != 0 or not result.exists():
        tail = log_path.read_text(errors="replace")[-800:]
        raise RuntimeError(f"the Spark job failed (exit {proc.returncode}); see {log_path}: …{tail}")
    out = json.loads(result.read_text())
    st = out.get("stats") or {}
    state.stats.merge(IngestStats(processed=int(st.get("processed", 0)), thrown_away=int(st.get("thrownAway", 0)),
                                  processed_with_error=int(st.get("processedWithError", 0))))
    return len(out.get("segments") or [])
