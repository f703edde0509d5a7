"""Overlord index tasks whose input is large or remote run through the Spark batch job.

Routing (:func:`runs_on_spark`):

- ``inputSource {"type": "archive", "topics": [...], "eventId": "id"}`` — radstack's raw archive
  (:mod:`realtime.archiver` layout) for ``granularitySpec.intervals``: always Spark;
- ``hdfs`` and ``s3`` inputs with ``inputFormat {"type": "json"}``: Spark when the task context says
  ``"useSpark": true`` or the input totals at least ``tasks.spark_min_bytes``; smaller ones stay on the
  native in-process path.

The Spark work runs in a child process (``python -m batch.overlord_task TASK.json RESULT.json``, its own
JVM, logs to ``{home}/logs/task-<id>.log``) so the server never hosts a JVM; shutting the task down
kills the child's process group, and the rebuild's own cleanup plus the in-flight record make sure
nothing half-written is ever published. Segments get a version above every used version of the
datasource, as native overwrite tasks do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

__all__ = ["runs_on_spark", "run_spark_task", "main"]

DEFAULT_SPARK_MIN_BYTES = 256 * 1024 * 1024


def _input_bytes(spec: Any, settings: Any) -> int:
    from serving.overlord.input_sources import resolve_input_source

    try:
        return sum(int(e.size or 0) for e in resolve_input_source(spec.input_source, settings))
    except Exception:  # noqa: BLE001 - cannot list: let the native path report the error
        return 0


def runs_on_spark(spec: Any, settings: Any) -> bool:
    """Whether an index task should run as a Spark job (see the module docs)."""
    src = spec.input_source or {}
    typ = src.get("type")
    if typ == "archive":
        return True
    if typ not in ("hdfs", "s3") or (spec.input_format or {}).get("type", "json") != "json":
        return False
    if spec.append_to_existing or not spec.data_schema.granularity.intervals:
        return False
    ctx = (spec.payload or {}).get("context") or {}
    if ctx.get("useSpark") is True:
        return True
    if ctx.get("useSpark") is False:
        return False
    threshold = int(settings.get("tasks.spark_min_bytes", DEFAULT_SPARK_MIN_BYTES) or DEFAULT_SPARK_MIN_BYTES)
    return _input_bytes(spec, settings) >= threshold


def _uris(src: dict[str, Any], settings: Any) -> list[str]:
    """Spark URIs of an hdfs/s3 input source (directories are read whole)."""
    if src["type"] == "hdfs":
        paths = src["paths"] if isinstance(src["paths"], list) else [p for p in str(src["paths"]).split(",") if p]
        fs = str(settings.get("deep_storage.hdfs_fs_url") or "").rstrip("/")
        return [p if "://" in p else f"{fs}{p}" for p in paths]
    out = []
    for key in ("uris", "prefixes"):
        for u in src.get(key) or []:
            out.append("s3a://" + u.split("://", 1)[1])
    for o in src.get("objects") or []:
        out.append(f"s3a://{o['bucket']}/{o['path']}")
    return out


def run_spark_task(runner: Any, state: Any) -> int:
    """Run ``state.spec`` as a Spark job in a child process; returns the number of segments published."""
    from radstack.intervals import parse_instant

    spec = state.spec
    settings = runner.settings
    work = settings.home / "tmp" / f"task-{spec.id}"
    work.mkdir(parents=True, exist_ok=True)
    floor = ""
    for seg in runner.metadata.segments(spec.data_source, used=True):
        try:
            parse_instant(seg.version)
        except ValueError:
            continue
        floor = max(floor, seg.version)
    (work / "settings.yaml").write_text(yaml.safe_dump(settings.raw))
    (work / "task.json").write_text(json.dumps({"payload": spec.payload, "min_version": floor}))
    log_path = settings.logs_dir / f"task-{spec.id}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    result = work / "result.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env["RADSTACK_CONFIG"] = str(work / "settings.yaml")
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "batch.overlord_task", str(work / "task.json"), str(result)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            cwd=Path(__file__).resolve().parent.parent, start_new_session=True,
        )  # fmt: skip
    try:
        while proc.poll() is None:
            if state.cancel.is_set():
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                from serving.overlord.tasks import TaskCancelled

                raise TaskCancelled()
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0 or not result.exists():
        tail = log_path.read_text(errors="replace")[-800:]
        raise RuntimeError(f"the Spark job failed (exit {proc.returncode}); see {log_path}: …{tail}")
    out = json.loads(result.read_text())
    st = out.get("stats") or {}
    with state.stats._lock:
        state.stats.processed += int(st.get("processed", 0))
        state.stats.thrown_away += int(st.get("thrownAway", 0))
        state.stats.processed_with_error += int(st.get("processedWithError", 0))
    return len(out.get("segments") or [])


def _task_spec(payload: dict[str, Any]) -> Any:
    from radstack.spec import DatasourceSpec, ProcessingSpec, parse_data_schema

    schema = parse_data_schema({"type": payload["type"], "spec": {"dataSchema": payload["spec"]["dataSchema"]}})
    src = payload["spec"]["ioConfig"]["inputSource"]
    topics = tuple(src.get("topics") or ([src["topic"]] if src.get("topic") else ()))
    return DatasourceSpec(schema, ProcessingSpec(topics=topics or (schema.data_source,), event_id=src.get("eventId")))


def main(argv: list[str] | None = None) -> int:
    """Child process: run one Overlord task's Spark job; write ``{segments, stats, version}``."""
    import logging

    from batch.rebuild_job import rebuild_spec
    from radstack.config import load_settings
    from radstack.intervals import condense

    args = argv if argv is not None else sys.argv[1:]
    task = json.loads(Path(args[0]).read_text())
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = load_settings()
    payload = task["payload"]
    spec = _task_spec(payload)
    intervals = condense(list(spec.data_schema.granularity.intervals))
    if not intervals:
        print("granularitySpec.intervals is required for a Spark task", file=sys.stderr)
        return 2
    src = payload["spec"]["ioConfig"]["inputSource"]
    reader = None
    if src["type"] != "archive":
        uris = _uris(src, settings)

        def reader(spark: Any, _storage: Any, _spec: Any, _chunks: Any) -> Any:
            return spark.read.text(uris), {}

    out: dict[str, Any] = {"segments": [], "stats": {}, "versions": []}
    floor = task.get("min_version") or ""
    for iv in intervals:  # one job per contiguous interval: gaps between them are left alone
        res = rebuild_spec(settings, spec, iv, force=True, reader=reader, min_version=floor)
        floor = max(floor, res.version)
        out["segments"] += [s.identifier for s in res.segments]
        out["versions"].append(res.version)
        for k, v in res.stats.items():
            out["stats"][k] = out["stats"].get(k, 0) + int(v)
    Path(args[1]).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
