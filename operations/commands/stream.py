"""``radctl stream``: run the real-time layer (Spark Structured Streaming from Kafka to real-time
segments) in the foreground; ``radctl up`` runs it in the background."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import typer

from operations.processes import writes_to
from radstack.config import load_settings
from radstack.datasources import load_catalog
from radstack.storage.metadata import MetadataStore
from realtime.streaming.job import StreamingJob, stream_options
from realtime.streaming.supervised import SupervisedStreams

SUPERVISE_SECONDS = 2.0  # how often the supervisors' records are read


def stream(
    datasource: list[str] = typer.Option(None, "--datasource", "-d", help="Datasource to stream (repeatable); default: every spec with processing.topics."),
    available_now: bool = typer.Option(False, "--available-now", help="Process what Kafka holds now, then exit."),
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
    timeout: float = typer.Option(None, help="Stop after this many seconds (scripts and tests)."),
    replica: int = typer.Option(0, "--replica", min=0, max=7, help="Which real-time replica this process is (streaming.replicas; docs/realtime.md)."),
) -> None:
    """Stream Kafka into real-time segments with Spark Structured Streaming.

    Kafka → parse/validate (dead letters to <topic>.dlq) → transforms → dedup → join → enrichment
    → window period → real-time segments, published per micro-batch, idempotently."""

    settings = load_settings(config)
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    log = settings.logs_dir / ("stream.log" if not replica else f"stream-replica{replica}.log")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s",
                        handlers=[logging.StreamHandler(sys.stderr)]
                        + ([] if writes_to(sys.stderr, log) else [logging.FileHandler(log)]))
    for noisy in ("py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    catalog = load_catalog(settings)
    names = list(datasource) if datasource else sorted(n for n, s in catalog.items() if s.processing.topics)
    unknown = [n for n in names if n not in catalog]
    if unknown:
        typer.echo(f"unknown datasource(s): {', '.join(unknown)} (specs are read from {settings.datasources_dir})", err=True)
        raise typer.Exit(2)
    # the supervisors posted to the supervisor API run here too (not with --datasource, --available-now
    # or in a replica: they are the Overlord's long-running streams)
    supervise = not datasource and not available_now and replica == 0
    if not names and not supervise:
        typer.echo(f"no datasource spec with processing.topics in {settings.datasources_dir}", err=True)
        raise typer.Exit(2)
    opts = stream_options(settings, available_now=available_now)
    jobs = [StreamingJob(settings, catalog[n], opts, replica=replica) for n in names]
    for j in jobs[1:]:
        j._spark = jobs[0].spark  # one Spark session for every query
    stop = threading.Event()

    def _stop(*_: object) -> None:
        # Py4J's connection errors while the queries wind down are expected now, not news
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        stop.set()
        for j in jobs:
            j._stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    for j in jobs:
        j.start()
        typer.echo(f"streaming {j.spec.name} from {', '.join(j.spec.processing.topics)} (checkpoint {j.checkpoint})")
    failed = False
    threads = []
    errors: list[str] = []

    def _run(j: StreamingJob) -> None:
        try:
            j.run(timeout=timeout)
        except Exception as e:
            errors.append(f"{j.spec.name}: {e}")

    for j in jobs:
        t = threading.Thread(target=_run, args=(j,), daemon=True)
        t.start()
        threads.append(t)
    if supervise:
        t = threading.Thread(target=_supervise, args=(settings, opts, jobs, stop, timeout, errors), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        while t.is_alive():
            t.join(0.5)
    for j in jobs:
        j.stop()
    for e in errors:
        failed = True
        typer.echo(e, err=True)
    for j in jobs:
        st = j.metadata.get_state(j.sink.key) or {}
        typer.echo(f"{j.spec.name}: {st.get('counters', {})}")
    if failed:
        raise typer.Exit(1)


def _supervise(settings: Any, opts: Any, jobs: list[StreamingJob], stop: threading.Event, timeout: float | None,
               errors: list[str]) -> None:
    """Keep the supervisors' queries in line with their records until stopped (or ``timeout``)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    metadata = MetadataStore.from_settings(settings)
    streams = SupervisedStreams(settings, metadata, opts, spark=jobs[0].spark if jobs else None)
    try:
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            try:
                streams.reconcile()
            except Exception as e:  # a bad record or a failing query: report it and keep the others going
                logging.getLogger(__name__).exception("supervised streams")
                if not errors or errors[-1] != f"supervisors: {e}":  # a lasting fault is reported once
                    errors.append(f"supervisors: {e}")
            stop.wait(SUPERVISE_SECONDS)
    finally:
        streams.stop()
        metadata.close()
