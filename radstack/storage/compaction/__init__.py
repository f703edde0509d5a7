"""Tiered rollup compaction: rewrite old intervals as fewer, coarser, higher-version segments.

**Config** (Druid's ``DataSourceCompactionConfig`` shape, stored in ``druid_config`` under
``coordinator.compaction.config`` as Druid's ``CoordinatorCompactionConfig``)::

    {"dataSource": "ads", "skipOffsetFromLatest": "P1D",
     "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "HOUR", "rollup": true},
     "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5000000}},
     "metricsSpec": [...],                      # optional: how to combine the metrics
     "tiers": [                                 # radstack: older data → coarser rollup
        {"olderThan": "P1D",  "queryGranularity": "HOUR", "segmentGranularity": "DAY"},
        {"olderThan": "P30D", "queryGranularity": "DAY",  "segmentGranularity": "MONTH"}]}

A top-level ``granularitySpec`` is a tier with no age limit. For each tier (the oldest first), every
``segmentGranularity`` bucket that ended at least ``olderThan`` ago — and before the latest data's end
minus ``skipOffsetFromLatest``, and more than the datasource's ``windowPeriod`` ago (the streaming job
can still append to it otherwise) — is compacted unless its visible segments already are exactly one
compacted set of that tier (``lastCompactionState``). Buckets a coarser tier owns are left to it.

**Running** one interval: read the segments visible in the timeline for it (each clipped to where it
is visible), re-roll them at the tier's granularities through the shared indexer with the metrics'
*combining* aggregators (a ``count`` becomes a ``longSum`` of the count column), check every metric
total (sums equal, min/max equal), and publish with version = the compaction's start time (raised
above every version of the datasource) in ONE transaction: the new set overshadows the detailed one
atomically. The overshadowed inputs are marked unused later by the coordinator's overshadow duty.
Small intervals run in-process (pyarrow + DuckDB); large ones as a Spark job
(:mod:`batch.compaction_job`). A publish is refused if the interval's visible segments changed while
the compaction ran.

The config is :mod:`.config`, the planner :mod:`.plan`, the output schema :mod:`.schema`, the run
:mod:`.run`; the coordinator's duty that drives them is ``serving/coordinator/duties/compaction.py``.
"""

from radstack.storage.compaction.config import (
    CONFIG_NAME,
    CompactionConfig,
    CompactionConflictError,
    CompactionError,
    CompactionTier,
    compaction_config_document,
    delete_compaction_config,
    load_compaction_configs,
    save_compaction_config,
)
from radstack.storage.compaction.plan import CompactionPlan, plan_compaction
from radstack.storage.compaction.run import (
    CompactionResult,
    SparkCompactor,
    choose_runner,
    compact_datasource,
    run_compaction,
)
from radstack.storage.compaction.schema import compaction_schema, resolve_dimensions, window_period_of

__all__ = [
    "CONFIG_NAME",
    "CompactionError",
    "CompactionConflictError",
    "CompactionTier",
    "CompactionConfig",
    "CompactionPlan",
    "CompactionResult",
    "load_compaction_configs",
    "compaction_config_document",
    "save_compaction_config",
    "delete_compaction_config",
    "plan_compaction",
    "compaction_schema",
    "run_compaction",
    "compact_datasource",
    "SparkCompactor",
    "choose_runner",
    "resolve_dimensions",
    "window_period_of",
]
