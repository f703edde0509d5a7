"""Process supervision for the embedded stack (``radctl up`` / ``down`` / ``status``).

Every process is one entry in :data:`PROCESSES` (a :class:`ProcessSpec`: how to prepare it, its
command line, its port, how to probe its health, what to do once it is ready). Adding a process
(the streaming job, the archiver, the coordinator, …) is adding one entry.

State lives under ``$RADSTACK_HOME``: ``run/<name>.pid`` (JSON: pid, start time, command, port) and
``logs/<name>.log`` (stdout/stderr; Kafka's own log is ``logs/kafka.log``). Children run in their own
session (process group), so ``down`` stops each whole group: TERM, wait, then KILL.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from operations import airflow_local, spark_connect_local, spark_connect_warm_up
from operations.kafka_broker import KafkaBroker, metadata_ok
from operations.processes import (
    http_ok,
    port_in_use,
    radctl_argv,
    stop_process_group,
    tail,
)
from radstack.config import Settings
from radstack.datasources import load_catalog
from radstack.process_state import pid_alive, port_open, process_start_time, spawn_group
from radstack.storage.metadata import MetadataStore
from radstack.storage.raw_archive import archive_watermark
from radstack.storage.replicas import MAX_REPLICAS
from radstack.storage.supervisors import load_supervisors
from radstack.time.intervals import format_instant
from realtime.archiver.settings import archiver_config
from realtime.spool import SpoolStats
from realtime.spool import inspect as inspect_spool
from realtime.streaming.progress import streaming_health
from realtime.topics import consumer_lag, ensure_topics, list_topics, topic_specs


class StackError(RuntimeError):
    """A process could not be started (port in use, crashed during start, not healthy in time)."""


@dataclass(frozen=True)
class ProcessSpec:
    name: str
    argv: Callable[[Any], list[str]]
    port: Callable[[Any], int | None]
    health: Callable[[Any], bool]
    host: Callable[[Any], str] = lambda s: "127.0.0.1"
    prepare: Callable[[Any], None] | None = None
    after_ready: Callable[[Any], str | None] | None = None  # returns a message to print, or None
    enabled: Callable[[Any], bool] = lambda s: True
    extra_ports: Callable[[Any], list[int]] = lambda s: []
    log_name: str | None = None  # stdout/stderr file under logs/ (default <name>.log)
    ready_timeout: Callable[[Any], float] = lambda s: 60.0
    stop_timeout: float = 30.0
    stop_leader_first: float = 0.0  # seconds the leader gets to stop its children before the group's TERM
    env: Callable[[Any], dict[str, str]] | None = None  # added to the stack's environment


def _kafka_broker(s: Any) -> Any:

    return KafkaBroker.from_settings(s)


def _kafka_health(s: Any) -> bool:

    host, _, port = s.kafka.clients_bootstrap.rpartition(":")
    return port_open(host, int(port), 0.3) and metadata_ok(s.kafka.clients_bootstrap, 2.0)


def _kafka_topics(s: Any) -> str | None:

    created = ensure_topics(s.kafka.clients_bootstrap, topic_specs(s), int(s.kafka.replication_factor))
    return f"created topics: {', '.join(created)}" if created else None


def _archiver_enabled(s: Any) -> bool:
    """The archiver runs when it has topics: ``archiver.topics`` or the datasource specs' topics."""

    return bool(archiver_config(s).topics)


