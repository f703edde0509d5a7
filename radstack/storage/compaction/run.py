"""Running one planned interval: read what is visible, re-roll, check the totals, publish atomically."""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from radstack import metrics
from radstack.config import Settings
from radstack.spec import TIME_COLUMN, DataSchema, MetricSpec
from radstack.storage.compaction.config import (
    CompactionConfig,
    CompactionConflictError,
    CompactionError,
)
from radstack.storage.compaction.plan import CompactionPlan, plan_compaction
from radstack.storage.compaction.schema import (
    catalog_spec,
    compaction_schema,
    compaction_state,
    resolve_dimensions,
    resolve_metrics,
    window_period_of,
)
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.indexer import index_partition
from radstack.storage.metadata import MetadataStore
from radstack.storage.publish import publish
from radstack.storage.segment_format import arrow_type, read_stored_segment
from radstack.storage.segments import DataSegment
from radstack.storage.timeline import VersionedIntervalTimeline, VisibleSegment
from radstack.time.clock import now_millis
from radstack.time.intervals import (
    Interval,
    TimeParseError,
    format_instant,
    parse_instant,
)

log = logging.getLogger(__name__)


class SparkCompaction(Protocol):
    """What a Spark compaction run returns (:class:`batch.compaction_job.SparkCompactionOutput`)."""

    segments: list[DataSegment]
    schema: DataSchema
    rows_in: int
    totals_in: dict[str, Any]


class SparkCompactor(Protocol):
    """Compacts one planned interval on Spark without publishing: batch/'s
    :func:`batch.compaction_job.compact_with_spark`, handed in by the process that composes the layers."""

    def __call__(
        self,
        plan: CompactionPlan,
        config: CompactionConfig,
        metric_specs: Sequence[MetricSpec],
        *,
        deep_storage: DeepStorage,
        settings: Settings,
        version: str,
        rollup: bool,
        spark: Any = None,
    ) -> SparkCompaction: ...


@dataclass
class CompactionResult:
    plan: CompactionPlan
    version: str
    segments: list[DataSegment]
    rows_in: int
    rows_out: int
    runner: str
    totals: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.plan.to_json(),
            "version": self.version,
            "segments": [s.identifier for s in self.segments],
            "rowsIn": self.rows_in,
            "rowsOut": self.rows_out,
            "runner": self.runner,
            "totals": self.totals,
        }


def new_version(metadata: MetadataStore, data_source: str, now_ms: int) -> str:
    """The compaction's start time, raised above every version of the datasource."""
    floor = now_ms
    newest = ""
    for seg in metadata.segments(data_source, used=None):
        newest = max(newest, seg.version)
        with contextlib.suppress(ValueError, TimeParseError):
            floor = max(floor, parse_instant(seg.version) + 1)
    version = format_instant(floor)
    if version <= newest:
        raise CompactionError(
            f"{data_source}: existing version {newest!r} sorts after any time-based version; "
            "compaction could never overshadow it"
        )
    return version


def read_input_table(deep_storage: DeepStorage, visible: VisibleSegment, work_dir: Path) -> pa.Table:
    """One input segment's rows inside its visible clip, ``__time`` as int64 millis."""
    table = read_stored_segment(deep_storage, visible.segment, work_dir)
    t = table.column(TIME_COLUMN)
    millis = (
        t.cast(pa.timestamp("ms")).cast(pa.int64()) if pa.types.is_timestamp(t.type) else t.cast(pa.int64())
    )
    table = table.set_column(table.schema.get_field_index(TIME_COLUMN), TIME_COLUMN, millis)
    clip = visible.interval
    mask = pc.and_(pc.greater_equal(millis, clip.start), pc.less(millis, clip.end))
    return table.filter(mask)


def conform(
    table: pa.Table, dimensions: Sequence[tuple[str, str]], metric_specs: Sequence[MetricSpec]
) -> pa.Table:
    """``table`` with exactly ``__time``, the dimensions and the metric columns, in that order and
    type (missing columns as nulls)."""
    n = table.num_rows
    cols: dict[str, pa.Array | pa.ChunkedArray] = {TIME_COLUMN: table.column(TIME_COLUMN).cast(pa.int64())}
    for name, typ in dimensions:
        target = arrow_type(typ)
        if name in table.column_names:
            col = table.column(name)
            if pa.types.is_dictionary(col.type):
                col = col.cast(col.type.value_type)
            cols[name] = col.cast(target)
        else:
            cols[name] = pa.nulls(n, target)
    for m in metric_specs:
        target = arrow_type(m.value_type)
        cols[m.name] = (
            table.column(m.name).cast(target) if m.name in table.column_names else pa.nulls(n, target)
        )
    return pa.table(cols)


