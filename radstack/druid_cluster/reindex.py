"""After a rebuild: the same chunks re-indexed in the Druid cluster, until Druid's broker serves them.

:func:`reindex` is the step every rebuild path ends with for a datasource ``druid.datasources`` names —
``radctl backfill`` (after its publish), the Airflow DAG (its ``druid`` task, between ``rebuild`` and
``verify``), the console's backfill and the task API's rebuild tasks (the same local runner):

1. the files: the segments radstack now serves for the chunks (its timeline's visible ones: the new batch
   version), as Parquet (``druid.parquet_input``) or the gzip JSON lines the batch job wrote beside them
   (:mod:`radstack.druid_cluster.json_export`; any that are missing — segments compacted since — are
   written first);
2. Druid's answer before (its real-time segments from the supervisor), per chunk;
3. an ``index_parallel`` task over those files with ``dropExisting`` (:func:`~radstack.druid_cluster.specs.
   index_parallel_spec`): Druid gives the chunks a new version that overshadows what it had. The task id is
   fixed by the datasource, the chunks and radstack's version, and the answer before travels in the task's
   context, so a retry (a DAG retry after Druid failed mid-way) finds the task it already submitted instead
   of indexing twice, and measures against the answer before the first try;
4. the wait until the broker serves the new version: every used segment Druid's coordinator lists for the
   chunks in the newest version is available on the broker (``sys.segments``) — a historical that is down
   makes this wait, not fail, until ``druid.reindex_timeout_seconds``;
5. Druid's answer after, recorded as correction rows (``served_by = "druid"``, ``sys.corrections``).

It never touches radstack's own timeline: a Druid that is down fails this step (the DAG retries it), never
the rebuild before it. A failed re-index is also remembered (:data:`PENDING_KEY`) and tried again by the
server's ``druid_sync`` duty (:func:`retry_pending`) until Druid takes it, so a rebuild whose caller gave up
still reaches Druid. Each re-index is a task record of its own (``druid_reindex``: ``sys.tasks``, the
console's Tasks view and its log).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from radstack.config import Settings
from radstack.druid_cluster.json_export import JSON_FILE, ensure_json_lines
from radstack.druid_cluster.specs import (
    DruidSpecError,
    SegmentFiles,
    chunk_interval,
    index_parallel_spec,
    input_source_for,
    visible_segment_files,
)
from radstack.druid_cluster.submit import DruidApiError, OverlordClient, TaskFailedError, druid_client
from radstack.spec import DatasourceSpec
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore
from radstack.storage.metadata.tables import CorrectionRow
from radstack.storage.task_records import TaskRecord
from radstack.storage.timeline import VersionedIntervalTimeline
from radstack.time.intervals import Interval, format_instant, parse_instant
from radstack.user_errors import UserError

log = logging.getLogger(__name__)

__all__ = ["TASK_TYPE", "PENDING_KEY", "DruidReindexError", "ChunkAnswer", "ReindexResult", "druid_answer",
           "reindex", "radstack_version", "pending_reindexes", "retry_pending", "druid_problems"]

TASK_TYPE = "druid_reindex"
#: radstack state key: datasource → intervals whose re-index failed and is still to do
PENDING_KEY = "druid.pending_reindex"
#: tasks one re-index may submit for the same chunks and version (each retry after a FAILED one adds one)
MAX_ATTEMPTS = 20
#: metric types whose sum is the datasource's answer (what corrections compare)
SUMMED = {"count": "longSum", "longSum": "longSum", "doubleSum": "doubleSum", "floatSum": "doubleSum"}


class DruidReindexError(RuntimeError, UserError):
    """The Druid cluster did not take the rebuilt chunks (radstack's own timeline already has them)."""


@dataclass(frozen=True)
class ChunkAnswer:
    events: int
    metrics: dict[str, float]
    version: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"events": self.events, "metrics": self.metrics, "version": self.version}


