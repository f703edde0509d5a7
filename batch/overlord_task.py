"""The child process of an Overlord index task that runs through the Spark batch job.

The server decides and launches (:mod:`serving.overlord.spark_tasks`, which names this module through
the batch jobs the composition root hands it); routing:

- ``inputSource {"type": "archive", "topics": [...], "eventId": "id"}`` — radstack's raw archive
  (:mod:`realtime.archiver` layout) for ``granularitySpec.intervals``: always Spark;
- ``hdfs`` and ``s3`` inputs with ``inputFormat {"type": "json"}``: Spark when the task context says
  ``"useSpark": true`` or the input totals at least ``tasks.spark_min_bytes``; smaller ones stay on the
  native in-process path.

The Spark work runs here, in a child process (``python -m batch.overlord_task TASK.json RESULT.json``, its own
JVM, logs to ``{home}/logs/task-<id>.log``) so the server never hosts a JVM; shutting the task down
kills the child's process group, and the rebuild's own cleanup plus the in-flight record make sure
nothing half-written is ever published. Segments get a version above every used version of the
datasource, as native overwrite tasks do.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from batch.rebuild_job import rebuild_spec
from radstack.config import load_settings
from radstack.druid_cluster.reindex import DruidReindexError, reindex
from radstack.spec import DatasourceSpec, ProcessingSpec, parse_data_schema
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.metadata import MetadataStore
from radstack.storage.raw_archive import input_topics
from radstack.time.intervals import condense

__all__ = ["main"]


def _task_spec(payload: dict[str, Any]) -> Any:

    schema = parse_data_schema({"type": payload["type"], "spec": {"dataSchema": payload["spec"]["dataSchema"]}})
    src = payload["spec"]["ioConfig"]["inputSource"]
    return DatasourceSpec(schema, ProcessingSpec(topics=input_topics(src, schema.data_source), event_id=src.get("eventId")))


def main(argv: list[str] | None = None) -> int:
    """Child process: run one Overlord task's Spark job; write ``{segments, stats, version}``."""


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
    reader = None
    uris = task.get("spark_uris")  # the input source's Spark URIs (serving/overlord/input_sources/); None: the archive
    if uris is not None:

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
    if settings.druid.serves(spec.name):  # the Druid cluster takes the same chunks, as after every rebuild
        out["druid"] = _to_druid(settings, spec, intervals)
    Path(args[1]).write_text(json.dumps(out))
    return 0


def _to_druid(settings: Any, spec: DatasourceSpec, intervals: list[Any]) -> list[dict[str, Any]]:
    """Each rebuilt interval re-indexed in the Druid cluster; a failure is reported (and left to the server's
    druid_sync duty to retry), never the task's failure: radstack published the rebuild."""
    out = []
    with MetadataStore.from_settings(settings) as md:
        storage = open_deep_storage(settings)
        for iv in intervals:
            try:
                res = reindex(settings, md, storage, spec, iv, started_by="overlord task")
                out.append({"interval": iv.iso(), "druidVersion": res.druid_version, "seconds": round(res.seconds, 2)})
            except DruidReindexError as e:
                logging.getLogger(__name__).warning("Druid did not take %s: %s", iv.iso(), e)
                out.append({"interval": iv.iso(), "error": str(e)})
    return out


if __name__ == "__main__":
    sys.exit(main())