PROCESSES: list[ProcessSpec] = [
    ProcessSpec(
        name="kafka",
        enabled=lambda s: bool(s.kafka.embedded),
        prepare=lambda s: _kafka_broker(s).prepare(),
        argv=lambda s: _kafka_broker(s).command(),
        port=lambda s: int(s.kafka.port),
        extra_ports=lambda s: [int(s.kafka.controller_port)],
        health=_kafka_health,
        after_ready=_kafka_topics,
        log_name="kafka.out",
        ready_timeout=lambda s: float(s.kafka.start_timeout_seconds),
    ),
    ProcessSpec(
        name="receiver",
        argv=lambda s: radctl_argv("receiver"),
        host=lambda s: str(s.receiver.host),
        port=lambda s: int(s.receiver.port),
        health=lambda s: http_ok(
            f"http://{probe_host(s.receiver.host)}:{s.receiver.port}/health"
        ),
        stop_timeout=15.0,
    ),
    ProcessSpec(
        name="serve",
        argv=lambda s: radctl_argv("serve"),
        host=lambda s: str(s.server.host),
        port=lambda s: int(s.server.port),
        health=lambda s: http_ok(
            f"http://{probe_host(s.server.host)}:{s.server.port}/status/health"
        ),
        stop_timeout=15.0,
    ),
    ProcessSpec(
        name="archiver",
        argv=lambda s: radctl_argv("archiver"),
        enabled=_archiver_enabled,
        port=lambda s: int(s.archiver.metrics_port or 0) or None,
        # without a metrics port the archiver has no probe: a live pid is all there is to check
        health=lambda s: not s.archiver.metrics_port
        or http_ok(f"http://127.0.0.1:{s.archiver.metrics_port}/metrics"),
        stop_timeout=60.0,  # a clean stop flushes and commits every buffer
    ),
    *[
        ProcessSpec(  # the real-time layer (realtime/streaming); r ≥ 1: further replicas (streaming.replicas)
            name="stream" if r == 0 else f"stream-replica{r}",
            enabled=lambda s, r=r: _has_streaming_specs(s) and int(s.streaming.replicas) > r,
            argv=lambda s, r=r: radctl_argv("stream", *(("--replica", str(r)) if r else ())),
            port=lambda s: None,
            health=lambda s, r=r: streaming_health(s, replica=r, since_ms=_started_ms(s, "stream" if r == 0 else f"stream-replica{r}")),
            ready_timeout=lambda s: 240.0,
            stop_timeout=45.0,
            stop_leader_first=30.0,  # it stops its queries and Spark session, then its JVM ends with it
        )
        for r in range(MAX_REPLICAS)
    ],
    ProcessSpec(  # the batch jobs' warm Spark (operations/spark_connect_local.py)
        name="spark-connect",
        enabled=spark_connect_local.enabled,
        prepare=spark_connect_local.prepare,
        argv=spark_connect_local.command,
        env=spark_connect_local.environment,
        port=lambda s: int(s.spark.connect_port),
        health=lambda s: port_open("127.0.0.1", int(s.spark.connect_port), 0.3),
        after_ready=lambda s: spark_connect_warm_up.start(s, _child_env(s), _pid_of(s, "spark-connect")),
        ready_timeout=lambda s: 180.0,
        stop_timeout=30.0,
    ),
    ProcessSpec(  # the batch layer's scheduler and UI (operations/airflow_local.py)
        name="airflow",
        enabled=lambda s: bool(s.airflow.embedded) or pid_file(s, "airflow").exists(),
        prepare=lambda s: airflow_local.prepare(s),
        argv=airflow_local.command,
        env=airflow_local.environment,
        port=lambda s: int(s.airflow.port),
        health=airflow_local.healthy,
        ready_timeout=lambda s: float(s.airflow.start_timeout_seconds),
        stop_timeout=30.0,
    ),
]


def _started_ms(s: Any, name: str) -> int | None:
    """When the process ``name`` was started (its pid file), in epoch millis."""
    rec = PidRecord.read(pid_file(s, name))
    return int(rec.started_at * 1000) if rec is not None else None


def _has_streaming_specs(s: Any) -> bool:
    """A spec file with topics, or a supervisor posted to the supervisor API (``radctl up`` again
    starts the streaming process after the first supervisor is posted)."""
    try:
        if any(spec.processing.topics for spec in load_catalog(s).values()):
            return True
        with MetadataStore.from_settings(s, create=False) as md:
            return bool(load_supervisors(md))
    except Exception:
        return False


def probe_host(host: Any) -> str:
    """The address to reach a server bound to ``host`` (a wildcard bind is reached on loopback)."""
    h = str(host or "127.0.0.1")
    return "127.0.0.1" if h in ("0.0.0.0", "::", "") else h


def specs(settings: Settings, only: list[str] | None = None, skip: list[str] | None = None) -> list[ProcessSpec]:
    names = {p.name for p in PROCESSES}
    for n in (only or []) + (skip or []):
        if n not in names:
            raise StackError(f"unknown process {n!r}; known: {', '.join(p.name for p in PROCESSES)}")
    return [
        p
        for p in PROCESSES
        if p.enabled(settings) and (not only or p.name in only) and p.name not in (skip or [])
    ]


# -- pid files ------------------------------------------------------------------------------------
@dataclass
class PidRecord:
    name: str
    pid: int
    start_time: int | None
    argv: list[str]
    port: int | None
    started_at: float
    log: str

    @classmethod
    def read(cls, path: Path) -> PidRecord | None:
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.__dict__))
        tmp.replace(path)

    @property
    def alive(self) -> bool:
        return pid_alive(self.pid, self.start_time)