@dataclass
class ReindexResult:
    datasource: str
    interval: Interval  # whole chunks
    task_id: str
    druid_version: str
    before: dict[int, ChunkAnswer]
    after: dict[int, ChunkAnswer]
    seconds: float
    stages: dict[str, float] = field(default_factory=dict)
    resumed: bool = False  # the task was already submitted by an earlier try

    def to_json(self) -> dict[str, Any]:
        def answers(a: dict[int, ChunkAnswer]) -> dict[str, Any]:
            return {format_instant(k): v.to_json() for k, v in sorted(a.items())}
        return {"datasource": self.datasource, "interval": self.interval.iso(), "task": self.task_id,
                "druidVersion": self.druid_version, "seconds": round(self.seconds, 2),
                "stages": {k: round(v, 2) for k, v in self.stages.items()}, "resumed": self.resumed,
                "before": answers(self.before), "after": answers(self.after)}


def _count_metric(spec: DatasourceSpec) -> str | None:
    return next((m.name for m in spec.data_schema.metrics if m.type == "count"), None)


def druid_answer(client: OverlordClient, spec: DatasourceSpec, interval: Interval) -> dict[int, ChunkAnswer]:
    """Druid's answer per segment-granularity chunk of ``interval``: events (the sum of the count metric, or
    rows without one) and the sum of each summed metric; chunks without rows are left out."""
    aggs: list[dict[str, Any]] = [{"type": "count", "name": "__rows"}]
    for m in spec.data_schema.metrics:
        if m.type in SUMMED:
            aggs.append({"type": SUMMED[m.type], "name": m.name, "fieldName": m.name})
    query = {"queryType": "timeseries", "dataSource": spec.name, "intervals": [interval.iso()],
             "granularity": spec.data_schema.segment_granularity.to_json(), "aggregations": aggs,
             "context": {"skipEmptyBuckets": True, "useCache": False, "populateCache": False}}
    rows = client.native(query)  # a datasource Druid does not know yet answers []
    count = _count_metric(spec)
    out: dict[int, ChunkAnswer] = {}
    for r in rows if isinstance(rows, list) else []:
        res = dict(r.get("result") or {})
        if not res.get("__rows"):
            continue
        metrics = {k: float(v) for k, v in res.items() if k != "__rows" and v is not None}
        out[parse_instant(str(r["timestamp"]))] = ChunkAnswer(
            int(res[count] if count else res["__rows"]), metrics)
    return out


def radstack_version(md: MetadataStore, spec: DatasourceSpec, chunks: Interval) -> str:
    """The newest version radstack serves in ``chunks`` (what the re-index follows)."""
    timeline = VersionedIntervalTimeline.from_segments(md.segments(spec.name, interval=chunks))
    return max((v.segment.version for v in timeline.visible_segments(chunks)), default="")


def _task_id(spec: DatasourceSpec, chunks: Interval, version: str, attempt: int) -> str:
    raw = f"radstack_reindex_{spec.name}_{format_instant(chunks.start)}_{format_instant(chunks.end)}_{version}"
    base = re.sub(r"[^A-Za-z0-9_.:-]", "_", raw)
    return base if attempt == 1 else f"{base}_try{attempt}"


def _input(settings: Settings, md: MetadataStore, storage: DeepStorage, spec: DatasourceSpec,
           chunks: Interval) -> tuple[dict[str, Any], dict[str, Any]]:
    """The input source and format of the re-index: the visible files, or an empty inline input when the
    chunks hold only tombstones (Druid then drops what it had, as radstack did)."""
    segments = md.segments(spec.name, interval=chunks)
    try:
        files = visible_segment_files(segments, chunks, settings.deep_storage)
    except DruidSpecError as e:
        if "no segment files are visible" not in str(e):
            raise
        return {"type": "inline", "data": ""}, {"type": "json"}
    if settings.druid.parquet_input:
        return input_source_for(files), {"type": "parquet", "binaryAsString": True}
    timeline = VersionedIntervalTimeline.from_segments(segments)
    ensure_json_lines(storage, {v.segment.identifier: v.segment for v in timeline.visible_segments(chunks)}.values())
    beside = SegmentFiles(files.storage, tuple(loc.rsplit("/", 1)[0] + "/" + JSON_FILE for loc in files.locations))
    return input_source_for(beside), {"type": "json"}


def _newest_segments(client: OverlordClient, spec: DatasourceSpec, chunks: Interval) -> tuple[str, set[str]]:
    """Druid's newest version in ``chunks`` and the ids of its segments there (the coordinator's metadata)."""
    rows = [s for s in client.used_segments(spec.name)
            if Interval.parse(str(s["interval"])).overlaps(chunks)]
    if not rows:
        return "", set()
    newest = max(str(s["version"]) for s in rows)
    return newest, {str(s["identifier"]) for s in rows if str(s["version"]) == newest}


