"""``radctl up`` / ``down`` / ``status`` (the embedded stack), ``radctl receiver`` (the HTTP event
receiver in the foreground) and ``radctl kafka run|topics`` (the embedded broker, topics)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import typer
from rich.console import Console
from rich.table import Table

from operations import airflow_local, stack
from operations.kafka_broker import KafkaBroker
from operations.processes import port_in_use
from radstack.config import load_settings
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant
from realtime.streaming.progress import streaming_status
from realtime.topics import ensure_topics, list_topics, topic_specs

console = Console(highlight=False)
kafka_app = typer.Typer(help="The embedded Kafka broker and topics.", no_args_is_help=True)

CONFIG_OPT = typer.Option(None, "--config", "-c", help="radstack.yaml to read.")


def _settings(config: Path | None):  # type: ignore[no-untyped-def]

    return load_settings(config)


def _names(text: str | None) -> list[str] | None:
    return [n.strip() for n in text.split(",") if n.strip()] if text else None


def up(
    only: str = typer.Option(None, help="Comma-separated processes to start (default: all)."),
    skip: str = typer.Option(None, help="Comma-separated processes not to start, e.g. serve."),
    with_airflow: bool = typer.Option(False, "--airflow", help="Also start the embedded Airflow 3 (airflow.embedded)."),
    config: Path = CONFIG_OPT,
) -> None:
    """Start the embedded stack in the background (Kafka, receiver, serving, …); idempotent."""

    settings = _settings(config)
    settings = airflow_local.with_embedded(settings) if with_airflow else settings
    console.print(f"radstack home: {settings.home}")
    try:
        outcomes = stack.up(settings, _names(only), _names(skip), say=console.print)
    except stack.StackError as e:
        console.print(f"[red]{e}[/red]")
        raise typer.Exit(2) from e
    if any(o.state == "failed" for o in outcomes):
        console.print(
            "[red]not everything started; `radctl status` shows what runs, `radctl down` stops it[/red]"
        )
        raise typer.Exit(1)
    console.print(f"[green]up[/green]; logs in {settings.logs_dir}, pid files in {settings.run_dir}")
    if any(o.name == "airflow" and o.state in ("started", "already-running") for o in outcomes):
        _print_airflow_login(settings)


def _print_airflow_login(settings) -> None:  # type: ignore[no-untyped-def]
    console.print(f"Airflow UI: {airflow_local.url(settings)}  user [bold]{airflow_local.USER}[/bold], password in "
                  f"{airflow_local.airflow_home(settings) / 'passwords.json'} (`radctl airflow status --show-password`)")


def down(
    config: Path = CONFIG_OPT,
    only: str = typer.Option(None, help="Comma-separated processes to stop (default: all)."),
) -> None:
    """Stop every process of the embedded stack (TERM, wait, KILL the process group)."""

    settings = _settings(config)
    outcomes = stack.down(settings, say=console.print, only=_names(only))
    if not outcomes:
        console.print("nothing is running")


def status(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    no_kafka: bool = typer.Option(False, "--no-kafka", help="Skip topics and consumer lag."),
    config: Path = CONFIG_OPT,
) -> None:
    """Each process (pid, port, health) and Kafka consumer lag per group.

    Exits 3 when something that was started is not running or not healthy."""

    settings = _settings(config)
    st = stack.status(settings, with_kafka=not no_kafka)
    bad = any(p.state == "crashed" or (p.state == "running" and not p.healthy) for p in st.processes)
    airflow = airflow_local.overview(settings) if _airflow_wanted(settings, st) else None
    druid = _druid(settings)
    if as_json:

        typer.echo(orjson.dumps({**st.as_dict(), "streaming": streaming_status(settings), "airflow": airflow,
                                 **({"druid": druid} if druid is not None else {})},
                                option=orjson.OPT_INDENT_2).decode())
    else:
        narrow = console.width < 120  # a terminal of 80 columns: no column squeezed to "dat…"
        _print_processes(settings, st, narrow)
        _print_streaming(settings, narrow)
        if not no_kafka:
            _print_kafka(st)
        if airflow is not None:
            _print_airflow(airflow)
        if druid is not None:
            _print_druid(druid)
    if bad:
        raise typer.Exit(3)


def _print_processes(settings, st, narrow: bool) -> None:  # type: ignore[no-untyped-def]
    """Each process, the receiver's spool and the archiver's watermarks."""
    t = Table(title=f"radstack processes ({settings.home})")
    for col in ("process", "state", "pid", "port", "health", *(() if narrow else ("log",))):
        t.add_column(col, no_wrap=True)
    for p in st.processes:
        health = (
            "[green]ok[/green]" if p.healthy else ("[red]failing[/red]" if p.state != "stopped" else "-")
        )
        state = {"running": "[green]running[/green]", "crashed": "[red]crashed[/red]"}.get(
            p.state, p.state
        )
        t.add_row(p.name, state, str(p.pid or "-"), str(p.port or "-"), health, *(() if narrow else (p.log,)))
    console.print(t)
    if narrow:
        console.print(f"logs: {settings.logs_dir}/<process>.log")
    for p in st.processes:
        if p.detail:
            console.print(f"{p.name}: {p.detail}")
    if st.spool is not None:
        sp = st.spool
        console.print(f"receiver spool: [{'yellow' if sp.depth else 'green'}]{sp.depth:,} event(s) not yet in "
                      f"Kafka[/] ({sp.bytes / 1e6:,.1f} MB in {sp.segments} file(s), delivered up to #{sp.committed:,}"
                      + (f", [red]{sp.dead_lettered:,} dead-lettered[/red] in {sp.directory}/dead-letter" if sp.dead_lettered else "")
                      + ")")

    if st.archiver_watermarks:
        now = now_millis()
        console.print("archiver watermark (backfill rebuilds chunks before it): " + ", ".join(
            f"{t} {'never ran' if w is None else format_instant(w) + f' ({(now - w) / 1000:,.0f} s ago)'}"
            for t, w in st.archiver_watermarks.items()))


def _print_streaming(settings, narrow: bool) -> None:  # type: ignore[no-untyped-def]
    """The streaming job's counters per datasource (and replica)."""
    streaming = streaming_status(settings)
    if streaming:
        sv = Table(title="real-time layer (radctl stream)")
        for col in ("datasource", "input/s", "processed/s", "batch ms", "last batch", "lag", "processed",
                    "dead-lettered", "thrown away", "duplicates", "committed offsets"):  # fmt: skip
            sv.add_column(col)
        rows = [(name, view) for ds, v in streaming.items()
                for name, view in [(ds, v), *((f"{ds} (replica {r})", rv) for r, rv in v.get("replicas", {}).items())]
                if "inputRate" in view]
        cells = []
        for ds, v in rows:
            rate = (lambda x: "-" if x is None else f"{x:,.0f}")  # noqa: E731
            count = (lambda x: f"{x:,}" if isinstance(x, int) else str(x if x is not None else "-"))  # noqa: E731
            cells.append((ds, rate(v["inputRate"]), rate(v["processedRate"]), str(v["batchDurationMs"] or "-"),
                          str(v["lastBatchId"]), str(v["lag"] if v["lag"] is not None else "-"), count(v["processed"]),
                          count(v["deadLettered"]), count(v["thrownAway"]), count(v["duplicatesDropped"]),
                          orjson.dumps(v["committedOffsets"] or {}).decode()))  # fmt: skip
        if narrow:  # one block per datasource, a counter per line
            console.print("[bold]real-time layer (radctl stream)[/bold]")
            for row in cells:
                console.print(f"  {row[0]}")
                for name, value in zip([c.header for c in sv.columns][1:], row[1:], strict=True):
                    console.print(f"    {name:<18} {value}")
        else:
            for row in cells:
                sv.add_row(*row)
            console.print(sv)


