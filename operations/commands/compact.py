"""``radctl compact [--datasource D] [--dry-run]``: plan and run tiered rollup compaction now, with the
compaction configs stored through ``POST /druid/coordinator/v1/config/compaction`` (or ``--config-file``)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from batch.compaction_job import compact_with_spark
from radstack.config import load_settings
from radstack.storage.compaction import (
    CompactionError,
    compact_datasource,
    load_compaction_configs,
    save_compaction_config,
)
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.metadata import MetadataStore
from radstack.time.intervals import Interval

console = Console(highlight=False)
err = Console(highlight=False, stderr=True)


def compact(
    datasource: str = typer.Option(None, "--datasource", "-d", help="Only this datasource."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be compacted; change nothing."),
    interval: str = typer.Option(None, "--interval", help="Only buckets overlapping this ISO interval."),
    runner: str = typer.Option(None, "--runner", help="inprocess | spark | auto (default: coordinator.compaction.runner)."),
    config_file: Path = typer.Option(None, "--config-file", help="Store this compaction config JSON first."),
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
) -> None:
    """Compact old intervals into coarser, higher-version segments (see docs/operations-retention.md)."""

    if runner not in (None, "auto", "inprocess", "spark"):
        err.print("[red]--runner must be inprocess, spark or auto[/red]")
        raise typer.Exit(2)
    settings = load_settings(config)
    try:
        iv = Interval.parse(interval) if interval else None
    except ValueError as e:
        err.print(f"[red]--interval: {e}[/red]")
        raise typer.Exit(2) from e
    metadata = MetadataStore.from_settings(settings)
    try:
        if config_file is not None:
            try:
                save_compaction_config(metadata, json.loads(config_file.read_text()))
            except (OSError, ValueError, CompactionError) as e:
                err.print(f"[red]{config_file}: {e}[/red]")
                raise typer.Exit(2) from e
        configs = load_compaction_configs(metadata)
        if datasource:
            if datasource not in configs:
                err.print(f"[red]datasource {datasource!r} has no compaction config "
                          f"(known: {', '.join(sorted(configs)) or 'none'})[/red]")
                raise typer.Exit(2)
            configs = {datasource: configs[datasource]}
        if not configs:
            err.print("no compaction configs; POST one to /druid/coordinator/v1/config/compaction "
                      "or pass --config-file")
            raise typer.Exit(1)
        deep = open_deep_storage(settings)
        table = Table(title="compaction" + (" (dry run)" if dry_run else ""))
        for col in ("datasource", "interval", "granularity", "input segments", "rows in", "rows out", "version"):
            table.add_column(col)
        failures = 0
        for ds, cfg in sorted(configs.items()):
            plans, results, errors = compact_datasource(metadata, deep, cfg, settings=settings, dry_run=dry_run,
                                                        runner=runner, interval=iv, spark_compactor=compact_with_spark)
            done = {r.plan.interval: r for r in results}
            for p in plans:
                r = done.get(p.interval)
                gran = f"{p.tier.segment_granularity.to_json()}/{p.tier.query_granularity.to_json()}"
                table.add_row(ds, p.interval.iso(), gran, str(len(p.input_ids)), str(p.input_rows),
                              "-" if r is None else str(r.rows_out), "-" if r is None else r.version)
            for e in errors:
                err.print(f"[red]{e}[/red]")
            failures += len(errors)
        console.print(table)
        if failures:
            raise typer.Exit(1)
    finally:
        metadata.close()
