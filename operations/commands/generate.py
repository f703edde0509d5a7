"""``radctl generate ads|netflow``: seeded, rate-limited sample streams to Kafka or to files."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from radstack.config import load_settings
from radstack.time.intervals import Period, parse_instant
from realtime.generators import ads, netflow
from realtime.generators.common import FileSink, GeneratorOptions, KafkaSink, run
from realtime.topics import ensure_topics, topic_specs

console = Console(highlight=False, stderr=True)
generate_app = typer.Typer(help="Sample event streams (seeded, rate-limited).", no_args_is_help=True)


class Target(StrEnum):
    kafka = "kafka"
    file = "file"


def _common(
    name: str,
    events: int,
    rate: float,
    seed: int,
    duplicates: float,
    late: float,
    late_max: str,
    ctr: float,
    start: str | None,
    to: Target,
    out: Path | None,
    topics: dict[str, str],
    config: Path | None,
    quiet: bool,
) -> None:

    settings = load_settings(config)
    opts = GeneratorOptions(
        events=events,
        seed=seed,
        start_ms=parse_instant(start) if start else 0,
        sim_rate=rate if rate > 0 else 1000.0,
        duplicates=duplicates,
        late=late,
        late_max_ms=Period.parse(late_max).fixed_millis,
        ctr=ctr,
    )
    start_ms = opts.resolved_start()
    out_dir = (out or settings.home / "generated" / name).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    extra_files: list[Path] = []
    if name == "ads":
        stream = ads.generate(opts, start_ms)
        primary = "impressions"
    else:
        tables = netflow.Tables(seed)
        extra_files = tables.write(out_dir)
        stream = netflow.generate(opts, start_ms, tables)
        primary = "netflow"
    if to is Target.kafka:
        bs = settings.kafka.clients_bootstrap

        wanted = topic_specs(settings)
        ensure_topics(
            bs,
            {t: wanted.get(t, 2) for t in topics.values()},
            int(settings.kafka.replication_factor),
        )
        sink: FileSink | KafkaSink = KafkaSink(bs, topics)
        where = f"Kafka {bs} ({', '.join(sorted(set(topics.values())))})"
    else:
        sink = FileSink(out_dir)
        where = str(out_dir)
    console.print(
        f"generate {name}: {events} {primary} events, seed {seed}, rate {rate or 'unlimited'}/s → {where}"
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=False,
    ) as progress:
        task = progress.add_task(primary, total=events)
        summary = run(
            name, stream, opts, start_ms, sink, out_dir, rate=rate, primary=primary,
            progress=lambda n: progress.update(task, completed=n),
        )  # fmt: skip
    summary.files += [str(p) for p in extra_files]
    for s, c in sorted(summary.streams.items()):
        console.print(f"  {s:12} unique {c.unique:>9}  duplicates {c.duplicates:>7}  late {c.late:>7}")
    console.print(
        f"sent {summary.sent} message(s) in {summary.seconds:.1f}s: {summary.unique} unique, "
        f"{summary.duplicates} duplicates and {summary.late} late events injected; truth log in {out_dir / 'truth'}"
    )


EVENTS = typer.Option(10_000, "--events", "-n", help="Unique primary events (impressions / samples).")
RATE = typer.Option(0.0, help="Messages per second (0 = as fast as possible); also the event-time rate.")
SEED = typer.Option(1, help="Random seed: same options → same events.")
DUPS = typer.Option(0.05, "--duplicates", help="Probability of an exact re-send after each event.")
LATE = typer.Option(0.02, "--late", help="Fraction of events timestamped 2 min – --late-max before delivery.")
LATE_MAX = typer.Option("PT3H", "--late-max", help="ISO period: the latest a late event arrives after its timestamp.")
START = typer.Option(None, "--start", help="Event time of the first event (ISO; default now).")
TO = typer.Option(Target.kafka, "--to", help="kafka or file.")
OUT = typer.Option(None, "--out", help="Output directory (default $RADSTACK_HOME/generated/<name>).")
PREFIX = typer.Option("", "--topic-prefix", help="Prefix for the topic names.")
CONFIG = typer.Option(None, "--config", "-c", help="radstack.yaml to read.")
QUIET = typer.Option(False, "--quiet", "-q", help="No progress bar.")


@generate_app.command("ads")
def generate_ads(
    events: int = EVENTS,
    rate: float = RATE,
    seed: int = SEED,
    duplicates: float = DUPS,
    late: float = LATE,
    late_max: str = LATE_MAX,
    ctr: float = typer.Option(0.1, "--ctr", help="Click-through rate."),
    start: str = START,
    to: Target = TO,
    out: Path = OUT,
    topic_prefix: str = PREFIX,
    config: Path = CONFIG,
    quiet: bool = QUIET,
) -> None:
    """Impressions + clicks (joined by impression_id) → topics impressions, clicks."""
    topics = {"impressions": f"{topic_prefix}impressions", "clicks": f"{topic_prefix}clicks"}
    _common("ads", events, rate, seed, duplicates, late, late_max, ctr, start, to, out, topics, config, quiet)


@generate_app.command("netflow")
def generate_netflow(
    events: int = EVENTS,
    rate: float = RATE,
    seed: int = SEED,
    duplicates: float = DUPS,
    late: float = LATE,
    late_max: str = LATE_MAX,
    start: str = START,
    to: Target = TO,
    out: Path = OUT,
    topic_prefix: str = PREFIX,
    config: Path = CONFIG,
    quiet: bool = QUIET,
) -> None:
    """sFlow packet samples → topic netflow, plus ip_ranges.csv, dns.csv and countries.csv (enrichment, lookups)."""
    topics = {"netflow": f"{topic_prefix}netflow"}
    _common("netflow", events, rate, seed, duplicates, late, late_max, 0.0, start, to, out, topics, config, quiet)
