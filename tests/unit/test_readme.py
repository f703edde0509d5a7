"""Every command the README shows is exercised by a test (this file says which), and every
``radctl`` line parses against the real CLI — so the README cannot drift from the code."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.docs_blocks import names_a_test
from tests.readme_commands import README, ROOT, block_commands, inline_commands, shell_blocks, tour_commands

TOUR = "tests/integration/test_readme_tour.py::test_tour_runs_pasted_as_one_block"

#: README command (as written, or its first words) → the tests that run it
COVERAGE: dict[str, list[str]] = {
    "make quickstart": ["tests/unit/test_readme.py::test_make_quickstart_is_radctl_quickstart_after_setup", TOUR],
    "make test": ["tests/unit/test_readme.py::test_ci_runs_exactly_make_test"],  # and CI itself
    "source .venv/bin/activate": [TOUR],
    "radctl up": [TOUR, "tests/integration/test_stack.py::test_up_generate_status_down"],
    "radctl status": [TOUR, "tests/integration/test_stack.py::test_up_generate_status_down"],
    "radctl down": [TOUR, "tests/integration/test_stack.py::test_up_generate_status_down"],
    "radctl generate ads": [TOUR, "tests/integration/test_stack.py::test_up_generate_status_down"],
    "radctl backfill --interval": [TOUR, "tests/integration/test_batch_e2e.py"],
    "radctl backfill": [TOUR, "tests/integration/test_supervisor_api.py::test_a_supervisor_gets_the_batch_side_too"],
    "radctl supervisor export": ["tests/integration/test_supervisor_api.py::test_a_supervisor_gets_the_batch_side_too"],
    "radctl quickstart --down": [TOUR],
    "curl -s localhost:8888/druid/v2/sql": [TOUR],
    "radctl up --airflow": ["tests/integration/test_airflow_rest.py::test_backfill_via_airflow_rest"],
    "radctl airflow up": ["tests/browser/test_airflow_ui.py::test_rebuild_from_the_airflow_ui"],
    "radctl airflow status --show-password": ["tests/integration/test_airflow_rest.py::test_backfill_via_airflow_rest"],
    "radctl cluster up": ["tests/cluster/test_cluster.py::test_cli_up_status_down_frees_every_port"],
    "radctl cluster up --hosts": ["tests/cluster/test_hosts.py::test_the_cluster_on_three_hosts"],
    "radctl cluster exec --host N": ["tests/cluster/test_hosts.py::test_the_whole_path_on_three_hosts_survives_host_2_dying"],
    "make test-cluster": ["tests/cluster/test_cluster.py"],
}


def _key(cmd: str) -> str:
    for k in sorted(COVERAGE, key=len, reverse=True):
        if cmd == k or cmd.startswith(k + " ") or cmd.startswith(k):
            return k
    raise AssertionError(f"README command {cmd!r} is not mapped to a test in tests/unit/test_readme.py COVERAGE")


def _all_commands() -> list[str]:
    cmds = [c for _h, body in shell_blocks() for c in block_commands(body)]
    for c in inline_commands():
        if c.startswith("radctl up/down/status"):
            cmds += ["radctl up", "radctl down", "radctl status"]
        else:
            cmds.append(c)
    return cmds


def test_every_readme_command_is_mapped_to_an_existing_test() -> None:
    cmds = _all_commands()
    assert len(cmds) >= 12, cmds
    for cmd in cmds:
        for node in COVERAGE[_key(cmd)]:
            assert names_a_test(node), f"{cmd!r} → {node}: no such test"


def test_no_stale_entries() -> None:
    used = {_key(c) for c in _all_commands()}
    assert set(COVERAGE) == used, set(COVERAGE) - used


@pytest.mark.parametrize("cmd", sorted({c for c in _all_commands() if c.startswith("radctl ")}))
def test_radctl_lines_parse_against_the_cli(cmd: str) -> None:
    """Each README `radctl …` names a real command and real options (parsed by click itself)."""
    import typer

    from operations.cli import app

    group = typer.main.get_command(app)  # typer's click: groups are the commands with resolve_command
    args = shlex.split(cmd)[1:]
    ctx = group.make_context("radctl", list(args), resilient_parsing=True)
    name, sub, rest = group.resolve_command(ctx, list(args))
    assert sub is not None, cmd
    while hasattr(sub, "resolve_command") and rest and not rest[0].startswith("-"):
        sub_ctx = sub.make_context(name or "", list(rest), resilient_parsing=True)
        name, sub, rest = sub.resolve_command(sub_ctx, list(rest))
    # raises a UsageError on an unknown option or a bad value; a fragment quoted in the prose (e.g.
    # `radctl backfill --via airflow`) may leave out required options
    sub.make_context(name or "", list(rest), resilient_parsing=cmd in inline_commands())


def test_make_quickstart_is_radctl_quickstart_after_setup() -> None:
    text = (ROOT / "Makefile").read_text()
    m = re.search(r"^quickstart:(.*)\n\t(.*)$", text, flags=re.M)
    assert m, "Makefile has no quickstart target"
    assert set(m.group(1).split()) >= {"system", "venv", "jvm"}  # sets everything up first
    assert m.group(2).strip() == "$(VENV)/bin/radctl quickstart"


def test_ci_runs_exactly_make_test() -> None:
    run = (ROOT / ".ci" / "run").read_text()
    assert run.strip().splitlines()[-1] == "exec make test"
    assert "make test" in [c for _h, b in shell_blocks() for c in block_commands(b)]


def test_tour_uses_files_that_exist() -> None:
    for cmd in tour_commands():
        for arg in shlex.split(cmd):
            if arg.startswith("@"):
                assert (ROOT / arg[1:]).is_file(), arg
    assert "## A 5-minute tour" in README.read_text()