def _newer_segments(client: OverlordClient, spec: DatasourceSpec, chunks: Interval, floor: str,
                    deadline: float) -> tuple[str, set[str]]:
    """:func:`_newest_segments` once the newest version is newer than ``floor`` (empty when the deadline
    passes first)."""
    while True:
        version, ids = _newest_segments(client, spec, chunks)
        if ids and version > floor:
            return version, ids
        if time.monotonic() > deadline:
            return "", set()
        time.sleep(0.5)


def _served_ids(client: OverlordClient, spec: DatasourceSpec, version: str) -> set[str]:
    """The segments of ``version`` Druid's broker serves (``sys.segments``, ``is_available``)."""
    rows = client.sql("SELECT segment_id FROM sys.segments WHERE datasource = ? AND version = ? AND is_available = 1",
                      [{"type": "VARCHAR", "value": spec.name}, {"type": "VARCHAR", "value": version}])
    return {str(r["segment_id"]) for r in rows}


def _attempts(client: OverlordClient, spec: DatasourceSpec, chunks: Interval,
              version: str) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """The re-index task ids of this version in order, each with its payload in Druid (None: not submitted)."""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        task_id = _task_id(spec, chunks, version, attempt)
        yield task_id, client.task_payload(task_id)


def _wait_served(client: OverlordClient, spec: DatasourceSpec, chunks: Interval, version: str, ids: set[str],
                 deadline: float, note: Callable[[str], None]) -> None:
    """Until every segment of ``version`` in the chunks is available on Druid's broker."""
    said = ""
    while True:
        try:
            missing = ids - _served_ids(client, spec, version)
            state = f"{len(ids) - len(missing)} of {len(ids)} segment(s) of version {version} served"
        except DruidApiError as e:  # the broker restarting, or no historical: wait, do not fail
            missing, state = ids, f"Druid's broker did not answer ({e})"
        if not missing:
            note(state)
            return
        if state != said:
            note(state)
            said = state
        if time.monotonic() > deadline:
            raise DruidReindexError(f"{spec.name}: Druid's broker did not serve version {version} of "
                                    f"{chunks.iso()} in time ({state})")
        time.sleep(1.0)


T = TypeVar("T")


def _patiently(what: str, call: Callable[[], T], deadline: float, say: Callable[[str], None]) -> T:
    """``call()``, again while Druid answers 5xx or not at all (a broker whose connections to a historical
    that was restarted are stale, a service coming back), until ``deadline``; a 4xx is raised at once."""
    said = False
    while True:
        try:
            return call()
        except DruidApiError as e:
            if (e.status_code is not None and e.status_code < 500) or time.monotonic() > deadline:
                raise
            if not said:
                say(f"{what}: Druid answered {e}; trying again")
                said = True
        time.sleep(2.0)


def _corrections(spec: DatasourceSpec, chunks: Interval, before: Mapping[int, ChunkAnswer],
                 after: Mapping[int, ChunkAnswer], version: str) -> list[CorrectionRow]:
    gran = spec.data_schema.segment_granularity
    out = []
    for start in sorted(set(before) | set(after)):
        b, a = before.get(start), after.get(start)
        out.append(CorrectionRow(
            datasource=spec.name, start=start, end=gran.next_start(start) if not gran.is_all else chunks.end,
            version=version, realtime_version=b.version if b else "", realtime_events=b.events if b else 0,
            batch_events=a.events if a else 0, realtime_metrics=dict(b.metrics) if b else {},
            batch_metrics=dict(a.metrics) if a else {}, served_by="druid"))
    return out


def _answers_json(answers: Mapping[int, ChunkAnswer]) -> dict[str, Any]:
    return {str(k): v.to_json() for k, v in answers.items()}


def _answers_from_json(raw: Mapping[str, Any]) -> dict[int, ChunkAnswer]:
    return {int(k): ChunkAnswer(int(v["events"]), {m: float(x) for m, x in v["metrics"].items()}, str(v["version"]))
            for k, v in raw.items()}


