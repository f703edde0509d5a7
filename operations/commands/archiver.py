"""``radctl archiver``: run the archiver in the foreground (``radctl up`` runs it in the background)."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import typer

from operations.heap import frozen_startup_heap
from radstack.config import load_settings
from radstack.metrics import serve_metrics
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.metadata import MetadataStore
from realtime.archiver import Archiver
from realtime.archiver.settings import archiver_config, topics_source


def run_archiver(
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
    topic: list[str] = typer.Option(None, "--topic", "-t", help="Topic to archive (repeatable); default: archiver.topics or the specs' topics."),
    idle_exit: float = typer.Option(None, help="Exit after this many seconds without a record (for scripts and tests)."),
    metrics_port: int = typer.Option(None, help="Serve Prometheus /metrics on this port (default: archiver.metrics_port; 0 = off)."),
) -> None:
    """Copy every raw Kafka record into deep storage, exactly once, partitioned by event hour."""

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = load_settings(config)
    cfg = archiver_config(settings)
    if topic:
        cfg.topics = list(topic)
    # without fixed topics (--topic, archiver.topics) the datasources' topics are re-read while it runs;
    # none yet is not an error: a supervisor may be posted after the archiver started
    source = None if topic else topics_source(settings)
    port = settings.archiver.metrics_port if metrics_port is None else metrics_port
    if port:

        try:
            serve_metrics(int(port))
        except OSError as e:  # metrics are not worth refusing to archive for
            logging.getLogger("radstack.archiver").warning("cannot serve /metrics on port %s: %s", port, e)
    metadata = MetadataStore.from_settings(settings)
    archiver = Archiver(cfg, open_deep_storage(settings), metadata, topics_source=source)
    signal.signal(signal.SIGTERM, lambda *_: archiver.stop())
    signal.signal(signal.SIGINT, lambda *_: archiver.stop())
    typer.echo(f"archiving {', '.join(cfg.topics)} as group {cfg.group_id}" if cfg.topics else
               "no datasource reads a topic yet: waiting for a spec file or a supervisor (checked every "
               f"{archiver.topics_refresh_seconds:.0f} s)")
    with frozen_startup_heap():
        stats = archiver.run(idle_exit_seconds=idle_exit)
    typer.echo(f"archived {stats.records} records in {stats.files} files ({stats.bytes} bytes)")
