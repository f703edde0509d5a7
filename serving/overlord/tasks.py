"""The task runner: native batch index tasks in background threads inside the server.

At most ``tasks.max_running`` tasks run at once; the rest wait in a FIFO queue (Druid's
``runnerStatusCode`` ``WAITING``). Tasks of one datasource run one after another (Druid's time-chunk
locks, simplified), so versions and appended partition numbers never race. A task never takes the
server down: every exception ends it as ``FAILED`` with an ``errorMsg``.

One index task: resolve the input source → parse each entity into Arrow batches, spilled to local
Parquet (:mod:`serving.overlord.staging`) → :func:`radstack.storage.indexer.index_partition` → publish the
segments in one metadata transaction. The segment version is the task's start time (raised above
any existing version of the datasource so an overwrite always wins). ``appendToExisting: true``
instead adds partitions (``numbered``, ``partitions = 0``) to the newest used version of each time
chunk, numbered after its highest partition. A shutdown (or a failure, or too many parse
exceptions) before the publish deletes the files already written: nothing is published.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import replace

import pyarrow as pa

from radstack.config import Settings
from radstack.private_files import private_dir
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.indexer import index_partition
from radstack.storage.ingest_stats import AllRowsUnparseable, IngestStats, MaxParseExceptionsExceeded
from radstack.storage.metadata import MetadataStore
from radstack.storage.publish import publish
from radstack.storage.segments import DataSegment, ShardSpec, segment_path
from radstack.time.clock import now_millis
from radstack.time.intervals import Interval, format_instant, parse_instant
from serving.jobs import BatchJobs
from serving.overlord.cancel import TaskCancelled
from serving.overlord.input_formats import ReadCancelled, read_batches
from serving.overlord.input_sources import resolve_input_source
from serving.overlord.reports import ingestion_report
from serving.overlord.spark_tasks import run_spark_task, runs_on_spark
from serving.overlord.staging import StagedInput
from serving.overlord.task_spec import IndexTaskSpec
from serving.overlord.task_state import TaskState

log = logging.getLogger(__name__)

SHUTDOWN_MSG = "Shutdown request from user"


class AppendError(RuntimeError):
    """appendToExisting cannot place the new data next to the existing segments."""



class TaskRunner:
    """Runs submitted index tasks on ``max_running`` worker threads."""

    def __init__(self, settings: Settings, metadata: MetadataStore, deep_storage: DeepStorage, *, max_running: int | None = None,
                 jobs: BatchJobs | None = None) -> None:
        self.settings = settings
        self.jobs = jobs or BatchJobs()
        self.metadata = metadata
        self.deep_storage = deep_storage
        self.max_running = max(1, int(max_running or settings.tasks.max_running or 1))
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._active: dict[str, TaskState] = {}
        self._lock = threading.Lock()
        self._ds_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        self._workers: list[threading.Thread] = []
        self._stopping = threading.Event()

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        self.fail_orphaned_tasks()
        self._stopping.clear()
        for i in range(self.max_running):
            t = threading.Thread(target=self._work, name=f"radstack-task-{i}", daemon=True)
            t.start()
            self._workers.append(t)

    def stop(self, timeout: float = 30.0) -> None:
        """Shut down every active task, then stop the workers."""
        self._stopping.set()
        with self._lock:
            states = list(self._active.values())
        for st in states:
            st.cancel.set()
        for _ in self._workers:
            self._queue.put(None)
        deadline = time.monotonic() + timeout
        for t in self._workers:
            t.join(max(0.0, deadline - time.monotonic()))
        self._workers.clear()
        # queued tasks that never started
        with self._lock:
            leftovers = list(self._active.values())
            self._active.clear()
        for st in leftovers:
            self._finish(st, "FAILED", SHUTDOWN_MSG)

    def fail_orphaned_tasks(self) -> None:
        """Tasks left RUNNING by a previous server process cannot resume: mark them FAILED."""
        for row in self.metadata.list_tasks(state="running"):
            if row.id not in self._active:
                with contextlib.suppress(KeyError):
                    self.metadata.update_task(row.id, status="FAILED", duration_ms=-1,
                                              error_msg="The server stopped while the task was running")

    # -- API ---------------------------------------------------------------------------------------

    def submit(self, spec: IndexTaskSpec) -> str:
        if self._stopping.is_set():
            raise RuntimeError("the task runner is stopping")
        state = TaskState(spec, IngestStats(max_parse_exceptions=spec.max_parse_exceptions,
                                            max_samples=spec.max_saved_parse_exceptions),
                          created_ms=now_millis())
        self.metadata.insert_task(spec.id, type=spec.type, datasource=spec.data_source,
                                  payload=spec.payload, status="RUNNING")
        with self._lock:
            self._active[spec.id] = state
        self._queue.put(spec.id)
        return spec.id

    def get(self, task_id: str) -> TaskState | None:
        with self._lock:
            return self._active.get(task_id)

    def active_ids(self) -> list[str]:
        with self._lock:
            return list(self._active)

    def is_busy(self) -> bool:
        with self._lock:
            return bool(self._active)

    def shutdown(self, task_id: str) -> bool:
        """Ask an active task to stop; False when it is not active."""
        state = self.get(task_id)
        if state is None:
            return False
        state.cancel.set()
        return True

    # -- workers -----------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            task_id = self._queue.get()
            if task_id is None:
                return
            state = self.get(task_id)
            if state is None:
                continue
            if state.cancel.is_set():
                self._finish(state, "FAILED", SHUTDOWN_MSG)
                continue
            lock = self._ds_locks[state.spec.data_source]
            acquired = False
            while not state.cancel.is_set():
                if lock.acquire(timeout=0.2):
                    acquired = True
                    break
            if not acquired:
                self._finish(state, "FAILED", SHUTDOWN_MSG)
                continue
            try:
                self._run(state)
            finally:
                lock.release()

    def _run(self, state: TaskState) -> None:
        state.runner_status = "RUNNING"
        state.started_ms = now_millis()
        state.ingestion_state = "BUILD_SEGMENTS"
        status, error, published = "FAILED", None, None
        try:
            run = getattr(state.spec, "run", None)  # compact / kill tasks (serving/overlord/compact_task.py, kill_task.py)
            module = self.jobs.spark_task_module
            if not callable(run) and module and runs_on_spark(state.spec, self.settings):
                # large or remote inputs (archive, hdfs, s3) run as a Spark job of the batch layer
                run = functools.partial(run_spark_task, module=module)
            published = run(self, state) if callable(run) else IndexTaskRun(self, state).execute()
            status = "SUCCESS"
        except (TaskCancelled, ReadCancelled):
            error = SHUTDOWN_MSG
        except (MaxParseExceptionsExceeded, AllRowsUnparseable) as e:
            error = str(e)
        except Exception as e:  # noqa: BLE001 - a task never takes the server down
            log.exception("task %s failed", state.spec.id)
            error = f"{type(e).__name__}: {e}"[:1000]
        self._finish(state, status, error, published)

    def _finish(self, state: TaskState, status: str, error: str | None, published: int | None = None) -> None:
        state.ingestion_state = "COMPLETED"
        start = state.started_ms or state.created_ms
        report = ingestion_report(state.spec.id, state.stats, state="COMPLETED", error_msg=error,
                                  segments_published=published)
        try:
            self.metadata.update_task(state.spec.id, status=status, duration_ms=max(0, now_millis() - start),
                                      error_msg=error, report=report)
        except Exception:  # noqa: BLE001
            log.exception("could not record the status of task %s", state.spec.id)
        with self._lock:
            self._active.pop(state.spec.id, None)


class IndexTaskRun:
    """One execution of a native batch index task."""

    def __init__(self, runner: TaskRunner, state: TaskState) -> None:
        self.runner = runner
        self.state = state
        self.spec = state.spec
        self.stats = state.stats
        self.deep_storage = runner.deep_storage
        self.metadata = runner.metadata
        self.written: list[DataSegment] = []

    def _check_cancel(self) -> None:
        if self.state.cancel.is_set():
            raise TaskCancelled()

    def _cancellable(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            self._check_cancel()
            yield b

    def execute(self) -> int:

        settings = self.runner.settings
        tmp_parent = private_dir(settings.home / "tmp")
        staged = StagedInput(tmp_parent)
        try:
            for entity in resolve_input_source(self.spec.input_source, settings):
                self._check_cancel()
                for batch in read_batches(entity, self.spec.input_format, self.stats, self.state.cancel.is_set):
                    self._check_cancel()
                    staged.add(batch)
            self.stats.check()
            schema = self.spec.data_schema
            version = self._version()
            result = index_partition(
                self._cancellable(staged.batches(self._casts())),
                schema,
                version=version,
                deep_storage=self.deep_storage,
                shard="append" if self.spec.append_to_existing else "core",
                max_rows_per_segment=self.spec.max_rows_per_segment,
                input_bytes=self.stats.processed_bytes,
                max_samples=max(1, self.spec.max_saved_parse_exceptions),
                work_dir=tmp_parent,
                # the JSON reader hands nested values over as text: a plain string given an array is MV
                arrays_in_text=(self.spec.input_format or {}).get("type") == "json",
            )
            self.written = list(result.segments)
            self._merge_stats(result.stats)
            self.stats.check()
            self.stats.check_any_parsed()
            self._check_cancel()
            segments = self.written
            if self.spec.append_to_existing:
                segments = self._place_appends(segments)
                self.written = segments
            self._check_cancel()
            publish(self.metadata, self.deep_storage, segments)
            self.written = []  # published: no longer ours to clean up
            return len(segments)
        except BaseException:
            self._delete_written()
            raise
        finally:
            staged.close()

    def _casts(self) -> dict[str, str]:
        casts: dict[str, str] = {}
        schema = self.spec.data_schema
        for m in schema.metrics:
            if m.field_name and m.type != "count":
                casts[m.field_name] = m.value_type
        for d in schema.dimensions:
            if d.type in ("long", "float", "double"):
                casts[d.name] = d.type
        return casts

    def _merge_stats(self, s: IngestStats) -> None:
        """The indexer's counts and samples; the input bytes were counted by the reader already."""
        self.stats.merge(replace(s, processed_bytes=0, samples=s.kept_samples()))

    # -- versions ----------------------------------------------------------------------------------

    def _version(self) -> str:
        """The task start time, raised above every used version of the datasource (so an
        overwrite always overshadows, even for two tasks started within one millisecond)."""
        start = self.state.started_ms or now_millis()
        floor = 0
        for seg in self.metadata.segments(self.spec.data_source, used=True):
            with contextlib.suppress(ValueError):
                floor = max(floor, parse_instant(seg.version) + 1)
        return format_instant(max(start, floor))

    def _place_appends(self, segments: list[DataSegment]) -> list[DataSegment]:
        """Move appended segments into the newest used version of their time chunk."""
        by_interval: dict[Interval, list[DataSegment]] = defaultdict(list)
        for s in segments:
            by_interval[s.interval].append(s)
        out: list[DataSegment] = []
        for iv, segs in by_interval.items():
            existing = self.metadata.segments(self.spec.data_source, used=True, interval=iv)
            same = [e for e in existing if e.interval == iv]
            if not same:
                others = [e for e in existing if e.interval != iv]
                if others:
                    raise AppendError(
                        f"appendToExisting: existing segments overlapping {iv.iso()} have a different interval "
                        f"({others[0].interval.iso()}); use the same segmentGranularity as the existing data")
                out.extend(segs)  # nothing to append to: the new partitions start a version
                continue
            version = max(e.version for e in same)
            next_pn = max(e.partition_num for e in same if e.version == version) + 1
            for i, seg in enumerate(sorted(segs, key=lambda s: s.partition_num)):
                moved = self._move(seg, version, next_pn + i)
                self.written = [w for w in self.written if w.identifier != seg.identifier] + [moved]
                out.append(moved)
        return out

    def _move(self, seg: DataSegment, version: str, partition_num: int) -> DataSegment:
        target = dataclasses.replace(seg, version=version,
                                     shard_spec=ShardSpec("numbered", partition_num, 0))
        src_key = self.deep_storage.key_for_load_spec(seg.load_spec)
        file_name = src_key.rsplit("/", 1)[-1]
        dst_key = f"segments/{segment_path(target.id)}/{file_name}"
        self.deep_storage.rename(src_key, dst_key)
        with contextlib.suppress(Exception):
            self.deep_storage.delete_prefix(src_key.rsplit("/", 1)[0] + "/")
        return target.with_load_spec(self.deep_storage.load_spec(dst_key))

    def _delete_written(self) -> None:
        for seg in self.written:
            try:
                key = self.deep_storage.key_for_load_spec(seg.load_spec)
                self.deep_storage.delete_prefix(key.rsplit("/", 1)[0] + "/")
            except Exception:  # noqa: BLE001 - the coordinator's orphan sweep is the backstop
                log.warning("could not delete files of unpublished segment %s", seg.identifier)
