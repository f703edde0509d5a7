"""The serving process as radstack runs it: :func:`serving.app.create_app` with the batch layer's jobs.

This is the one place the serving and batch layers meet (docs/architecture.md): the Spark compaction
runner, the module the Overlord runs for Spark index tasks, and the console's backfill endpoint.
"""

from __future__ import annotations

from fastapi import FastAPI

from batch.compaction_job import compact_with_spark
from operations.backfill_api import router as backfill_router
from radstack.config import Settings
from serving.app import create_app
from serving.jobs import BatchJobs

__all__ = ["batch_jobs", "create_server_app"]


def batch_jobs() -> BatchJobs:
    """radstack's batch layer as the serving process uses it."""
    return BatchJobs(spark_compactor=compact_with_spark, spark_task_module="batch.overlord_task",
                     routers=(backfill_router,))


def create_server_app(settings: Settings) -> FastAPI:
    """The full server: broker, coordinator, overlord, console, plus batch jobs and backfill."""
    return create_app(settings, batch_jobs())
