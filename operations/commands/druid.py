"""``radctl druid specs D [--interval I]`` and ``radctl druid submit D --overlord URL [--interval I] [--wait]``.

``specs`` prints, as JSON on stdout, the Druid ingestion specs generated from datasource ``D``'s spec
(:mod:`serving.druid_cluster.specs`): ``{"supervisor": …}`` (Kafka supervisor on the processed topic)
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
from radstack.spec import SpecError
from radstack.storage.metadata import MetadataStore
from radstack.storage.supervisors import datasource_spec
from radstack.time.intervals import Interval, TimeParseError
from serving.druid_cluster.specs import DruidSpecError, chunk_interval, druid_specs
from serving.druid_cluster.submit import DruidApiError, OverlordClient, TaskFailedError

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
