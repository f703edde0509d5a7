"""``radctl``: the one command-line entry point. It only lists commands; each lives in the module of
:mod:`operations.commands` named after what it does, which parses its arguments and calls the layer that
does the work.

:data:`COMMANDS` is the registry (name, where the command lives, its one-line summary, its heading). A
command's module is imported only when that command runs or shows its own help, so ``radctl --help``
and a mistyped command answer at once instead of loading the server, Spark and Kafka clients (the
summaries are checked against the commands' own help by ``tests/unit/test_cli_registry.py``).

Errors: a mistake the user can fix (any :class:`radstack.user_errors.UserError`: a bad interval, a
missing config file, a spec that does not parse) is printed as one ``error: …`` line with exit code 2;
``radctl --debug <command>`` shows its traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from radstack.private_files import private_process
from radstack.user_errors import UserError


@dataclass(frozen=True)
class Entry:
    name: str
    target: str  # "module:attribute": a command function or a typer.Typer of subcommands
    summary: str  # the first line of the command's own help
    panel: str  # the heading it is listed under


_RUN, _STACK, _DATA, _SETUP = "Run the stack", "Processes", "Data", "Setup and clusters"

#: Every command, in the order ``radctl --help`` lists them (under their headings).
COMMANDS: tuple[Entry, ...] = (
    Entry("quickstart", "operations.commands.quickstart:quickstart",
          "Start the stack, stream `ads`, query real-time segments, rebuild closed minutes in batch, compare.", _RUN),
    Entry("up", "operations.commands.stack:up",
          "Start the embedded stack in the background (Kafka, receiver, serving, …); idempotent.", _RUN),
    Entry("status", "operations.commands.stack:status",
          "Each process (pid, port, health) and Kafka consumer lag per group.", _RUN),
    Entry("down", "operations.commands.stack:down",
          "Stop every process of the embedded stack (TERM, wait, KILL the process group).", _RUN),
    Entry("serve", "operations.commands.serve:serve", "Start the embedded Druid-compatible server.", _STACK),
    Entry("receiver", "operations.commands.stack:receiver",
          "Run the HTTP event receiver (POST /v1/events/{topic} → Kafka) in the foreground.", _STACK),
    Entry("stream", "operations.commands.stream:stream",
          "Stream Kafka into real-time segments with Spark Structured Streaming.", _STACK),
    Entry("archiver", "operations.commands.archiver:run_archiver",
          "Copy every raw Kafka record into deep storage, exactly once, partitioned by event hour.", _STACK),
    Entry("kafka", "operations.commands.stack:kafka_app", "The embedded Kafka broker and topics.", _STACK),
    Entry("airflow", "operations.commands.stack:airflow_app",
          "The embedded Airflow 3 (the batch layer's scheduler and UI).", _STACK),
    Entry("backfill", "operations.commands.backfill:backfill",
          "Rebuild closed intervals from the raw archive; the new version overshadows the real-time data.", _DATA),
    Entry("compact", "operations.commands.compact:compact",
          "Compact old intervals into coarser, higher-version segments (see docs/operations-retention.md).", _DATA),
    Entry("generate", "operations.commands.generate:generate_app", "Sample event streams (seeded, rate-limited).", _DATA),
    Entry("supervisor", "operations.commands.supervisor:supervisor_app",
          "Supervisors posted through Druid's API: list them, export one as a spec file.", _DATA),
    Entry("druid", "operations.commands.druid:druid_app",
          "Ingestion specs for an Apache Druid cluster, and their submission.", _DATA),
    Entry("config", "operations.commands.config:show_config",
          "Print the effective configuration (defaults + radstack.yaml + RADSTACK_* variables).", _SETUP),
    Entry("auth", "operations.commands.auth:auth_app", "Credentials for server.auth and receiver.auth.", _SETUP),
    Entry("cluster", "operations.commands.cluster:cluster_app",
          "A local multi-node cluster: Kafka ×3, HDFS NameNode + DataNodes ×2, Spark standalone master + workers ×2.",
          _SETUP),
)
_BY_NAME = {e.name: e for e in COMMANDS}


def load_command(entry: Entry) -> Any:
    """The click command of a registry entry (imports its module)."""
    module, attribute = entry.target.split(":")
    obj = getattr(importlib.import_module(module), attribute)
    if isinstance(obj, typer.Typer):
        obj._add_completion = False  # completion belongs to no radctl command
        command = typer.main.get_group(obj)  # a group even with one subcommand (radctl auth hash-password)
    else:
        single = typer.Typer(add_completion=False)
        single.command(entry.name)(obj)
        command = typer.main.get_command(single)
    command.name = entry.name
    _conventional_metavars(command)
    return command


def _conventional_metavars(command: Any) -> None:
    """Help as Unix tools write it: ``--port PORT``, a flag with no value shown, choices listed (typer
    would show ``<int>`` and ``<bool>``)."""
    _flag_help_option(command)
    for param in command.params:
        descriptor = getattr(param, "type_descriptor", None)
        if param.param_type_name != "option" or param.metavar is not None or (descriptor and descriptor.is_choice):
            continue
        param.metavar = "" if param.is_flag else (param.name or "value").upper()
    for sub in getattr(command, "commands", {}).values():
        _conventional_metavars(sub)


def _flag_help_option(command: Any) -> None:
    """``-h/--help`` listed as the flag it is (no ``<bool>``)."""
    made = command.get_help_option

    def help_option(ctx: typer.Context) -> Any:
        option = made(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = help_option


class LazyCommands(TyperGroup):
    """A group that lists the registry from its summaries and imports a command only to run it."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        _conventional_metavars(self)

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return [e.name for e in COMMANDS]

    def get_command(self, ctx: typer.Context, cmd_name: str) -> TyperCommand | None:
        entry = _BY_NAME.get(cmd_name)
        if entry is None:
            return None
        return TyperCommand(entry.name, help=entry.summary, rich_help_panel=entry.panel)  # listed, not run

    def invoke(self, ctx: typer.Context) -> Any:
        """A user's mistake is one line on stderr and exit code 2 (``--debug``: the traceback)."""
        try:
            return super().invoke(ctx)
        except UserError as e:
            if ctx.params.get("debug"):
                raise
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None

    def resolve_command(self, ctx: typer.Context, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, listed, rest = super().resolve_command(ctx, args)
        return name, (load_command(_BY_NAME[name]) if listed is not None and name else listed), rest


def _version(value: bool) -> None:
    if value:
        try:
            typer.echo(f"radctl {version('radstack')}")
        except PackageNotFoundError:
            typer.echo("radctl (radstack, not installed as a package)")
        raise typer.Exit()


app = typer.Typer(
    name="radctl",
    cls=LazyCommands,
    help="radstack: Kafka + Spark streaming + Spark batch + a Druid-compatible serving layer.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _private(
    _version_flag: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                       help="Print radctl's version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback of an error, not just its message."),
) -> None:
    """Everything a radstack command writes, and its children write, is private (radstack/private_files.py)."""
    private_process()
