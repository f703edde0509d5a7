"""The coordinator's duties, one module each (Druid's ``duty`` package), run in this order by
:func:`serving.coordinator.loop.run_duties`. A new duty is a module with a ``DUTY`` and a line here."""

from serving.coordinator.duties import (
    compaction,
    druid_sync,
    kill,
    orphan_files,
    overshadowed,
    retention,
    self_metrics,
    task_logs,
)
from serving.coordinator.duties.base import Duty

DUTIES: tuple[Duty, ...] = (
    overshadowed.DUTY,  # MarkOvershadowedSegmentsAsUnused
    orphan_files.DUTY,  # segment files no row points to
    retention.DUTY,  # RunRules: drop rules mark segments unused
    compaction.DUTY,  # CompactSegments
    kill.DUTY,  # KillUnusedSegments
    task_logs.DUTY,  # the task log cleaner (druid.indexer.logs.kill)
    self_metrics.DUTY,  # the platform's own metrics as a datasource
    druid_sync.DUTY,  # a Druid cluster's supervisors, rules, compaction and failed re-indexes
)
