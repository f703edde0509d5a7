"""The job that trains a Spark before real work reaches it: one hour of generated ``ads`` impressions,
archived as the archiver archives them (raw bytes and the parsed archive's columns), rebuilt through the
real batch job — the archive reader, the parse from columns, validation, the rollup shuffle and sort, the
segment writer in Spark's Python workers, the publish — in a home of its own that is removed afterwards.

Two runs use it: the class-data sharing archive's training run (:mod:`operations.class_sharing_build`,
a local driver whose JVM writes every class it loaded) and the warm Spark's warm-up
(:mod:`operations.spark_connect_warm_up`, on the Connect server: its JIT compiles the job's code, and the
session's Python workers import the segment writer, before the first scheduled rebuild needs them)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from batch.rebuild_job import rebuild_spec
from radstack.config import load_settings
from radstack.datasources import get_spec
from radstack.jvm import REPO_ROOT
from radstack.storage.deep_storage import open_deep_storage
from radstack.time.intervals import Interval
from realtime.archiver.records import archive_values
from realtime.generators.ads import generate
from realtime.generators.common import GeneratorOptions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["TRAINING_EVENTS", "TRAINING_HOUR", "rebuild_generated_hour"]

TRAINING_HOUR = 1_767_225_600_000  # 2026-01-01T00:00:00Z: any closed hour does
TRAINING_EVENTS = 20_000


def rebuild_generated_hour(spark: SparkSession, events: int = TRAINING_EVENTS) -> int:
    """Rebuild one generated hour on ``spark`` (a local session or a Connect one) in a temporary home;
    returns the events the published segments hold."""
    work = Path(tempfile.mkdtemp(prefix="radstack-training-"))
    try:
        home = work / "home"
        (home / "datasources").mkdir(parents=True)
        shutil.copy(REPO_ROOT / "examples" / "ads" / "ads.yaml", home / "datasources" / "ads.yaml")
        settings = load_settings(env={"RADSTACK_HOME": str(home)})
        spec = get_spec(settings, "ads")
        opts = GeneratorOptions(events=events, start_ms=TRAINING_HOUR, sim_rate=events / 3600, late=0.0)
        values = [e.value for e in generate(opts, TRAINING_HOUR) if e.stream == "impressions"]
        # two flushes, as an archiver's hour has several files
        archive_values(open_deep_storage(settings), spec.processing.topics[0], values, per_file=len(values) // 2 + 1)
        result = rebuild_spec(settings, spec, Interval(TRAINING_HOUR, TRAINING_HOUR + 3_600_000), spark=spark,
                              force=True)  # fmt: skip
        return result.events
    finally:
        shutil.rmtree(work, ignore_errors=True)
