"""``radctl backfill``: plan an interval into chunks, rebuild them locally or through Airflow, summarise.

- :func:`plan_backfill` — datasources × segment-granularity chunks, with clear errors for a bad interval
  or an unknown datasource (:class:`BackfillError`);
- :func:`run_local` — local Spark rebuilds of runs of consecutive chunks (:func:`group_chunks`, at most
  ``batch.chunks_per_job`` chunks each): one Spark job, one version and one atomic publish per group
  (tombstones for its chunks without data), results still per chunk (closedness is checked for every
  chunk before any work starts, unless ``force``);
- :func:`run_airflow` — one DAG run per chunk through Airflow 3's REST API (``POST
  /api/v2/dags/{dag}/dagRuns`` with ``conf {"interval": …}``), optionally waiting for them;
- :func:`chunk_summary` / :func:`chunk_summaries` — for a chunk (or a run of chunks, with one metadata
  query and one read per data segment), rows and events (the sum of the count metric) of what served it
  before (the real-time data, on a first rebuild) and of what serves it now, and the version now
  serving it; tombstones and chunks without segments cost no deep-storage read.
"""

from batch.backfill.airflow import run_airflow
from batch.backfill.local import run_local
from batch.backfill.plan import (
    BackfillError,
    BackfillPlan,
    ChunkResult,
    Progress,
    check_plan_closed,
    chunks_per_job,
    group_chunks,
    plan_backfill,
)
from batch.backfill.summaries import chunk_summaries, chunk_summary, visible

__all__ = [
    "BackfillError",
    "BackfillPlan",
    "ChunkResult",
    "Progress",
    "check_plan_closed",
    "chunk_summaries",
    "chunk_summary",
    "chunks_per_job",
    "group_chunks",
    "plan_backfill",
    "run_airflow",
    "run_local",
    "visible",
]
