"""``radctl config``: show the effective configuration and where each value can be set."""

from __future__ import annotations

from pathlib import Path

import typer
import yaml

from radstack.config import config_keys, env_name, load_settings


def show_config(
    config: Path = typer.Option(None, "--config", "-c", help="radstack.yaml to read."),
    keys: bool = typer.Option(False, "--keys", help="List every key: environment variable, value, description."),
) -> None:
    """Print the effective configuration (defaults + radstack.yaml + RADSTACK_* variables)."""
    settings = load_settings(config)
    if keys:
        for key, _default, description in config_keys():
            value: object = settings.to_dict()
            for part in key.split("."):
                value = value[part]  # type: ignore[index]
            typer.echo(f"{key}\t{env_name(key)}\t{value!r}\t{description}")
        return
    typer.echo(f"# source: {settings.source or 'defaults and environment only'}")
    typer.echo(yaml.safe_dump(settings.to_dict(), sort_keys=False).rstrip())
