"""Every rebuild is a task: ``radctl backfill --via local`` — run at a terminal, by the quickstart, by an
Airflow ``rebuild`` task or by the console's backfill button — records one task per datasource
(type ``radstack_backfill``, :mod:`radstack.storage.task_records`), with who started it, its status,
its per-chunk report and a log of its own.
"""

from __future__ import annotations

from typing import Any

from radstack.config import Settings
from radstack.storage.metadata import MetadataStore
from radstack.storage.task_records import TaskRecord, new_task_id, task_log_path
from radstack.time.intervals import Interval

TASK_TYPE = "radstack_backfill"

__all__ = ["TASK_TYPE", "RebuildTask", "new_rebuild_task_id", "task_log_path"]


def new_rebuild_task_id(datasource: str) -> str:
    return new_task_id(TASK_TYPE, datasource)


class RebuildTask(TaskRecord):
    """One datasource's rebuild; :meth:`finish_chunks` records the outcome from its chunks."""

    def __init__(self, settings: Settings, metadata: MetadataStore, datasource: str, interval: Interval, *,
                 chunks: int, force: bool, started_by: str, task_id: str | None = None) -> None:
        super().__init__(settings, metadata, task_type=TASK_TYPE, datasource=datasource, started_by=started_by,
                         task_id=task_id, payload={"interval": interval.iso(), "force": force, "chunks": chunks})
        self.line(f"{TASK_TYPE} of {datasource} {interval.iso()}: {chunks:,} chunk(s), started by {started_by}"
                  + (", forced (closedness not checked)" if force else ""))

    def finish_chunks(self, chunks: list[dict[str, Any]]) -> None:
        failed = [c for c in chunks if c.get("status") != "published"]
        error = (failed[0].get("error") or "failed") if failed else (None if chunks else "no chunk was rebuilt")
        self.line(f"{'FAILED' if error else 'SUCCESS'}: {len(chunks) - len(failed):,} of {len(chunks):,} chunk(s) "
                  "published" + (f"; first error: {error}" if error else ""))
        self.finish(error is None, error, {"chunks": chunks})