def _print_kafka(st) -> None:  # type: ignore[no-untyped-def]
    """Topics and consumer lag."""
    if st.kafka_error:
        console.print(f"kafka ({st.bootstrap_servers}): [yellow]{st.kafka_error}[/yellow]")
    else:
        topics = ", ".join(f"{k}({v})" for k, v in sorted(st.topics.items())) or "none"
        console.print(f"kafka {st.bootstrap_servers} topics: {topics}")
        g = Table(title="consumer lag")
        for col in ("group", "state", "topic", "partition", "committed", "end", "lag"):
            g.add_column(col)
        for grp in st.groups:
            if not grp["partitions"]:
                g.add_row(grp["group"], grp["state"], "-", "-", "-", "-", "0")
            for part in grp["partitions"]:
                g.add_row(
                    grp["group"], grp["state"], part["topic"], str(part["partition"]),
                    str(part["committed"]), str(part["end"]), str(part["lag"]),
                )  # fmt: skip
        if st.groups:
            console.print(g)
        else:
            console.print("no consumer groups")


def _druid(settings) -> dict | None:  # type: ignore[no-untyped-def,type-arg]
    """Druid's side (the ``druid:`` target), or None when there is none."""
    if not settings.druid.overlord_url or not settings.druid.datasources:
        return None
    # lazy: only a deployment with a Druid target pays for the metadata store here
    from radstack.druid_cluster.status import druid_overview
    from radstack.storage.metadata import MetadataStore

    with MetadataStore.from_settings(settings) as md:
        return druid_overview(settings, md)


