"""``radctl druid specs D [--interval I]``, ``radctl druid submit D --overlord URL [--interval I] [--wait]``,
``radctl druid reindex D --interval I`` and ``radctl druid sync`` (the last two for the Druid cluster of the
``druid:`` settings, which radstack otherwise keeps in step by itself: docs/druid-cluster.md).

``specs`` prints, as JSON on stdout, the Druid ingestion specs generated from datasource ``D``'s spec
(:mod:`radstack.druid_cluster.specs`): ``{"supervisor": …}`` (Kafka supervisor on the processed topic)
and, with ``--interval``, ``"index_parallel"`` re-indexing the Parquet files radstack serves for that
interval (its batch output) with ``appendToExisting: false``. ``--only supervisor|index_parallel``
prints that one spec alone (ready for ``curl -d @-``).

``submit`` posts them to a Druid Overlord: with ``--interval`` the ``index_parallel`` task (plus the
supervisor if ``--supervisor``), without it the supervisor. ``--wait`` polls the task until it
succeeds or fails. Exit codes: 0 ok, 1 the task failed or timed out, 2 bad input, 3 the Overlord
refused or is unreachable.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson
import typer
from rich.console import Console

from radstack.config import ConfigError, Settings, load_settings
from radstack.druid_cluster.reindex import DruidReindexError, reindex
from radstack.druid_cluster.specs import DruidSpecError, chunk_interval, druid_specs
from radstack.druid_cluster.submit import DruidApiError, OverlordClient, TaskFailedError
from radstack.druid_cluster.sync import sync
from radstack.spec import SpecError
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.metadata import MetadataStore
from radstack.storage.supervisors import datasource_spec
from radstack.time.intervals import Interval, TimeParseError

console = Console(highlight=False, stderr=True, soft_wrap=True)

druid_app = typer.Typer(help="Ingestion specs for an Apache Druid cluster, and their submission.", no_args_is_help=True)


class Only(StrEnum):
    all = "all"
    supervisor = "supervisor"
    index_parallel = "index_parallel"


def build_specs(settings: Settings, datasource: str, interval: str | None, kafka: str | None = None) -> dict[str, Any]:
    """The specs of ``radctl druid specs`` (raises ``KeyError``/``ValueError`` on bad input)."""

    spec = datasource_spec(settings, datasource)
    iv = Interval.parse(interval) if interval else None
    segments: list[Any] = []
    if iv is not None:

        with MetadataStore.from_settings(settings) as md:
            segments = md.segments(spec.name, interval=chunk_interval(spec, iv))
    return druid_specs(
        spec,
        bootstrap_servers=kafka or str(settings.kafka.bootstrap_servers or ""),
        interval=iv,
        segments=segments,
        deep_storage=settings.deep_storage,
    )


def _load(config: Path | None, datasource: str, interval: str | None, kafka: str | None) -> dict[str, Any]:

    try:
        return build_specs(load_settings(config), datasource, interval, kafka)
    except KeyError as e:
        console.print(f"[red]error:[/red] {e.args[0] if e.args else e}")
    except (ConfigError, SpecError, TimeParseError, DruidSpecError) as e:
        console.print(f"[red]error:[/red] {e}")
    raise typer.Exit(2)


def _dump(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


@druid_app.command("specs")
def specs(
    datasource: str = typer.Argument(..., help="Datasource name (its spec is read from datasources.dir)."),
    interval: str = typer.Option(None, "--interval", "-i", help="ISO interval to re-index from the batch output (START/END)."),
    only: Only = typer.Option(Only.all, "--only", help="Print one spec alone: supervisor or index_parallel."),
    kafka: str = typer.Option(None, "--kafka", help="bootstrap.servers for the supervisor (default: kafka.bootstrap_servers)."),
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
) -> None:
    """Print Druid ingestion specs generated from the datasource spec."""
    out = _load(config, datasource, interval, kafka)
    if only is Only.all:
        typer.echo(_dump(out))
        return
    if only.value not in out:
        console.print(f"[red]error:[/red] --only {only.value} needs --interval")
        raise typer.Exit(2)
    typer.echo(_dump(out[only.value]))


@druid_app.command("submit")
def submit(
    datasource: str = typer.Argument(..., help="Datasource name."),
    overlord: str = typer.Option(..., "--overlord", help="Druid Overlord (or Router) URL, e.g. http://druid-overlord:8090."),
    interval: str = typer.Option(None, "--interval", "-i", help="Re-index this interval from the batch output."),
    supervisor: bool = typer.Option(False, "--supervisor", help="With --interval: submit the Kafka supervisor too."),
    wait: bool = typer.Option(False, "--wait", help="Poll the index task until it succeeds or fails."),
    timeout: float = typer.Option(1800.0, "--timeout", help="Seconds --wait waits."),
    kafka: str = typer.Option(None, "--kafka", help="bootstrap.servers for the supervisor."),
    user: str = typer.Option(None, "--user", help="Basic-auth user for the Overlord."),
    password: str = typer.Option(None, "--password", envvar="RADSTACK_DRUID_PASSWORD", help="Basic-auth password."),
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
) -> None:
    """Post the generated specs to a Druid Overlord and (with --wait) poll the task status."""

    out = _load(config, datasource, interval, kafka)
    auth = (user, password or "") if user else None
    with OverlordClient(overlord, auth=auth) as client:
        try:
            if interval is None or supervisor:
                sid = client.submit_supervisor(out["supervisor"])
                console.print(f"supervisor [bold]{sid}[/bold] submitted to {overlord}")
                typer.echo(orjson.dumps({"supervisor": sid}).decode())
            if interval is None:
                return
            task_id = client.submit_task(out["index_parallel"])
            console.print(f"task [bold]{task_id}[/bold] submitted to {overlord}")
            typer.echo(orjson.dumps({"task": task_id}).decode())
            if not wait:
                return
            status = client.wait_for_task(
                task_id,
                timeout_s=timeout,
                on_status=lambda st: console.print(f"  {st.id}: {st.status}"
                                                   + (f" ({st.runner_status})" if st.runner_status else "")),
            )
            typer.echo(orjson.dumps({"task": task_id, "status": status.status,
                                     "duration": status.duration_ms}).decode())
        except TaskFailedError as e:
            console.print(f"[red]failed:[/red] {e}")
            typer.echo(orjson.dumps({"task": e.status.id, "status": e.status.status,
                                     "errorMsg": e.status.error_msg}).decode())
            raise typer.Exit(1) from None
        except TimeoutError as e:
            console.print(f"[red]timeout:[/red] {e}")
            raise typer.Exit(1) from None
        except DruidApiError as e:
            console.print(f"[red]error:[/red] {e}")
            raise typer.Exit(3) from None


def _druid_settings(config: Path | None) -> Settings:
    settings = load_settings(config)
    if not settings.druid.overlord_url:
        console.print("[red]error:[/red] no Druid cluster in the settings: set druid.overlord_url and "
                      "druid.datasources (docs/druid-cluster.md)")
        raise typer.Exit(2)
    return settings


@druid_app.command("reindex")
def reindex_command(
    datasource: str = typer.Argument(..., help="A datasource druid.datasources names."),
    interval: str = typer.Option(..., "--interval", "-i", help="ISO interval (START/END); widened to whole segment chunks."),
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
) -> None:
    """Re-index what radstack serves for the interval in the Druid cluster of the settings, and wait until
    Druid's broker serves it (what every rebuild does by itself)."""
    settings = _druid_settings(config)
    if not settings.druid.serves(datasource):
        console.print(f"[red]error:[/red] {datasource!r} is not in druid.datasources ({', '.join(settings.druid.datasources) or 'none'})")
        raise typer.Exit(2)
    try:
        iv = Interval.parse(interval)
        with MetadataStore.from_settings(settings) as md:
            spec = datasource_spec(settings, datasource, md)
            res = reindex(settings, md, open_deep_storage(settings), spec, iv, started_by="radctl druid reindex",
                          note=lambda line: console.print(f"  {line}"))
    except (KeyError, TimeParseError, SpecError) as e:
        console.print(f"[red]error:[/red] {e.args[0] if isinstance(e, KeyError) and e.args else e}")
        raise typer.Exit(2) from None
    except DruidReindexError as e:
        console.print(f"[red]failed:[/red] {e}")
        raise typer.Exit(1) from None
    typer.echo(orjson.dumps(res.to_json()).decode())


@druid_app.command("sync")
def sync_command(config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read.")) -> None:
    """Post the supervisors, retention rules and compaction configs of druid.datasources that differ in
    Druid (what the server's druid_sync duty does every druid.sync_period_seconds)."""
    settings = _druid_settings(config)
    with MetadataStore.from_settings(settings) as md:
        report = sync(settings, md)
    for ds, actions in report.actions.items():
        for a in actions:
            console.print(f"  {ds}: {a}")
    for ds, err in report.errors.items():
        console.print(f"  [red]{ds}: {err}[/red]")
    typer.echo(orjson.dumps(report.to_json()).decode())
    if report.errors:
        raise typer.Exit(3)
