"""``radctl``: the one command-line entry point. Each command group lives in the module named after
what it does and registers itself on :data:`app` here."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="radctl",
    help="radstack: Kafka + Spark streaming + Spark batch + a Druid-compatible serving layer.",
    no_args_is_help=True,
    add_completion=False,
)


def _register() -> None:
    # Imported for their side effect of adding commands to `app`.
    import radstack.operations.commands.generate  # noqa: F401
    import radstack.operations.commands.stack  # noqa: F401
    from radstack.operations.commands import (  # noqa: F401
        archiver,
        backfill,
        compact,
        config,
        druid,
        quickstart,
        serve,
        stream,
    )


_register()