def reindex(settings: Settings, md: MetadataStore, storage: DeepStorage, spec: DatasourceSpec, interval: Interval,
            *, started_by: str = "radstack", note: Callable[[str], None] | None = None) -> ReindexResult:
    """Re-index ``interval`` (widened to whole chunks) of ``spec`` in the Druid cluster from what radstack
    serves there now; returns once Druid's broker serves the new version. Raises :class:`DruidReindexError`."""
    t0 = time.monotonic()
    stages: dict[str, float] = {}
    chunks = chunk_interval(spec, interval)
    deadline = t0 + float(settings.druid.reindex_timeout_seconds)
    version = radstack_version(md, spec, chunks)
    record = TaskRecord(settings, md, task_type=TASK_TYPE, datasource=spec.name, started_by=started_by,
                        payload={"interval": chunks.iso(), "radstackVersion": version,
                                 "overlord": settings.druid.overlord_url})

    def say(text: str) -> None:
        record.line(text)
        log.info("%s %s: %s", spec.name, chunks.iso(), text)
        if note is not None:
            note(text)

    try:
        with druid_client(settings.druid) as client:
            result = _reindex(settings, md, storage, spec, chunks, version, client, deadline, stages, say)
    except BaseException as e:  # the task never stays RUNNING, and the interval is left for a retry
        druid = isinstance(e, DruidApiError | TaskFailedError | TimeoutError | DruidSpecError | DruidReindexError)
        err: BaseException = e
        if druid and not isinstance(e, DruidReindexError):
            err = DruidReindexError(f"{spec.name} {chunks.iso()}: {e}")
        record.failure(err)
        record.finish(False, str(err) if druid else f"{type(e).__name__}: {e}", {"interval": chunks.iso()})
        _set_pending(md, spec.name, chunks, pending=True)
        if err is e:
            raise
        raise err from e
    _set_pending(md, spec.name, chunks, pending=False)
    result.seconds = time.monotonic() - t0
    say(f"SUCCESS: Druid serves version {result.druid_version} of {chunks.iso()} ({result.seconds:.1f} s)")
    record.finish(True, None, result.to_json())
    return result


def _reindex(settings: Settings, md: MetadataStore, storage: DeepStorage, spec: DatasourceSpec, chunks: Interval,
             version: str, client: OverlordClient, deadline: float, stages: dict[str, float],
             say: Callable[[str], None]) -> ReindexResult:
    lap = time.monotonic()

    def stage(name: str) -> None:
        nonlocal lap
        now = time.monotonic()
        stages[name] = stages.get(name, 0.0) + now - lap
        lap = now

    # a task this version already has in Druid: resume it; after a FAILED one, submit the next attempt with
    # the answer before that the first attempt measured (Druid may have been half-way since)
    task_id, payload, earlier = "", None, None
    for task_id, payload in _attempts(client, spec, chunks, version):
        if payload is None:
            break
        status = client.task_status(task_id)
        if status.status != "FAILED":
            break
        say(f"task {task_id} FAILED earlier ({status.error_msg or 'no message'}): submitting another")
        earlier = earlier or (payload.get("context") or {}).get("radstackBefore")
        payload = None
    else:
        raise DruidReindexError(f"{spec.name} {chunks.iso()}: {MAX_ATTEMPTS} re-index tasks failed; see Druid's task logs")
    resumed = payload is not None
    if resumed:
        before = _answers_from_json((payload.get("context") or {}).get("radstackBefore") or {})
        say(f"resuming task {task_id} submitted by an earlier try")
    else:
        if earlier is not None:
            before = _answers_from_json(earlier)
        else:
            druid_version, _ = _patiently("Druid's versions", lambda: _newest_segments(client, spec, chunks), deadline, say)
            before = {k: ChunkAnswer(v.events, v.metrics, druid_version) for k, v in _patiently(
                "Druid's answer before", lambda: druid_answer(client, spec, chunks), deadline, say).items()}
        stage("answer_before")
        source, fmt = _input(settings, md, storage, spec, chunks)
        stage("input")
        task = index_parallel_spec(spec, chunks, source, input_format=fmt, task_id=task_id,
                                   context={"radstackBefore": _answers_json(before), "radstackVersion": version})
        client.submit_task(task)
        files = len(source.get("files") or source.get("paths") or source.get("uris") or [])
        say(f"submitted {task_id}: {files} file(s) ({fmt['type']}) of radstack's version {version}")
    st = client.wait_for_task(task_id, timeout_s=max(1.0, deadline - time.monotonic()), poll_s=1.0,
                              on_status=lambda s: say(f"task {s.status}"
                                                      + (f" ({s.runner_status})" if s.runner_status else "")))
    stage("task")
    # the coordinator lists the task's segments once it has polled the metadata store: until then its
    # newest version is still the one before (or none)
    floor = max((b.version for b in before.values()), default="")
    druid_version, ids = _patiently("Druid's versions", lambda: _newer_segments(client, spec, chunks, floor, deadline),
                                    deadline, say)
    if not ids:
        raise DruidReindexError(f"{spec.name}: task {st.id} succeeded but Druid's coordinator lists no newer "
                                f"version than {floor or 'none'} in {chunks.iso()} in time")
    _wait_served(client, spec, chunks, druid_version, ids, deadline, say)
    stage("load")
    after = _patiently("Druid's answer after", lambda: druid_answer(client, spec, chunks), deadline, say)
    stage("answer_after")
    recorded = {(c.start, c.version) for c in md.corrections(spec.name) if c.served_by == "druid"}
    rows = [c for c in _corrections(spec, chunks, before, after, druid_version) if (c.start, c.version) not in recorded]
    md.record_corrections(rows)
    gap = sum(a.events for a in after.values()) - sum(b.events for b in before.values())
    say(f"Druid's answer: {sum(b.events for b in before.values()):,} events before, "
        f"{sum(a.events for a in after.values()):,} after ({gap:+,})")
    return ReindexResult(spec.name, chunks, task_id, druid_version, before, after, 0.0, stages, resumed)


