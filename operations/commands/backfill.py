"""``radctl backfill --interval START/END [--datasource D] [--via airflow|local] [--wait] [--force]``.

Splits the interval into segment-granularity chunks, rebuilds them locally (Spark ``local[*]``: one
job per group of at most ``batch.chunks_per_job`` consecutive chunks) or triggers one Airflow DAG run
per chunk, shows progress (per group locally, per chunk through Airflow) and prints a summary table: per
chunk, the rows and events (sum of the count metric) that served it before (the real-time data, or the
previous batch version) and that serve it now, and the version now serving it — locally only the chunks
with rows before or after (past twelve, the rest folded into one line with their sums), plus one line
counting the other chunks (rebuilt empty: tombstones). ``--json`` prints every chunk. With ``--wait``
(the default at a terminal) it returns once the server serves every chunk's new version
(:mod:`operations.served`). Exit codes: 0 all published, 1 a chunk failed, 2 bad input (interval,
datasource, intervals not closed), 3 Airflow unreachable or refusing. A datasource a Druid cluster serves
(``druid.datasources``) has each rebuilt group re-indexed there too, unless ``--no-druid``; exit 1 when Druid
did not take one (radstack serves it all the same).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

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
from operations.archived import wait_archived
from operations.served import ServingUnreachable, wait_served
from radstack.config import ConfigError, load_settings
from radstack.storage.supervisors import datasource_catalog

console = Console(highlight=False, stderr=True, soft_wrap=True)


class Via(StrEnum):
    auto = "auto"
    airflow = "airflow"
    local = "local"


def backfill(
    interval: str = typer.Option(..., "--interval", "-i", help="ISO-8601 interval: START/END or START/PERIOD (2026-11-20/P1D)."),
    datasource: str = typer.Option(None, "--datasource", "-d", help="Datasource to rebuild (default: every datasource with topics)."),
    via: Via = typer.Option(Via.auto, "--via", help="airflow (REST API), local (Spark here); auto: airflow when airflow.url is set or the embedded Airflow runs."),
    wait: bool = typer.Option(None, "--wait/--no-wait", show_default="on at a terminal",
                              help="Wait until every chunk is rebuilt (Airflow: its DAG run) and the server serves its new version."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if the interval is not closed (window period / archiver watermark)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON lines on stdout."),
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
    started_by: str = typer.Option("radctl backfill", "--started-by", hidden=True,
                                   help="Who started it, for the task record (the Airflow DAG, the console)."),
    task_id: str = typer.Option(None, "--task-id", hidden=True, help="The task row to record into (the console's)."),
    druid: bool = typer.Option(True, "--druid/--no-druid",
                               help="Local: re-index each rebuilt group in the Druid cluster of the settings (druid.datasources)."),
) -> None:
    """Rebuild closed intervals from the raw archive; the new version overshadows the real-time data."""

    try:
        settings = airflow_local.connected(load_settings(config))  # the embedded Airflow, when it runs
        plan = plan_backfill(settings, interval, datasource)
    except (BackfillError, ConfigError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    if wait is None:  # interactive: a query right after the command reads the new version
        wait = console.is_terminal
    mode = via.value
    if mode == "auto":
        mode = "airflow" if settings.airflow.url else "local"
    _print_plan(settings, plan, mode)
    if mode == "airflow" and not settings.airflow.url:  # before any progress bar is drawn
        console.print("[red]error:[/red] no Airflow to trigger: the embedded Airflow is not running (`radctl up "
                      "--airflow` starts it) and airflow.url is not set (RADSTACK_AIRFLOW__URL); "
                      "`--via local` rebuilds here with local Spark")
        raise typer.Exit(3)
    if wait and mode == "local":  # events replayed for a past day may still be on their way to the archive
        _wait_archived(settings, plan)
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
        progress = _progress_printer(bar, task, mode, wait)

        try:
            if mode == "local":
                results = run_local(settings, plan, force=force, progress=progress, started_by=started_by,
                                    task_id=task_id, druid=druid)
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
    missed = [r for r in results if r.druid_error]
    if missed:
        console.print(f"[red]error:[/red] radstack serves the rebuild, but the Druid cluster did not take "
                      f"{len({r.group for r in missed})} group(s) (first: {missed[0].druid_error}); the server's "
                      f"druid_sync duty retries them, or run `radctl druid reindex {missed[0].datasource} "
                      f"--interval {(missed[0].group or missed[0].interval).iso()}`")
        raise typer.Exit(1)
    if wait:
        _wait_served(settings, results)


def _print_plan(settings, plan, mode: str) -> None:  # type: ignore[no-untyped-def]
    """One line per datasource: its chunks and how they are rebuilt."""
    for ds, chunks in plan.chunks.items():
        how = mode
        if mode == "local":
            jobs = len(group_chunks(chunks, chunks_per_job(settings)))
            how = f"local, {jobs} Spark job(s) of at most {chunks_per_job(settings):,} chunk(s)"
        console.print(f"{ds}: {len(chunks):,} chunk(s) {chunks[0].iso()} … {chunks[-1].iso()} via {how}")


def _progress_printer(bar: Progress, task: Any, mode: str, wait: bool) -> Callable[[Any], None]:
    """The callback that prints each chunk's (Airflow) or group's (local) news and advances the bar once
    per chunk that reached its end."""
    done: set[tuple[str, int]] = set()

    def progress(r) -> None:  # type: ignore[no-untyped-def]
        key = (r.datasource, r.interval.start)
        if r.group is None:  # one line per chunk (Airflow: one DAG run each)
            bar.console.print(f"  {r.datasource} {r.interval.iso()}: {r.status}" + (f" — {r.error}" if r.error else ""))
        elif r.interval.start == r.group.start:  # local: one line per group (one Spark job)
            what = f"  {r.datasource} {r.group.iso()} ({r.group_chunks:,} chunk(s)): {r.status}"
            if r.status == "published":
                what += f" in {r.seconds:.1f} s, version {r.version}"
            if r.druid_version or r.druid_error:  # the group's Druid step is done
                what = (f"  {r.datasource} {r.group.iso()}: Druid serves version {r.druid_version} "
                        f"({r.druid_seconds:.1f} s)" if r.druid_version else
                        f"  {r.datasource} {r.group.iso()}: [red]Druid did not take it[/red] — {r.druid_error}")
            bar.console.print(what + (f" — {r.error}" if r.error else ""))
        final = {"published", "failed", "success", "timeout"} if mode == "local" or wait else {"triggered"}
        if r.status in final and key not in done:
            done.add(key)
            bar.advance(task)

    return progress


def _wait_archived(settings, plan) -> None:  # type: ignore[no-untyped-def]
    """Before the rebuild: the archiver has consumed what Kafka holds for the datasources' topics."""
    catalog = datasource_catalog(settings)  # the plan's catalog: spec files and supervisors alike
    topics = sorted({t for ds in plan.chunks for t in (catalog[ds].processing.topics if ds in catalog else ())})
    if not topics:
        return
    with console.status("waiting for the archiver to catch up …") as status:
        left = wait_archived(settings, topics, on_poll=lambda lag: status.update(
            f"waiting for the archiver to catch up: {lag:,} record(s) of {', '.join(topics)} to go …"))
    if left:
        console.print(f"[yellow]warning:[/yellow] the archiver is still {left:,} record(s) behind on "
                      f"{', '.join(topics)}; the rebuild reads what is archived so far")