def _print_druid(view: dict) -> None:  # type: ignore[type-arg]
    t = Table(title=f"serving on Druid ({view['overlord']}; re-index input {view['input']})")
    for col in ("datasource", "supervisor", "lag", "loaded", "re-index", "last correction"):
        t.add_column(col)
    for name, d in view["datasources"].items():
        sup = d["supervisor"]
        state = sup.get("detailedState") or sup.get("state") or "-"
        colour = "green" if sup.get("state") == "RUNNING" and sup.get("healthy") else "yellow"
        last = d.get("lastReindex") or {}
        reindex = (f"[red]{len(d['pendingReindex'])} pending[/red] ({d['pendingReindex'][0]} …)" if d["pendingReindex"]
                   else f"{last.get('status', '-')} {last.get('interval') or ''}".strip())
        fix = d.get("lastCorrection")
        t.add_row(name, f"[{colour}]{state}[/{colour}]", "-" if sup.get("aggregateLag") is None else f"{sup['aggregateLag']:,}",
                  "-" if d.get("loadPercent") is None else f"{d['loadPercent']:.0f} %", reindex,
                  "-" if not fix else f"{fix['realtimeEvents']:,} → {fix['batchEvents']:,} ({fix['gap']:+,})")
    console.print(t)


def _airflow_wanted(settings, st) -> bool:  # type: ignore[no-untyped-def]
    return bool(settings.airflow.url) or any(p.name == "airflow" for p in st.processes)


def _print_airflow(view: dict, show_password: str | None = None) -> None:  # type: ignore[type-arg]
    who = f"user {view['user']}" + (f", password {show_password}" if show_password else
                                    (f", password in {view['password_file']}" if view.get("password_file") else ""))
    console.print(f"airflow {view['url']} ({'embedded' if view['embedded'] else 'airflow.url'}; {who})"
                  + (f": [yellow]{view['error']}[/yellow]" if view.get("error") else ""))
    if not view.get("dags"):
        return
    t = Table(title="batch layer (Airflow DAGs)")
    for col in ("datasource", "dag", "paused", "last run", "state", "next interval", "running (tasks done)"):
        t.add_column(col)
    for d in view["dags"]:
        if d.get("error"):
            t.add_row(d["datasource"], d["dag_id"], "-", "-", f"[yellow]{d['error']}[/yellow]", "-", "-")
            continue
        last = d.get("last") or {}
        state = last.get("state") or "-"
        colour = {"success": "green", "failed": "red", "running": "cyan", "queued": "cyan"}.get(state)
        running = ", ".join(f"{r['interval'] or r['run_id']} ({r['tasks_done']}/{r['tasks']})" for r in d["running"]) or "-"
        t.add_row(d["datasource"], d["dag_id"], "yes" if d.get("paused") else "no", last.get("interval") or "-",
                  f"[{colour}]{state}[/]" if colour else state, d.get("next") or "-", running)
    console.print(t)