def druid_problems(settings: Settings, md: MetadataStore, spec: DatasourceSpec, interval: Interval) -> list[str]:
    """What is wrong with Druid's side of ``interval`` (empty: nothing): a re-index of the version radstack
    serves there succeeded, and every segment of Druid's newest version there is served by its broker."""
    chunks = chunk_interval(spec, interval)
    version = radstack_version(md, spec, chunks)
    problems = []
    with druid_client(settings.druid) as client:
        done = False
        for task_id, payload in _attempts(client, spec, chunks, version):
            if payload is None:
                break
            done = done or client.task_status(task_id).ok
        if not done:
            problems.append(f"Druid: no successful re-index of radstack's version {version} of {chunks.iso()}")
        druid_version, ids = _newest_segments(client, spec, chunks)
        missing = ids - _served_ids(client, spec, druid_version)
        if missing:
            problems.append(f"Druid: {len(missing)} segment(s) of version {druid_version} not served by its broker")
    return problems


def _set_pending(md: MetadataStore, datasource: str, chunks: Interval, *, pending: bool) -> None:
    state: dict[str, list[str]] = dict(md.get_state(PENDING_KEY, {}) or {})
    left = [iv for iv in state.get(datasource, []) if not chunks.contains(Interval.parse(iv))]
    if pending:
        left.append(chunks.iso())
    if left:
        state[datasource] = left
    else:
        state.pop(datasource, None)
    md.put_state(PENDING_KEY, state)


def pending_reindexes(md: MetadataStore) -> dict[str, list[Interval]]:
    """The re-indexes that failed and are still to do, per datasource."""
    return {ds: [Interval.parse(iv) for iv in ivs] for ds, ivs in (md.get_state(PENDING_KEY, {}) or {}).items()}


def retry_pending(settings: Settings, md: MetadataStore, storage: DeepStorage,
                  specs: Mapping[str, DatasourceSpec]) -> list[str]:
    """Try every pending re-index once more (oldest first); what happened, one line each."""
    out = []
    for ds, intervals in pending_reindexes(md).items():
        spec = specs.get(ds)
        if spec is None or not settings.druid.serves(ds):
            for iv in intervals:
                _set_pending(md, ds, iv, pending=False)
            continue
        for iv in intervals:
            try:
                res = reindex(settings, md, storage, spec, iv, started_by="druid_sync (a retry)")
                out.append(f"{ds} {iv.iso()}: Druid serves version {res.druid_version}")
            except DruidReindexError as e:
                out.append(f"{ds} {iv.iso()}: still failing: {e}")
                break  # the next pass tries again; the later intervals wait behind this one
    return out