def _wait_served(settings, results) -> None:  # type: ignore[no-untyped-def]
    """Return once the server serves every rebuilt chunk's new version (a note when it cannot tell)."""
    try:
        with console.status("waiting for the server to serve the new version …") as status:
            left = wait_served(settings, results, timeout_s=120,
                               on_poll=lambda n, total: status.update(
                                   f"waiting for the server to serve the new version: {n:,} / {total:,} chunks …"))
    except ServingUnreachable as e:
        console.print(f"note: not waiting for serving: {e}")
        return
    if left:
        console.print(f"[yellow]warning:[/yellow] {len(left):,} chunk(s) not served yet (first: "
                      f"{left[0].datasource} {left[0].interval.iso()}); queries may read the old version a while")
    else:
        console.print("served: queries now read the new version")


#: chunks with events listed one by one in the summary; more are folded into one line (``--json`` lists all)
SUMMARY_ROWS = 12


def _summary(results, mode: str, wait: bool) -> None:  # type: ignore[no-untyped-def]
    table = Table(title="backfill summary", show_lines=False)
    for col, kw in (("datasource", {}), ("chunk", {"no_wrap": True}), ("status", {}), ("rows before", {"justify": "right"}),
                    ("events before", {"justify": "right"}), ("rows now", {"justify": "right"}),
                    ("events now", {"justify": "right"}), ("serving version", {"no_wrap": True})):  # fmt: skip
        table.add_column(col, **kw)
    show_counts = mode == "local" or wait
    listed = results if mode != "local" else _with_data(results)
    folded = listed[SUMMARY_ROWS - 2:] if len(listed) > SUMMARY_ROWS else []
    for r in listed[:len(listed) - len(folded)]:
        status = r.status if not r.error else f"{r.status}: {r.error[:80]}"
        table.add_row(
            r.datasource, r.interval.iso(), status,
            *(map(str, (r.before_rows, r.before_events, r.rows, r.events)) if show_counts else ("", "", "", "")),
            r.version if show_counts else r.run_id,
        )  # fmt: skip
    if folded:
        statuses = sorted({r.status for r in folded})
        table.add_row(
            ", ".join(sorted({r.datasource for r in folded})), f"… {len(folded):,} more chunks (--json lists each)",
            ", ".join(statuses),
            *(map(lambda n: f"{n:,}", (sum(r.before_rows for r in folded), sum(r.before_events for r in folded),
                                       sum(r.rows for r in folded), sum(r.events for r in folded)))
              if show_counts else ("", "", "", "")),
            _versions_text(folded) if show_counts else "",
        )  # fmt: skip
    if mode == "local":
        for ds, status, error, rest in _without_data(results):
            what = "no events (tombstones)" if status == "published" else "no events"
            table.add_row(
                ds, f"{len(rest):,} other chunk{'s' if len(rest) != 1 else ''}: {what}",
                status if not error else f"{status}: {error[:80]}", "0", "0", "0", "0", _versions_text(rest),
            )  # fmt: skip
    out = Console(highlight=False)
    if not out.is_terminal:  # piped or captured: do not squeeze ISO intervals and versions into 80 columns
        out = Console(highlight=False, width=220)
    out.print(table)


def _versions_text(rows) -> str:  # type: ignore[no-untyped-def]
    """The one version a line of folded chunks is served by, or how many there are."""
    versions = sorted({r.version for r in rows})
    return versions[0] if len(versions) == 1 else f"{len(versions):,} versions"


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
