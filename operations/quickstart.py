"""The quickstart: the whole Lambda architecture end to end on the embedded stack, narrated.

1. start the stack (Kafka, receiver, serving process, archiver, streaming job);
2. stream the ``ads`` workload with duplicates and late events, showing Druid SQL answers from the
   real-time segments as they grow;
3. wait until the minutes it wrote are closed (window period + the archiver's watermark);
4. rebuild them from the raw archive with the Spark batch job (a newer version);
5. show the same queries again — now equal to the exact truth from the generator's log — and which
   segment versions serve them;
6. print how to query it and how to stop it.

Everything noisy (Kafka, Spark, the JVMs) logs to files under ``$RADSTACK_HOME/logs``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from batch.backfill import check_plan_closed, plan_backfill, run_local
from batch.planning import NotClosedError
from operations import airflow_local, stack
from operations.served import server_url
from radstack.config import Settings, load_settings
from radstack.time.clock import now_millis
from radstack.time.intervals import Interval, Period, format_instant, parse_instant
from realtime.generators import ads
from realtime.generators.common import GeneratorOptions, KafkaSink
from realtime.generators.common import run as run_generator
from realtime.streaming.progress import streaming_health

EXAMPLE_SPEC = Path(__file__).resolve().parent.parent / "examples" / "quickstart" / "ads.yaml"
DATASOURCE = "ads"
MINUTE = 60_000
#: the longest the generator's first late event waits for the stream's first rows
FIRST_ROWS_TIMEOUT_S = 300

# Faster loops than the production defaults, written to the quickstart home's radstack.yaml only
# when that file does not exist yet.
QUICKSTART_CONFIG = """\
# Written by `radctl quickstart`: shorter loops than the defaults so the demo moves quickly.
archiver:
  max_age_seconds: 5
coordinator:
  period_seconds: 2
# No warm Spark (docs/batch.md, "The warm Spark"): a demo runs a rebuild or two, and a Connect server's
# first job, with its JIT cold, takes longer than a Spark of its own. Set true for scheduled work.
spark:
  connect_server: false
"""


class QuickstartError(RuntimeError):
    """A step of the quickstart that could not be done (the message says what to do)."""


@dataclass
class QuickstartOptions:
    events: int = 24_000
    rate: float = 400.0
    duplicates: float = 0.05
    late: float = 0.03
    late_max: str = "PT4M"
    seed: int = 42
    down: bool = False  # stop the stack at the end
    config: Path | None = None
    airflow: bool = False  # last step: start the embedded Airflow (its UI reprocesses intervals)


@dataclass
class Answer:
    events: int
    rows: int
    revenue: float


@dataclass
class QuickstartResult:
    interval: Interval
    realtime: Answer
    batch: Answer
    truth: Answer
    versions: list[dict[str, Any]] = field(default_factory=list)
    corrections: dict[str, Any] = field(default_factory=dict)  # sys.corrections, summed over the interval
    sent: dict[str, Any] = field(default_factory=dict)  # the generator's summary (duplicates, late, …)
    seconds: float = 0.0
    airflow_seconds: float | None = None  # --airflow: how long the embedded Airflow took to be healthy

    def to_json(self) -> dict[str, Any]:
        return {
            "interval": self.interval.iso(),
            "realtime": self.realtime.__dict__,
            "batch": self.batch.__dict__,
            "truth": self.truth.__dict__,
            "versions": self.versions,
            "corrections": self.corrections,
            "sent": self.sent,
            "seconds": round(self.seconds, 1),
            "airflow_seconds": None if self.airflow_seconds is None else round(self.airflow_seconds, 1),
        }


# ---- setup ---------------------------------------------------------------------------------------
def prepare_home(settings: Settings, say: Any) -> Settings:
    """Install the quickstart's datasource spec and fast-loop config; returns the reloaded settings."""
    home = settings.home
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / "radstack.yaml"
    if settings.source is None and not cfg.exists():
        cfg.write_text(QUICKSTART_CONFIG)
        say(f"wrote {cfg}")
    ds_dir = settings.datasources_dir
    ds_dir.mkdir(parents=True, exist_ok=True)
    target = ds_dir / "ads.yaml"
    if not target.exists():
        shutil.copyfile(EXAMPLE_SPEC, target)
        say(f"installed the datasource spec {target}")
    elif target.read_text() != EXAMPLE_SPEC.read_text():
        raise QuickstartError(
            f"{target} exists and is not the quickstart's spec; move it away or use another "
            "RADSTACK_HOME for the quickstart"
        )
    return load_settings(settings.source, env=os.environ)