airflow_app = typer.Typer(help="The embedded Airflow 3 (the batch layer's scheduler and UI).", no_args_is_help=True)


@airflow_app.command("up")
def airflow_up(config: Path = CONFIG_OPT) -> None:
    """Start the embedded Airflow alone (installs .venv-airflow on first use); idempotent."""
    settings = airflow_local.with_embedded(_settings(config))
    outcomes = stack.up(settings, only=["airflow"], say=console.print)
    if any(o.state == "failed" for o in outcomes):
        raise typer.Exit(1)
    _print_airflow_login(settings)


@airflow_app.command("down")
def airflow_down(config: Path = CONFIG_OPT) -> None:
    """Stop the embedded Airflow (the rest of the stack keeps running)."""
    if not stack.down(_settings(config), say=console.print, only=["airflow"]):
        console.print("airflow is not running")


@airflow_app.command("status")
def airflow_status(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    show_password: bool = typer.Option(False, "--show-password", help="Print the embedded admin password."),
    config: Path = CONFIG_OPT,
) -> None:
    """Where Airflow is, who signs in, and each datasource's DAG: last and next run, runs in flight.
    Exit 3 when it does not answer."""
    settings = _settings(config)
    view = airflow_local.overview(settings)
    if as_json:
        typer.echo(orjson.dumps(view, option=orjson.OPT_INDENT_2).decode())
    else:
        _print_airflow(view, airflow_local.admin_password(settings) if show_password and view["embedded"] else None)
    if view.get("error"):
        raise typer.Exit(3)


def receiver(
    host: str = typer.Option(None, help="Bind address (default receiver.host)."),
    port: int = typer.Option(None, help="Port (default receiver.port)."),
    config: Path = CONFIG_OPT,
) -> None:
    """Run the HTTP event receiver (POST /v1/events/{topic} → Kafka) in the foreground."""

    from realtime.receiver import serve  # lazy: the receiver's web stack only for this command (CLI speed)

    serve(_settings(config), host, port)


@kafka_app.command("run")
def kafka_run(config: Path = CONFIG_OPT) -> None:
    """Run the embedded broker in the foreground (formats the storage on first use)."""

    broker = KafkaBroker.from_settings(_settings(config))
    for p in (broker.port, broker.controller_port):
        if port_in_use(broker.host, p):
            console.print(f"[red]port {broker.host}:{p} is already in use[/red]")
            raise typer.Exit(1)
    broker.prepare()
    console.print(f"kafka on {broker.bootstrap_servers}; log: {broker.log_file}")
    cmd = broker.command()
    os.execv(cmd[0], cmd)


@kafka_app.command("topics")
def kafka_topics(
    create: bool = typer.Option(True, help="Create the configured topics (kafka.topics) first."),
    config: Path = CONFIG_OPT,
) -> None:
    """Create the configured topics (replication kafka.replication_factor) and list all topics."""

    settings = _settings(config)
    bs = settings.kafka.clients_bootstrap
    if create:
        created = ensure_topics(bs, topic_specs(settings), int(settings.kafka.replication_factor))
        if created:
            console.print(f"created: {', '.join(created)}")
    for name, n in sorted(list_topics(bs).items()):
        console.print(f"{name}\t{n} partition(s)")
