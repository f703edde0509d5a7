"""The retention duty (Druid's ``RunRules``): apply each datasource's rules to its used segments;
segments whose first matching rule is a drop rule are marked unused (the broker stops serving them
at its next metadata poll; :mod:`serving.coordinator.duties.kill` may delete them later).

A datasource whose rules cannot be parsed is skipped and reported, never half-applied.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

from radstack import metrics
from radstack.storage.metadata import MetadataStore
from radstack.storage.segments import DataSegment
from radstack.time.clock import now_millis
from serving.coordinator.duties.base import Duty, DutyContext
from serving.coordinator.rules import RuleError, decide, rules_for

log = logging.getLogger(__name__)

__all__ = ["RetentionReport", "plan_retention", "apply_retention"]


@dataclass
class RetentionReport:
    dropped: dict[str, list[str]] = field(default_factory=dict)  # datasource → ids marked (or to mark) unused
    kept: dict[str, int] = field(default_factory=dict)  # datasource → used segments a load rule keeps
    unmatched: dict[str, list[str]] = field(default_factory=dict)  # no rule applied: left as they are
    errors: dict[str, str] = field(default_factory=dict)  # datasource → why its rules were not applied
    dry_run: bool = False

    @property
    def dropped_ids(self) -> list[str]:
        return [i for ids in self.dropped.values() for i in ids]


def plan_retention(
    metadata: MetadataStore, *, now_ms: int, data_source: str | None = None
) -> RetentionReport:
    """What the rules say about every used segment (nothing is changed)."""
    report = RetentionReport(dry_run=True)
    by_ds: dict[str, list[DataSegment]] = defaultdict(list)
    for seg in metadata.segments(data_source, used=True):
        by_ds[seg.data_source].append(seg)
    for ds, segs in sorted(by_ds.items()):
        try:
            rules = rules_for(metadata, ds)
        except RuleError as e:
            report.errors[ds] = str(e)
            log.error("retention: rules of %s cannot be used, skipping it: %s", ds, e)
            continue
        decision = decide(segs, rules, now_ms)
        report.kept[ds] = len(decision.keep)
        if decision.drop:
            report.dropped[ds] = decision.drop
        if decision.unmatched:
            report.unmatched[ds] = decision.unmatched
            log.warning("retention: %d segment(s) of %s match no rule", len(decision.unmatched), ds)
    return report


def apply_retention(
    metadata: MetadataStore,
    *,
    now_ms: int | None = None,
    data_source: str | None = None,
    dry_run: bool = False,
) -> RetentionReport:
    """Mark the segments the rules drop unused; returns what was done (or would be, ``dry_run``)."""
    now = now_millis() if now_ms is None else now_ms
    report = plan_retention(metadata, now_ms=now, data_source=data_source)
    report.dry_run = dry_run
    if dry_run:
        return report
    for ds, ids in report.dropped.items():
        n = metadata.mark_unused(ids)
        if n:
            metrics.RETENTION_DROPPED.labels(ds).inc(n)
            log.info("retention: marked %d segment(s) of %s unused", n, ds)
    return report


def _run(ctx: DutyContext) -> list[str]:
    if not bool(ctx.settings.coordinator.retention.on):
        return []
    return apply_retention(ctx.metadata, now_ms=ctx.now_ms).dropped_ids


DUTY = Duty("retention", _run)