def sql(settings: Settings, query: str, *, timeout: float = 30.0) -> list[dict[str, Any]]:
    r = httpx.post(server_url(settings) + "/druid/v2/sql", json={"query": query}, timeout=timeout)
    if r.status_code != 200:
        raise QuickstartError(f"SQL failed ({r.status_code}): {r.text[:300]}")
    return list(r.json())


def answer(settings: Settings, interval: Interval) -> Answer:
    where = f"__time >= TIMESTAMP '{_sql_ts(interval.start)}' AND __time < TIMESTAMP '{_sql_ts(interval.end)}'"
    row = sql(
        settings,
        f'SELECT COALESCE(SUM("count"), 0) AS events, COUNT(*) AS "rows", '
        f"COALESCE(SUM(price), 0) AS revenue FROM {DATASOURCE} WHERE {where}",
    )[0]
    return Answer(int(row["events"]), int(row["rows"]), round(float(row["revenue"]), 2))


def _sql_ts(ms: int) -> str:
    return format_instant(ms).replace("T", " ").rstrip("Z")


def truth(truth_file: Path, interval: Interval) -> Answer:
    """The exact answer from the generator's log of unique events."""

    events, revenue = 0, 0.0
    with truth_file.open("rb") as f:
        for line in f:
            e = json.loads(line)
            if interval.contains_instant(parse_instant(e["timestamp"])):
                events += 1
                revenue += float(e["price"])
    return Answer(events, -1, round(revenue, 2))


def versions(settings: Settings, interval: Interval) -> list[dict[str, Any]]:
    return sql(
        settings,
        'SELECT "start", version, COUNT(*) AS segments, SUM(num_rows) AS "rows", '
        "MAX(is_realtime) AS realtime, MIN(is_overshadowed) AS overshadowed "
        f"FROM sys.segments WHERE datasource = '{DATASOURCE}' "
        f"AND \"start\" >= '{format_instant(interval.start)}' AND \"end\" <= '{format_instant(interval.end)}' "
        'GROUP BY 1, 2 ORDER BY 1, 2',
    )


