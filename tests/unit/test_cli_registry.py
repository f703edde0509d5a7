"""``radctl``'s command registry (operations/cli.py): every command it lists loads, its listed summary is
the command's own first help line, and listing the commands imports none of them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from operations.cli import COMMANDS, Entry, app, load_command


@pytest.mark.parametrize("entry", COMMANDS, ids=[e.name for e in COMMANDS])
def test_the_listed_summary_is_the_commands_own(entry: Entry) -> None:
    command = load_command(entry)
    assert command.name == entry.name
    assert (command.help or "").strip().splitlines()[0].strip() == entry.summary


def test_help_lists_every_command_without_importing_them() -> None:
    code = ("import sys; from operations.cli import app; from typer.testing import CliRunner; "
            "r = CliRunner().invoke(app, ['--help']); assert r.exit_code == 0, r.output; "
            "heavy = [m for m in ('operations.commands.serve', 'serving.app', 'pyspark', 'confluent_kafka', 'duckdb') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_conventional_help_flags() -> None:
    runner = CliRunner()
    short, long = runner.invoke(app, ["-h"]), runner.invoke(app, ["--help"])
    assert short.exit_code == long.exit_code == 0 and short.output == long.output
    for entry in COMMANDS:
        assert entry.name in long.output
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.output.startswith("radctl ")
    serve = runner.invoke(app, ["serve", "-h"])
    assert serve.exit_code == 0 and "--port" in serve.output
    assert "<int>" not in serve.output and "<bool>" not in serve.output and "--install-completion" not in serve.output
    assert runner.invoke(app, ["nosuch"]).exit_code == 2


def test_a_user_mistake_is_one_line_and_exit_2(tmp_path: object) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["status", "-c", "missing.yaml"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: config file missing.yaml does not exist"
    result = runner.invoke(app, ["generate", "ads", "--start", "yesterday", "--events", "1"])
    assert result.exit_code == 2 and result.output.strip() == "error: cannot parse instant 'yesterday'"
    # --debug keeps the exception (and its traceback) for a bug report
    result = runner.invoke(app, ["--debug", "status", "-c", "missing.yaml"])
    assert result.exit_code == 1 and type(result.exception).__name__ == "ConfigError"