def _pid_of(settings: Settings, name: str) -> int | None:
    rec = PidRecord.read(pid_file(settings, name))
    return rec.pid if rec is not None else None


def pid_file(settings: Settings, name: str) -> Path:
    return settings.run_dir / f"{name}.pid"


def log_file(settings: Settings, spec: ProcessSpec) -> Path:
    return settings.logs_dir / (spec.log_name or f"{spec.name}.log")


# -- up / down / status ---------------------------------------------------------------------------
@dataclass
class Outcome:
    name: str
    state: str  # started | already-running | stopped | not-running | failed
    message: str = ""
    pid: int | None = None
    seconds: float | None = None


def _child_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env["RADSTACK_HOME"] = str(settings.home)
    if settings.source is not None:
        env["RADSTACK_CONFIG"] = str(Path(settings.source).resolve())
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def start_one(settings: Settings, spec: ProcessSpec, say: Callable[[str], None] = lambda m: None) -> Outcome:
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    pf = pid_file(settings, spec.name)
    log = log_file(settings, spec)
    rec = PidRecord.read(pf)
    if rec is not None and rec.alive:
        if spec.health(settings):
            return Outcome(spec.name, "already-running", f"already running (pid {rec.pid})", rec.pid)
        return Outcome(
            spec.name,
            "already-running",
            f"already running (pid {rec.pid}) but not healthy yet; see {log}",
            rec.pid,
        )
    if rec is not None:
        say(f"{spec.name}: was not running any more (crashed?); last lines of {log}:\n{tail(log, 10)}")
        pf.unlink(missing_ok=True)
    host = spec.host(settings)
    port = spec.port(settings)
    for p in [port, *spec.extra_ports(settings)]:
        if p is not None and port_in_use(host, p):
            return Outcome(
                spec.name,
                "failed",
                f"port {host}:{p} is already in use by another process (not started by this radstack home); "
                f"stop that process or choose another port in radstack.yaml",
            )
    t0 = time.monotonic()
    if spec.prepare is not None:
        try:
            spec.prepare(settings)
        except Exception as e:  # noqa: BLE001 - reported as this process's failure, the rest keeps going
            return Outcome(spec.name, "failed", f"could not be prepared: {e}")
    started = time.monotonic()  # the health timeout counts from the start, not from a first install
    argv = spec.argv(settings)
    with open(log, "ab") as out:
        out.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(argv)}\n".encode())
        out.flush()
    proc = spawn_group(argv, log, cwd=settings.home,
                       env={**_child_env(settings), **(spec.env(settings) if spec.env is not None else {})})
    PidRecord(spec.name, proc.pid, process_start_time(proc.pid), argv, port, time.time(), str(log)).write(pf)
    deadline = started + spec.ready_timeout(settings)
    while True:
        code = proc.poll()
        if code is not None:
            pf.unlink(missing_ok=True)
            return Outcome(
                spec.name,
                "failed",
                f"exited with code {code} while starting; last lines of {log}:\n{tail(log, 15)}",
            )
        if spec.health(settings):
            break
        if time.monotonic() > deadline:
            stop_process_group(proc.pid, spec.stop_timeout)
            pf.unlink(missing_ok=True)
            return Outcome(
                spec.name,
                "failed",
                f"not healthy after {spec.ready_timeout(settings):.0f}s; stopped it. See {log}",
            )
        time.sleep(0.2)
    msg = ""
    if spec.after_ready is not None:
        msg = spec.after_ready(settings) or ""
    return Outcome(spec.name, "started", msg, proc.pid, time.monotonic() - t0)


def up(
    settings: Settings,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    say: Callable[[str], None] = lambda m: None,
) -> list[Outcome]:
    """Start every enabled process in table order (stops at the first failure: later ones need it)."""
    out: list[Outcome] = []
    for spec in specs(settings, only, skip):
        o = start_one(settings, spec, say)
        out.append(o)
        say(_describe(o))
        if o.state == "failed":
            break
    return out


def _describe(o: Outcome) -> str:
    if o.state == "started":
        extra = f"; {o.message}" if o.message else ""
        return f"{o.name}: started (pid {o.pid}) in {o.seconds:.1f}s{extra}"
    return f"{o.name}: {o.message or o.state}"