@contextlib.contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Send file descriptor 2 (where JVMs write) to ``path`` for the duration."""
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = os.dup(2)
    with path.open("ab") as f:
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


# ---- the run ---------------------------------------------------------------------------------------
def run(opts: QuickstartOptions, console: Console | None = None) -> QuickstartResult:

    # not a terminal (CI, a pipe): wide enough that no table column is cut; a terminal wraps instead
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    t_start = time.monotonic()
    say = lambda m: console.print(f"  [dim]{m}[/dim]")  # noqa: E731

    console.rule("[bold]1. Start the stack")
    settings = prepare_home(load_settings(opts.config), say)
    outcomes = stack.up(settings, say=say)
    failed = [o for o in outcomes if o.state == "failed"]
    if failed:
        raise QuickstartError(f"`radctl up` failed: {failed[0]}; see the logs under {settings.logs_dir}")
    _wait(lambda: _stream_ready(settings), 180, "the streaming job to report progress", console)

    console.rule("[bold]2. Stream the ads workload (duplicates and late events included)")
    gen = _start_generator(settings, opts)
    _watch_realtime(settings, gen, console)
    summary = gen.result()
    console.print("  " + sent_line(summary, opts.late_max))

    # The rebuild covers every minute an event of this run can belong to.
    late_ms = Period.parse(opts.late_max).fixed_millis
    start = (summary["first_ms"] - late_ms) // MINUTE * MINUTE
    end = (summary["last_ms"] // MINUTE + 1) * MINUTE
    interval = Interval(start, end)
    console.rule("[bold]3. Wait until those minutes are closed")
    _wait_closed(settings, interval, console)
    before = answer(settings, interval)

    console.rule("[bold]4. Rebuild them from the raw archive (Spark batch, a newer version)")
    _backfill(settings, interval, console)
    _wait(lambda: _batch_served(settings, interval), 60, "the broker to serve the new version", console)
    after = answer(settings, interval)
    exact = truth(gen.truth_file, interval)
    fixes = corrections(settings, interval)

    console.rule("[bold]5. The same query, before and after the rebuild")
    _show_answers(console, interval, before, after, exact, fixes)
    served = versions(settings, interval)
    _show_versions(console, served)

    console.rule("[bold]6. Query it yourself")
    _show_how_to(console, settings)
    airflow_seconds = None
    if opts.airflow and not opts.down:
        console.rule("[bold]7. Reprocess from the Airflow UI")
        airflow_seconds = _start_airflow(settings, console)
    elif not opts.down:
        console.print("  Airflow UI for reprocessing: [bold]radctl airflow up[/bold] (~20 s; or `radctl quickstart --airflow`)")
    if opts.down:
        console.rule("[bold]Stopping the stack (--down)")
        stack.down(settings, say=say)
    else:
        console.print("  The stack keeps running. Stop it with [bold]radctl down[/bold].")
    result = QuickstartResult(interval, before, after, exact, served, fixes, summary, time.monotonic() - t_start,
                              airflow_seconds)
    console.print(f"\n  quickstart finished in {result.seconds:.0f} s")
    return result


def _stream_ready(settings: Settings) -> bool:

    return streaming_health(settings, max_age_seconds=30)


def sent_line(summary: dict[str, Any], late_max: str) -> str:
    """What the generator sent, per stream, adding up to the total: ``sent 27,730 messages: 25,180
    impressions (24,000 unique + 1,180 re-sent; 672 of them late) + 2,550 clicks (…)``."""
    parts = [f"{c['unique'] + c['duplicates']:,} {name} ({c['unique']:,} unique + {c['duplicates']:,} re-sent; "
             f"{c['late']:,} of them late)" for name, c in summary["streams"].items()]
    return f"sent {summary['sent']:,} messages: " + " + ".join(parts) + f"; late: up to {late_max} after their time"


def _wait(check: Any, timeout: float, what: str, console: Console) -> None:
    deadline = time.monotonic() + timeout
    with console.status(f"waiting for {what} …"):
        while True:
            try:
                if check():
                    return
            except (httpx.HTTPError, QuickstartError):
                pass
            if time.monotonic() > deadline:
                raise QuickstartError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(1.0)


class _Generator(threading.Thread):
    def __init__(self, settings: Settings, opts: QuickstartOptions) -> None:
        super().__init__(daemon=True, name="quickstart-generator")
        self.settings, self.opts = settings, opts
        self.out_dir = settings.home / "generated" / f"quickstart-{int(time.time())}"
        self.truth_file = self.out_dir / "truth" / "impressions.jsonl"
        self.unique = 0
        self.error: BaseException | None = None
        self.summary: dict[str, Any] | None = None
        #: set once the real-time answer shows rows: the stream has committed a micro-batch, so its
        #: watermark exists; the first late event waits for it (else a slow first micro-batch could hold
        #: every late event of a short run, and none would be late for it)
        self.stream_has_rows = threading.Event()

    def run(self) -> None:
        try:

            o = self.opts
            sink = KafkaSink(self.settings.kafka.clients_bootstrap, {"impressions": "impressions", "clicks": "clicks"})

            def before_first_late() -> None:  # what was generated so far goes out, then the stream shows it
                sink.send_pending()
                self.stream_has_rows.wait(timeout=FIRST_ROWS_TIMEOUT_S)

            opts = GeneratorOptions(
                events=o.events, seed=o.seed, sim_rate=o.rate, duplicates=o.duplicates, late=o.late,
                late_max_ms=Period.parse(o.late_max).fixed_millis, before_first_late=before_first_late,
            )  # fmt: skip
            start_ms = opts.resolved_start()
            s = run_generator(
                "ads", ads.generate(opts, start_ms), opts, start_ms, sink, self.out_dir, rate=o.rate,
                primary="impressions", progress=self._progress,
            )  # fmt: skip

            imp = s.streams["impressions"]
            with self.truth_file.open("rb") as f:
                stamps = [parse_instant(json.loads(line)["timestamp"]) for line in f]
            self.summary = {
                "sent": s.sent,
                "unique": imp.unique,
                "duplicates": imp.duplicates,
                "late": imp.late,
                "streams": {name: vars(c) for name, c in s.streams.items()},  # impressions and clicks
                "first_ms": min(stamps),
                "last_ms": max(stamps),
            }
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            self.error = e

    def _progress(self, n: int) -> None:
        self.unique = n

    def result(self) -> dict[str, Any]:
        self.join()
        if self.error is not None:
            raise QuickstartError(f"the generator failed: {self.error}") from self.error
        assert self.summary is not None
        return self.summary


def _start_generator(settings: Settings, opts: QuickstartOptions) -> _Generator:
    g = _Generator(settings, opts)
    g.start()
    return g


def _watch_realtime(settings: Settings, gen: _Generator, console: Console) -> Interval:
    """Show the real-time answer growing while the generator runs; returns the interval watched."""
    start = (now_millis() - Period.parse(gen.opts.late_max).fixed_millis) // MINUTE * MINUTE
    with Progress(
        TextColumn("  {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.fields[answer]}"), console=console,
    ) as progress:  # fmt: skip
        task = progress.add_task("impressions", total=gen.opts.events, answer="")
        last_query = 0.0
        while gen.is_alive():
            progress.update(task, completed=gen.unique)
            # every second until the stream shows its first rows (the generator's late events wait for them)
            if time.monotonic() - last_query > (3 if gen.stream_has_rows.is_set() else 1):
                last_query = time.monotonic()
                with contextlib.suppress(httpx.HTTPError, QuickstartError):
                    a = answer(settings, Interval(start, now_millis() + MINUTE))
                    progress.update(task, answer=f"real-time SQL: {a.events:,} events in {a.rows:,} rows")
                    if a.events > 0:
                        gen.stream_has_rows.set()
            time.sleep(0.25)
        progress.update(task, completed=gen.unique)
    # let the last micro-batches land, then show the real-time answer once more
    time.sleep(3)
    iv = Interval(start, now_millis() + MINUTE)
    with contextlib.suppress(httpx.HTTPError, QuickstartError):
        a = answer(settings, iv)
        console.print(f"  real-time answer now: {a.events:,} events (SUM(\"count\")) in {a.rows:,} rolled-up rows")
    return iv


def _wait_closed(settings: Settings, interval: Interval, console: Console) -> None:

    plan = plan_backfill(settings, interval.iso(), DATASOURCE)
    deadline = time.monotonic() + 300
    t0 = time.monotonic()
    with console.status(f"waiting for {interval.iso()} to close (window period + archiver watermark) …"):
        while True:
            try:
                check_plan_closed(settings, plan)
                console.print(
                    f"  {interval.iso()} is closed: its end plus the window period has passed and the "
                    f"archiver's watermark is beyond it (waited {time.monotonic() - t0:.0f} s)"
                )
                return
            except NotClosedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)


def _backfill(settings: Settings, interval: Interval, console: Console) -> None:

    plan = plan_backfill(settings, interval.iso(), DATASOURCE)
    log = settings.logs_dir / "quickstart-backfill.log"
    with Progress(
        TextColumn("  {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console,
    ) as progress:  # fmt: skip
        task = progress.add_task(f"rebuild {plan.total} minute(s)", total=plan.total)

        def on_chunk(res: Any) -> None:
            if res.status != "running":
                progress.advance(task)

        with stderr_to(log):
            results = run_local(settings, plan, progress=on_chunk, started_by="radctl quickstart")
    failed = [r for r in results if r.status != "published"]
    if failed:
        raise QuickstartError(f"{len(failed)} chunk(s) failed, first: {failed[0].error}; see {log}")


def _batch_served(settings: Settings, interval: Interval) -> bool:
    rows = versions(settings, interval)
    live = [r for r in rows if not r["overshadowed"]]
    return bool(live) and all(not r["realtime"] for r in live)


def _show_answers(console: Console, interval: Interval, before: Answer, after: Answer, exact: Answer,
                  fixes: dict[str, Any]) -> None:  # fmt: skip
    t = Table(title=f"SELECT SUM(\"count\"), COUNT(*), SUM(price) FROM ads WHERE __time IN {interval.iso()}")
    t.add_column("answer")
    t.add_column("events", justify="right")
    t.add_column("rows", justify="right")
    t.add_column("revenue", justify="right")
    t.add_row("real-time segments (before)", f"{before.events:,}", f"{before.rows:,}", f"{before.revenue:,.2f}")
    t.add_row("batch rebuild (after)", f"{after.events:,}", f"{after.rows:,}", f"{after.revenue:,.2f}")
    t.add_row("exact truth (generator log)", f"{exact.events:,}", "", f"{exact.revenue:,.2f}")
    console.print(t)
    verdict = "equal" if (after.events, after.revenue) == (exact.events, exact.revenue) else "DIFFERENT"
    console.print(f"  The batch answer is [bold]{verdict}[/bold] to the truth.")
    c = Table(title="What the rebuild corrected, recorded at the swap (SELECT … FROM sys.corrections, summed)")
    for col in ("minutes", "real time", "exact", "gap", "late recovered", "duplicates removed", "invalid dropped"):
        c.add_column(col, justify="right")
    c.add_row(*(f"{int(fixes.get(k) or 0):,}" for k in ("minutes", "realtime_events", "batch_events", "event_gap",
                                                        "late_recovered", "duplicates_removed", "invalid_dropped")))
    console.print(c)
    console.print(f"  {correction_line(fixes)}")


def correction_line(fixes: dict[str, Any]) -> str:
    """What the corrections say about the real-time answer: the right sign and the right reason."""
    gap = int(fixes.get("event_gap") or 0)
    if gap > 0:
        return (f"The real-time answer was {gap:,} events below the exact one: events later than the window "
                "period are thrown away by the real-time layer; the rebuild read them from the archive.")
    if gap < 0:
        return (f"The real-time answer was {-gap:,} events above the exact one: copies that reached it outside "
                "the streaming dedup window were counted twice; the rebuild dedups exactly.")
    return "The real-time answer was exact too."


def corrections(settings: Settings, interval: Interval) -> dict[str, Any]:
    """``sys.corrections`` of the quickstart's rebuild, summed over its minutes."""
    rows = sql(settings,
               'SELECT COUNT(*) AS minutes, SUM(realtime_events) AS realtime_events, SUM(batch_events) AS batch_events, '
               'SUM(event_gap) AS event_gap, SUM(late_recovered) AS late_recovered, '
               'SUM(duplicates_removed) AS duplicates_removed, SUM(invalid_dropped) AS invalid_dropped '
               f"FROM sys.corrections WHERE datasource = '{DATASOURCE}' "
               f"AND \"start\" >= '{format_instant(interval.start)}' AND \"end\" <= '{format_instant(interval.end)}'")  # fmt: skip
    return {k: int(v or 0) for k, v in rows[0].items()}


