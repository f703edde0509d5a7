"""``radctl supervisor list`` and ``radctl supervisor export ID``: the supervisors posted to the
Overlord API (``/druid/indexer/v1/supervisor``), and the radstack datasource spec file equivalent to
one — the same ``dataSchema`` and ``processing`` the stream, the archiver and the rebuild use."""

from __future__ import annotations

from pathlib import Path

import typer
import yaml
from rich.console import Console

from radstack.config import load_settings
from radstack.storage.metadata import MetadataStore
from radstack.storage.supervisors import load_supervisors

supervisor_app = typer.Typer(help="Supervisors posted through Druid's API: list them, export one as a spec file.",
                             no_args_is_help=True)
console = Console(highlight=False)
err = Console(highlight=False, stderr=True)


def _records(config: Path | None) -> dict:  # type: ignore[type-arg]
    settings = load_settings(config)
    with MetadataStore.from_settings(settings) as md:
        return load_supervisors(md)


@supervisor_app.command("list")
def list_supervisors(config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read.")) -> None:
    """One line per supervisor: id, state, topic."""
    for rec in sorted(_records(config).values(), key=lambda r: r.id):
        console.print(f"{rec.id}\t{rec.state}\t{rec.topic}")


@supervisor_app.command("export")
def export(
    supervisor_id: str = typer.Argument(..., help="The supervisor's id (its datasource)."),
    output: Path = typer.Option(None, "--output", "-o", help="Write the spec here (default: standard output)."),
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
) -> None:
    """Write the radstack datasource spec (YAML) a supervisor runs as. To run the datasource from a
    spec file instead, terminate the supervisor and put the file in ``datasources.dir``: the stream
    keeps the same checkpoint (``checkpoints/<datasource>``), so it goes on from the same offsets."""
    rec = _records(config).get(supervisor_id)
    if rec is None:
        err.print(f"[red]no supervisor {supervisor_id!r}[/red] (radctl supervisor list)")
        raise typer.Exit(2)
    text = (f"# the radstack spec of supervisor {rec.id} (radctl supervisor export; posted {rec.created}, "
            f"state {rec.state})\n") + yaml.safe_dump(rec.datasource, sort_keys=False)
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text)
        err.print(f"wrote {output}")
