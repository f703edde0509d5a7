"""``radctl``: the one command-line entry point. It only registers commands; each lives in the module
of :mod:`operations.commands` named after what it does, which parses its arguments and calls
the layer that does the work."""

from __future__ import annotations

import typer

from operations.commands import (
    archiver,
    auth,
    backfill,
    cluster,
    compact,
    config,
    druid,
    generate,
    quickstart,
    serve,
    stack,
    stream,
    supervisor,
)
from radstack.private_files import private_process

app = typer.Typer(
    name="radctl",
    help="radstack: Kafka + Spark streaming + Spark batch + a Druid-compatible serving layer.",
    no_args_is_help=True,
    add_completion=False,
)



@app.callback()
def _private() -> None:
    """Everything a radstack command writes, and its children write, is private (radstack/private_files.py)."""
    private_process()


app.command("archiver")(archiver.run_archiver)
app.add_typer(auth.auth_app, name="auth")
app.command("backfill")(backfill.backfill)
app.add_typer(cluster.cluster_app, name="cluster")
app.command("compact")(compact.compact)
app.command("config")(config.show_config)
app.add_typer(druid.druid_app, name="druid")
app.add_typer(generate.generate_app, name="generate")
app.command("quickstart")(quickstart.quickstart)
app.command()(serve.serve)
app.command()(stack.up)
app.command()(stack.down)
app.command()(stack.status)
app.command()(stack.receiver)
app.add_typer(stack.kafka_app, name="kafka")
app.add_typer(stack.airflow_app, name="airflow")
app.command("stream")(stream.stream)
app.add_typer(supervisor.supervisor_app, name="supervisor")