def _show_versions(console: Console, rows: list[dict[str, Any]]) -> None:
    t = Table(title="Which segment versions serve each minute (sys.segments)")
    for c in ("minute", "version", "segments", "rows", "state"):
        t.add_column(c, overflow="fold")  # wrap, never cut a version string
    for r in rows:
        state = "overshadowed" if r["overshadowed"] else ("real-time" if r["realtime"] else "batch")
        if not r["rows"] and state == "batch":
            state = "batch (tombstone: no data)"
        t.add_row(r["start"][11:16], r["version"], str(r["segments"]), str(r["rows"]), state)
    console.print(t)


def _start_airflow(settings: Settings, console: Console) -> float:
    """Start the embedded Airflow (installing its virtualenv the first time); returns the seconds it took."""
    t0 = time.monotonic()
    on = airflow_local.with_embedded(settings)
    with console.status("starting Airflow 3 (a few minutes the first time: it installs .venv-airflow) …"):
        [outcome] = stack.up(on, only=["airflow"])
    if outcome.state == "failed":
        raise QuickstartError(f"Airflow did not start: {outcome.message}")
    seconds = time.monotonic() - t0
    console.print(f"""  Airflow is up in {seconds:.0f} s: {airflow_local.url(on)}  user [bold]{airflow_local.USER}[/bold],
             password: radctl airflow status --show-password
  Reprocess: open DAG radstack_rebuild_{DATASOURCE}, Trigger, conf {{"interval": "<START/END>"}}; or
             radctl backfill --interval <START/END> --datasource {DATASOURCE}   (goes through Airflow now)""")
    return seconds


def _show_how_to(console: Console, settings: Settings) -> None:
    url = server_url(settings)
    host, port = url.split("://")[1].split(":")
    console.print(f"""  Console:   {url}/
  curl:      curl -s {url}/druid/v2/sql -H 'Content-Type: application/json' \\
               -d '{{"query":"SELECT publisher, SUM(\\"count\\") AS events FROM ads GROUP BY 1 ORDER BY 2 DESC LIMIT 5"}}'
  pydruid:   from pydruid.db import connect
             cur = connect(host="{host}", port={port}, path="/druid/v2/sql/", scheme="http").cursor()
             cur.execute("SELECT COUNT(*) FROM ads"); print(cur.fetchall())
  Superset:  druid://{host}:{port}/druid/v2/sql/
  More data: radctl generate ads --events 100000 --rate 2000
  Rebuild:   radctl backfill --interval <START/END> --datasource ads
  Status:    radctl status        Stop: radctl down""")