def metric_totals(table: pa.Table, metric_specs: Sequence[MetricSpec]) -> dict[str, Any]:
    """Per metric: the sum (count and sums) or the min/max over all rows."""
    out: dict[str, Any] = {}
    for m in metric_specs:
        if m.name not in table.column_names or m.sketch is not None:  # sketches have no total to compare
            out[m.name] = None
            continue
        col = table.column(m.name)
        kind = "sum" if m.kind in ("sum", "count") else m.kind
        out[m.name] = {"sum": pc.sum, "min": pc.min, "max": pc.max}[kind](col).as_py()
    return out


def totals_equal(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    for k in a:
        x, y = a[k], b.get(k)
        if x is None or y is None:
            if (x or 0) != (y or 0):
                return False
        elif isinstance(x, float) or isinstance(y, float):
            if abs(x - y) > 1e-9 * max(1.0, abs(x), abs(y)):
                return False
        elif x != y:
            return False
    return True


def _delete_written(deep_storage: DeepStorage, segments: Sequence[DataSegment]) -> None:
    for seg in segments:
        try:
            key = deep_storage.key_for_load_spec(seg.load_spec)
            deep_storage.delete_prefix(key.rsplit("/", 1)[0] + "/")
        except Exception:  # noqa: BLE001 - the orphan-file collection is the backstop
            log.warning("could not delete files of unpublished compaction output %s", seg.identifier)


def _output_table(deep_storage: DeepStorage, segments: Sequence[DataSegment], work_dir: Path) -> pa.Table:
    tables = [read_input_table(deep_storage, VisibleSegment(s, s.interval), work_dir) for s in segments]
    return pa.concat_tables(tables, promote_options="permissive") if tables else pa.table({})


def run_compaction(
    metadata: MetadataStore,
    deep_storage: DeepStorage,
    plan: CompactionPlan,
    config: CompactionConfig,
    *,
    settings: Settings | None = None,
    runner: str = "inprocess",
    now_ms: int | None = None,
    spark: Any = None,
    spark_compactor: SparkCompactor | None = None,
) -> CompactionResult:
    """Compact one planned interval and publish the result (see the module docstring)."""
    if runner not in ("inprocess", "spark"):
        raise CompactionError(f"runner must be 'inprocess' or 'spark', not {runner!r}")
    started = time.perf_counter()
    now = now_millis() if now_ms is None else now_ms
    version = new_version(metadata, plan.data_source, now)
    input_segments = [v.segment for v in plan.inputs]
    metric_specs = resolve_metrics(config, settings, input_segments)
    spec = catalog_spec(settings, plan.data_source)
    rollup = plan.tier.rollup if plan.tier.rollup is not None else (spec.data_schema.rollup if spec else True)
    tmp_parent = None
    if settings is not None:
        tmp_parent = Path(settings.home) / "tmp"
        tmp_parent.mkdir(parents=True, exist_ok=True)
    written: list[DataSegment] = []
    try:
        with tempfile.TemporaryDirectory(prefix="radstack-compact-", dir=tmp_parent) as tmp:
            work = Path(tmp)
            if runner == "inprocess":
                written, schema, rows_in, totals_in = _compact_in_process(
                    deep_storage, plan, config, settings, metric_specs, rollup, version, work)
            else:
                if spark_compactor is None:
                    raise CompactionError("the Spark compaction runner is not available in this process")
                job = spark_compactor(plan, config, metric_specs, deep_storage=deep_storage, settings=settings,
                                      version=version, rollup=rollup, spark=spark)
                written, schema, rows_in, totals_in = job.segments, job.schema, job.rows_in, job.totals_in
            totals_out = _checked_output(deep_storage, plan, written, schema, totals_in, work)
        state = compaction_state(schema, config.max_rows_per_segment)
        written = [replace(s, last_compaction_state=state) for s in written]
        _check_unchanged(metadata, plan)

        publish(metadata, deep_storage, written)
    except BaseException:
        _delete_written(deep_storage, written)
        metrics.COMPACTION_INTERVALS.labels(plan.data_source, "failed").inc()
        raise
    rows_out = sum(s.num_rows for s in written)
    metrics.COMPACTION_INTERVALS.labels(plan.data_source, "success").inc()
    metrics.COMPACTION_ROWS_IN.labels(plan.data_source).inc(rows_in)
    metrics.COMPACTION_ROWS_OUT.labels(plan.data_source).inc(rows_out)
    metrics.COMPACTION_SECONDS.labels(runner).observe(time.perf_counter() - started)
    log.info("compacted %s %s: %d → %d rows in %d segment(s), version %s (%s)", plan.data_source,
             plan.interval.iso(), rows_in, rows_out, len(written), version, runner)
    return CompactionResult(
        plan, version, written, rows_in, rows_out, runner, {"in": totals_in, "out": totals_out}
    )


def _compact_in_process(deep_storage: DeepStorage, plan: CompactionPlan, config: CompactionConfig,
                        settings: Settings | None, metric_specs: Any, rollup: bool, version: str,
                        work: Path) -> tuple[list[DataSegment], Any, int, Any]:
    """The inputs read into Arrow and indexed here: (segments written, schema, rows in, metric totals in)."""
    tables = [read_input_table(deep_storage, v, work) for v in plan.inputs]
    types: dict[str, pa.Field] = {}
    for t in tables:
        for f in t.schema:
            types.setdefault(f.name, f)
    dims = resolve_dimensions(config, settings, [v.segment for v in plan.inputs], types)
    schema = compaction_schema(config, plan.tier, metric_specs, dims, rollup=rollup, settings=settings)
    data = pa.concat_tables([conform(t, dims, metric_specs) for t in tables]) if tables else None
    if data is None or data.num_rows == 0:
        raise CompactionError(f"{plan.data_source} {plan.interval.iso()}: no rows to compact")
    result = index_partition(data, schema, version=version, deep_storage=deep_storage, shard="core",
                             max_rows_per_segment=config.max_rows_per_segment, work_dir=work)
    return list(result.segments), schema, data.num_rows, metric_totals(data, metric_specs)


def _checked_output(deep_storage: DeepStorage, plan: CompactionPlan, written: list[DataSegment], schema: Any,
                    totals_in: Any, work: Path) -> Any:
    """The output's metric totals, once it is known to be whole: some segments, all inside the interval,
    the same totals as the input (else nothing is published)."""
    if not written:
        raise CompactionError(f"{plan.data_source} {plan.interval.iso()}: compaction produced no segments")
    bad = [s for s in written if not plan.interval.contains(s.interval)]
    if bad:
        raise CompactionError(f"compaction output {bad[0].identifier} falls outside {plan.interval.iso()}")
    totals_out = metric_totals(_output_table(deep_storage, written, work), schema.metrics)
    if not totals_equal(totals_in, totals_out):
        raise CompactionError(f"{plan.data_source} {plan.interval.iso()}: metric totals changed "
                              f"({totals_in} → {totals_out}); nothing was published")
    return totals_out


def _check_unchanged(metadata: MetadataStore, plan: CompactionPlan) -> None:
    used = metadata.segments(plan.data_source, used=True, interval=plan.interval)
    tl = VersionedIntervalTimeline.from_segments(used, plan.data_source)
    now_ids = tuple(
        sorted({s.identifier for h in tl.lookup(plan.interval) if h.has_data for s in h.data_segments})
    )
    if now_ids != plan.input_ids:
        raise CompactionConflictError(
            f"{plan.data_source} {plan.interval.iso()}: its segments changed while compacting; nothing was published"
        )


def choose_runner(
    settings: Settings, plan: CompactionPlan, requested: str | None = None, *, spark_available: bool = True
) -> str:
    """``inprocess`` or ``spark``: the request, else ``coordinator.compaction.runner``; ``auto`` sends
    intervals of at least ``spark_min_rows`` input rows to Spark when this process has a Spark runner."""
    runner = (requested or (settings.coordinator.compaction.runner if settings else "auto")) or "auto"
    if runner == "auto":
        threshold = int(settings.coordinator.compaction.spark_min_rows if settings else 2_000_000)
        return "spark" if spark_available and plan.input_rows >= threshold else "inprocess"
    return str(runner)


def compact_datasource(
    metadata: MetadataStore,
    deep_storage: DeepStorage,
    config: CompactionConfig,
    *,
    settings: Settings | None = None,
    now_ms: int | None = None,
    dry_run: bool = False,
    runner: str | None = None,
    max_intervals: int | None = None,
    interval: Interval | None = None,
    spark_compactor: SparkCompactor | None = None,
    plans: list[CompactionPlan] | None = None,
) -> tuple[list[CompactionPlan], list[CompactionResult], list[str]]:
    """Plan and (unless ``dry_run``) run compaction for one datasource. Returns (plans, results, errors).
    ``plans``: what a dry run of the same pass planned (not planned again)."""
    now = now_millis() if now_ms is None else now_ms
    if plans is None:
        segments = metadata.segments(config.data_source, used=True)
        plans = plan_compaction(
            segments, config, now_ms=now, window_period=window_period_of(settings, config.data_source)
        )
        if interval is not None:
            plans = [p for p in plans if interval.overlaps(p.interval)]
        metrics.COMPACTION_PENDING.labels(config.data_source).set(len(plans))
    if dry_run:
        return plans, [], []
    results: list[CompactionResult] = []
    errors: list[str] = []
    for plan in plans[: max_intervals if max_intervals is not None else len(plans)]:
        try:
            results.append(
                run_compaction(
                    metadata,
                    deep_storage,
                    plan,
                    config,
                    settings=settings,
                    spark_compactor=spark_compactor,
                    runner=choose_runner(settings, plan, runner, spark_available=spark_compactor is not None),
                )
            )
        except CompactionError as e:
            errors.append(str(e))
            log.error("compaction of %s %s failed: %s", plan.data_source, plan.interval.iso(), e)
    metrics.COMPACTION_PENDING.labels(config.data_source).set(max(0, len(plans) - len(results)))
    return plans, results, errors
