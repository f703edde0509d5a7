"""``radctl backfill --interval START/END [--datasource D] [--via airflow|local] [--wait] [--force]``.

Splits the interval into segment-granularity chunks, rebuilds them locally (Spark ``local[*]``: one
job per group of at most ``batch.chunks_per_job`` consecutive chunks) or triggers one Airflow DAG run
per chunk, shows progress (per group locally, per chunk through Airflow) and prints a summary table: per
chunk, the rows and events (sum of the count metric) that served it before (the real-time data) and that
serve it now (batch), and the version now serving it — locally only the chunks with rows before or
after, plus one line counting the other chunks (rebuilt empty: tombstones). ``--json`` prints every
chunk. Exit codes: 0 all published, 1 a chunk failed, 2 bad input (interval, datasource, intervals not
closed), 3 Airflow unreachable or refusing.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from batch.airflow_api import AirflowError
from batch.backfill import (
    BackfillError,
    check_plan_closed,
    chunks_per_job,
    group_chunks,
    plan_backfill,
    run_airflow,
    run_local,
)
from batch.planning import NotClosedError
from operations import airflow_local
from radstack.config import ConfigError, load_settings

console = Console(highlight=False, stderr=True, soft_wrap=True)


class Via(StrEnum):
    auto = "auto"
    airflow = "airflow"
    local = "local"


def backfill(
    interval: str = typer.Option(..., "--interval", "-i", help="ISO-8601 interval: START/END or START/PERIOD (2026-11-20/P1D)."),
    datasource: str = typer.Option(None, "--datasource", "-d", help="Datasource to rebuild (default: every datasource with topics)."),
    via: Via = typer.Option(Via.auto, "--via", help="airflow (REST API), local (Spark here); auto: airflow when airflow.url is set or the embedded Airflow runs."),
    wait: bool = typer.Option(False, "--wait", help="With --via airflow: wait for the DAG runs and print the summary."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if the interval is not closed (window period / archiver watermark)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON lines on stdout."),
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
) -> None:
    """Rebuild closed intervals from the raw archive; the new version overshadows the real-time data."""

    try:
        settings = airflow_local.connected(load_settings(config))  # the embedded Airflow, when it runs
        plan = plan_backfill(settings, interval, datasource)
    except (BackfillError, ConfigError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    mode = via.value
    if mode == "auto":
        mode = "airflow" if settings.airflow.url else "local"
    for ds, chunks in plan.chunks.items():
        how = mode
        if mode == "local":

            jobs = len(group_chunks(chunks, chunks_per_job(settings)))
            how = f"local, {jobs} Spark job(s) of at most {chunks_per_job(settings):,} chunk(s)"
        console.print(f"{ds}: {len(chunks):,} chunk(s) {chunks[0].iso()} … {chunks[-1].iso()} via {how}")
    if mode == "local" and not force:

        try:
            check_plan_closed(settings, plan)
        except NotClosedError as e:
            console.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2) from None

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=False,
    ) as bar:  # fmt: skip
        task = bar.add_task("rebuilding" if mode == "local" or wait else "triggering", total=plan.total)
        done: set[tuple[str, int]] = set()

        def progress(r) -> None:  # type: ignore[no-untyped-def]
            key = (r.datasource, r.interval.start)
            if r.group is None:  # one line per chunk (Airflow: one DAG run each)
                bar.console.print(f"  {r.datasource} {r.interval.iso()}: {r.status}" + (f" — {r.error}" if r.error else ""))
            elif r.interval.start == r.group.start:  # local: one line per group (one Spark job)
                what = f"  {r.datasource} {r.group.iso()} ({r.group_chunks:,} chunk(s)): {r.status}"
                if r.status == "published":
                    what += f" in {r.seconds:.1f} s, version {r.version}"
                bar.console.print(what + (f" — {r.error}" if r.error else ""))
            final = {"published", "failed", "success", "timeout"} if mode == "local" or wait else {"triggered"}
            if r.status in final and key not in done:
                done.add(key)
                bar.advance(task)

        try:
            if mode == "local":
                results = run_local(settings, plan, force=force, progress=progress)
            else:
                results = run_airflow(settings, plan, wait=wait, force=force, progress=progress)
        except NotClosedError as e:
            console.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2) from None
        except AirflowError as e:
            console.print(f"[red]error:[/red] {e}")
            raise typer.Exit(3) from None

    if as_json:
        for r in results:
            typer.echo(orjson.dumps(r.to_json()).decode())
    _summary(results, mode, wait)
    if any(r.status in ("failed", "timeout") for r in results):
        raise typer.Exit(1)


def _summary(results, mode: str, wait: bool) -> None:  # type: ignore[no-untyped-def]
    table = Table(title="backfill summary", show_lines=False)
    for col, kw in (("datasource", {}), ("chunk", {"no_wrap": True}), ("status", {}), ("real-time rows", {"justify": "right"}),
                    ("real-time events", {"justify": "right"}), ("batch rows", {"justify": "right"}),
                    ("batch events", {"justify": "right"}), ("serving version", {"no_wrap": True})):  # fmt: skip
        table.add_column(col, **kw)
    show_counts = mode == "local" or wait
    for r in results if mode != "local" else _with_data(results):
        status = r.status if not r.error else f"{r.status}: {r.error[:80]}"
        table.add_row(
            r.datasource, r.interval.iso(), status,
            *(map(str, (r.before_rows, r.before_events, r.rows, r.events)) if show_counts else ("", "", "", "")),
            r.version if show_counts else r.run_id,
        )  # fmt: skip
    if mode == "local":
        for ds, status, error, rest in _without_data(results):
            versions = sorted({r.version for r in rest})
            what = "no events (tombstones)" if status == "published" else "no events"
            table.add_row(
                ds, f"{len(rest):,} other chunk{'s' if len(rest) != 1 else ''}: {what}",
                status if not error else f"{status}: {error[:80]}", "0", "0", "0", "0",
                versions[0] if len(versions) == 1 else f"{len(versions):,} versions",
            )  # fmt: skip
    out = Console(highlight=False)
    if not out.is_terminal:  # piped or captured: do not squeeze ISO intervals and versions into 80 columns
        out = Console(highlight=False, width=220)
    out.print(table)


def _with_data(results):  # type: ignore[no-untyped-def]
    """The chunks with rows before or after the rebuild: one summary line each."""
    return [r for r in results if r.before_rows > 0 or r.rows > 0]


def _without_data(results):  # type: ignore[no-untyped-def]
    """The other chunks (no rows before nor after), per (datasource, status, error): one line each."""
    out: dict[tuple[str, str, str], list] = {}  # type: ignore[type-arg]
    for r in results:
        if not (r.before_rows > 0 or r.rows > 0):
            out.setdefault((r.datasource, r.status, r.error), []).append(r)
    return [(ds, status, error, rest) for (ds, status, error), rest in out.items()]
