"""What the serving process may start in the batch layer, handed in by the composition root.

serving/ never imports batch/ (docs/architecture.md: realtime, batch and serving sit side by side).
Three things of the server still run batch work, as Druid's Overlord and Coordinator start tasks they
do not contain: a compaction interval large enough for Spark, an index task whose input is the raw
archive or a large remote file, and the console's backfill button. :func:`operations.server.
create_server_app` fills :class:`BatchJobs` with batch/'s implementations; a server built without them
(``BatchJobs()``) compacts in process and runs every index task natively.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter

from radstack.storage.compaction import SparkCompactor


@dataclass(frozen=True)
class BatchJobs:
    """The batch layer's entry points the serving process uses; all optional."""

    # compaction of intervals the runner choice sends to Spark (radstack.storage.compaction.run_compaction)
    spark_compactor: SparkCompactor | None = None
    # module run as ``python -m MODULE TASK.json RESULT.json`` for index tasks that go to Spark
    # (serving.overlord.spark_tasks); None: every index task runs natively in the server
    spark_task_module: str | None = None
    # extra HTTP routes of the batch layer (the console's backfill endpoint)
    routers: tuple[APIRouter, ...] = ()