def down(settings: Settings, say: Callable[[str], None] = lambda m: None,
         only: list[str] | None = None) -> list[Outcome]:  # fmt: skip
    """Stop every process that has a pid file (or those in ``only``), in reverse table order (then any
    unknown pid files)."""
    out: list[Outcome] = []
    known = [p.name for p in PROCESSES if not only or p.name in only]
    extra = (
        sorted(f.stem for f in settings.run_dir.glob("*.pid") if f.stem not in {p.name for p in PROCESSES})
        if settings.run_dir.exists() and not only
        else []
    )
    timeouts = {p.name: p.stop_timeout for p in PROCESSES}
    leader_first = {p.name: p.stop_leader_first for p in PROCESSES}
    for name in list(reversed(known)) + extra:
        pf = pid_file(settings, name)
        rec = PidRecord.read(pf)
        if rec is None:
            continue
        if not rec.alive:
            pf.unlink(missing_ok=True)
            o = Outcome(name, "not-running", "was not running (stale pid file removed)", rec.pid)
        else:
            t0 = time.monotonic()
            clean = stop_process_group(rec.pid, timeouts.get(name, 30.0), leader_first.get(name, 0.0))
            pf.unlink(missing_ok=True)
            o = Outcome(
                name,
                "stopped",
                f"stopped (pid {rec.pid}) in {time.monotonic() - t0:.1f}s" + ("" if clean else " (killed)"),
                rec.pid,
            )
        out.append(o)
        say(f"{name}: {o.message}")
    return out


@dataclass
class ProcessStatus:
    name: str
    state: str  # running | stopped | crashed
    pid: int | None
    port: int | None
    healthy: bool
    log: str
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class StackStatus:
    processes: list[ProcessStatus]
    bootstrap_servers: str | None = None
    topics: dict[str, int] = field(default_factory=dict)
    groups: list[dict[str, Any]] = field(default_factory=list)
    kafka_error: str | None = None
    spool: SpoolStats | None = None
    #: the archive's completeness watermark per topic a datasource reads (epoch millis; None: never ran)
    archiver_watermarks: dict[str, int | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "processes": [p.as_dict() for p in self.processes],
            "archiver_watermarks": {t: None if w is None else format_instant(w)
                                    for t, w in self.archiver_watermarks.items()},
            "spool": None if self.spool is None else self.spool.as_dict(),
            "kafka": {
                "bootstrap_servers": self.bootstrap_servers,
                "topics": self.topics,
                "groups": self.groups,
                "error": self.kafka_error,
            },
        }


def archiver_watermarks(settings: Settings) -> dict[str, int | None]:
    """Each topic a datasource reads, with the archiver's watermark for it (what ``radctl backfill``
    waits for before a chunk is closed); empty when there is no metadata store yet."""
    try:
        topics = sorted({t for spec in load_catalog(settings).values() for t in spec.processing.topics})
        if not topics:
            return {}
        with MetadataStore.from_settings(settings, create=False) as md:
            return {t: archive_watermark(md, t) for t in topics}
    except Exception:  # noqa: BLE001 - status reports what it can; a missing store is not an error here
        return {}


def status(settings: Settings, with_kafka: bool = True) -> StackStatus:
    procs: list[ProcessStatus] = []
    for spec in specs(settings):
        pf = pid_file(settings, spec.name)
        rec = PidRecord.read(pf)
        log = str(log_file(settings, spec))
        if rec is None:
            procs.append(ProcessStatus(spec.name, "stopped", None, spec.port(settings), False, log))
        elif not rec.alive:
            procs.append(
                ProcessStatus(
                    spec.name,
                    "crashed",
                    rec.pid,
                    rec.port,
                    False,
                    log,
                    f"pid {rec.pid} is gone; last line: {tail(Path(log), 1)}",
                )
            )
        else:
            procs.append(ProcessStatus(spec.name, "running", rec.pid, rec.port, spec.health(settings), log))
    st = StackStatus(procs, spool=inspect_spool(settings.spool_dir), archiver_watermarks=archiver_watermarks(settings))
    if with_kafka:

        st.bootstrap_servers = settings.kafka.clients_bootstrap
        kafka = next((p for p in procs if p.name == "kafka"), None)
        if kafka is not None and not kafka.healthy:
            st.kafka_error = "the embedded broker is not running"
        else:
            try:
                st.topics = list_topics(st.bootstrap_servers, timeout=5)
                st.groups = [g.as_dict() for g in consumer_lag(st.bootstrap_servers, timeout=5)]
            except Exception as e:  # a real cluster that is away: report, don't fail
                st.kafka_error = f"{type(e).__name__}: {e}"
    return st
