"""``radctl config``: show the effective configuration and where each value can be set."""

from __future__ import annotations

from pathlib import Path

import typer
import yaml

from radstack.operations.cli import app


@app.command("config")
def show_config(
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
    keys: bool = typer.Option(False, "--keys", help="List every key with its environment variable."),
) -> None:
    """Print the effective configuration (defaults + radstack.yaml + RADSTACK_* variables)."""
    from radstack.config import env_name, flatten, load_settings

    settings = load_settings(config)
    if keys:
        for key, value in flatten(settings.raw).items():
            typer.echo(f"{key}\t{env_name(key)}\t{value!r}")
        return
    typer.echo(f"# source: {settings.source or 'defaults and environment only'}")
    typer.echo(yaml.safe_dump(settings.raw, sort_keys=False).rstrip())
