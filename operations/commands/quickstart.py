"""``radctl quickstart``: the end-to-end demo (what ``make quickstart`` runs)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from operations.quickstart import QuickstartError, QuickstartOptions, run


def quickstart(
    events: int = typer.Option(24_000, help="Unique impressions to stream."),
    rate: float = typer.Option(400.0, help="Impressions per second."),
    short: bool = typer.Option(False, "--short", help="A shorter run (6,000 events) for tests and a first look."),
    down: bool = typer.Option(False, "--down", help="Stop the stack at the end (default: leave it running)."),
    airflow: bool = typer.Option(False, "--airflow", help=(
        "Last step: start the embedded Airflow 3 UI for reprocessing (~20 s; a few minutes more the first "
        "time, to install .venv-airflow).")),
    result_json: Path = typer.Option(None, "--result-json", help="Write the final answers as JSON here."),
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
) -> None:
    """Start the stack, stream `ads`, query real-time segments, rebuild closed minutes in batch, compare."""

    opts = QuickstartOptions(events=6_000 if short else events, rate=rate, down=down, config=config, airflow=airflow)
    try:
        result = run(opts)
    except QuickstartError as e:
        typer.echo(f"quickstart failed: {e}", err=True)
        raise typer.Exit(1) from e
    if result_json:
        result_json.write_text(json.dumps(result.to_json(), indent=2))
