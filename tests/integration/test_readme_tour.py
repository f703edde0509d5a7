"""The README's first command (`radctl quickstart`, shortened), then its 5-minute tour pasted as one
block into one shell (the block read from README.md), on a fresh home.

The quickstart runs with `--down` and its own result is checked first (the batch answer equals the
generator's truth, the corrections account for every late and duplicate event); the tour's
`radctl up` then starts the stack again from the same home, so one quickstart run covers both the
first command and `radctl quickstart --down` (the tour used to run a second quickstart for that).

Ports are the test's own: ``localhost:8888`` in the block becomes the serving port of this stack, and
``source .venv/bin/activate`` the activate script of the Python running the tests. Nothing waits
between the commands: the shell's DEBUG trap marks where each command's output begins, and the test
then checks what the README says each one shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from operations.processes import free_port
from tests.readme_commands import ROOT, tour_block, tour_commands

pytestmark = pytest.mark.slow

DAY_EVENTS = 10_000  # `radctl generate ads --events 10000`: unique impressions, all on 2026-11-20


def _env(home: Path) -> tuple[dict[str, str], int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    kafka, server = free_port(), free_port()
    env.update(
        RADSTACK_HOME=str(home),
        RADSTACK_KAFKA__PORT=str(kafka),
        RADSTACK_KAFKA__CONTROLLER_PORT=str(free_port()),
        RADSTACK_KAFKA__BOOTSTRAP_SERVERS=f"127.0.0.1:{kafka}",
        RADSTACK_SERVER__PORT=str(server),
        RADSTACK_RECEIVER__PORT=str(free_port()),
        RADSTACK_ARCHIVER__METRICS_PORT=str(free_port()),
        RADSTACK_SPARK__CONNECT_PORT=str(free_port()),
        COLUMNS="200",
    )
    return env, server


class Shell:
    def __init__(self, env: dict[str, str], port: int, log: Path) -> None:
        self.env, self.port, self.log = env, port, log
        self.activate = Path(sys.executable).parent / "activate"

    def run(self, cmd: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        line = cmd.replace(".venv/bin/activate", str(self.activate)).replace("localhost:8888", f"localhost:{self.port}")
        script = line if line.startswith("source ") else f"source {self.activate} && {line}"
        out = subprocess.run(["bash", "-c", script], cwd=ROOT, env=self.env, capture_output=True, text=True,
                             timeout=timeout)  # fmt: skip
        with self.log.open("a") as f:
            f.write(f"$ {cmd}\n{out.stdout}{out.stderr}[exit {out.returncode}]\n\n")
        assert out.returncode == 0, f"{cmd}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        return out


def _day_total(out: str) -> int:
    rows = json.loads(out)
    assert isinstance(rows, list), out
    return sum(int(r["events"]) for r in rows)


#: printed by the pasted shell's DEBUG trap before every simple command it runs
MARK = "@@radstack-tour-command@@ "


def paste(sh: Shell, block: str, timeout: float = 1500) -> list[tuple[str, str]]:
    """``block`` pasted into one interactive-like bash (no ``set -e``: a failing command does not stop the
    rest, as at a terminal): ``(command, its output)`` for each of the block's own commands, in order
    (the commands the activate script runs are left out). Its exit status is the last command's."""
    script = block.replace(".venv/bin/activate", str(sh.activate)).replace("localhost:8888", f"localhost:{sh.port}")
    trap = f"trap 'printf \"\\n{MARK}%s\\n\" \"$BASH_COMMAND\"' DEBUG\n"
    out = subprocess.run(["bash", "-c", trap + script], cwd=ROOT, env=sh.env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=timeout)  # fmt: skip
    with sh.log.open("a") as f:
        f.write(f"$ <the tour, pasted>\n{out.stdout}[exit {out.returncode}]\n\n")
    assert out.returncode == 0, out.stdout[-4000:]
    parts: list[tuple[str, str]] = []
    for chunk in out.stdout.split("\n" + MARK)[1:]:
        command, _, text = chunk.partition("\n")
        if command.startswith(("source ", "radctl ", "curl ")):
            parts.append((command, text))
        elif parts:  # a command of the activate script: its output (none) belongs to `source`
            parts[-1] = (parts[-1][0], parts[-1][1] + text)
    return parts


def test_tour_runs_pasted_as_one_block(tmp_path: Path) -> None:
    cmds = tour_commands()
    kinds = [c.split()[0] + (" " + c.split()[1] if c.startswith("radctl") else "") for c in cmds]
    assert kinds == ["source", "radctl up", "radctl status", "curl", "radctl generate", "curl", "radctl status",
                     "radctl backfill", "curl", "radctl down"], kinds  # fmt: skip

    home = tmp_path / "home"
    env, port = _env(home)
    sh = Shell(env, port, tmp_path / "tour.log")
    try:
        # the README's first command (shortened), which the tour starts from
        result_file = tmp_path / "result.json"
        quickstart = sh.run(f"radctl quickstart --short --down --result-json {result_file}", timeout=900)
        check_quickstart(json.loads(result_file.read_text()), quickstart.stdout, quickstart.stderr)
        assert not list((home / "run").glob("*.pid")), "--down leaves no process behind"

        parts = paste(sh, tour_block())
        assert [c.split()[0] + (" " + c.split()[1] if c.startswith("radctl") else "") for c, _ in parts] == kinds, parts
        out = [text for _, text in parts]
        assert "already running" not in out[1] and "Error" not in out[1], out[1]  # radctl up: the stack again
        assert "stream" in out[2] and "archiver" in out[2], out[2]  # radctl status
        top = json.loads(out[3])  # the quickstart's real-time + batch segments
        assert 1 <= len(top) <= 5 and {"publisher", "events"} <= set(top[0]), out[3]
        summary = json.loads((home / "generated" / "ads" / "summary.json").read_text())
        assert summary["streams"]["impressions"]["unique"] == DAY_EVENTS, out[4]
        assert _day_total(out[5]) == 0  # `[]`: nothing of 2026-11-20 in real time
        assert "stream" in out[6] and "archiver" in out[6], out[6]  # radctl status again
        assert "published" in out[7] and "served" in out[7], out[7][-2000:]  # backfill --wait
        assert _day_total(out[8]) == DAY_EVENTS  # the generator's truth, from the raw archive, at once
        assert "Error" not in out[9], out[9]  # radctl down
        assert not list((home / "run").glob("*.pid"))
        assert _truth_events(home / "generated" / "ads" / "truth") == DAY_EVENTS
    finally:
        subprocess.run([sys.executable, "-c", "from operations.cli import app; app()", "down"], env=env,
                       capture_output=True, timeout=180)  # fmt: skip


def check_quickstart(result: dict[str, Any], stdout: str, stderr: str) -> None:
    """What the quickstart's result (``--result-json``) and narration must show."""
    assert result["batch"]["events"] == result["truth"]["events"] == 6000
    assert result["batch"]["revenue"] == result["truth"]["revenue"]
    # late events were thrown away by the real-time path: it undercounts until the rebuild
    assert result["realtime"]["events"] < result["truth"]["events"]
    assert result["versions"] and not any(v["realtime"] for v in result["versions"])
    # the rebuild's corrections (sys.corrections) account for the difference exactly
    fixes, sent = result["corrections"], result["sent"]
    assert fixes["minutes"] > 0
    assert fixes["realtime_events"] == result["realtime"]["events"]
    assert fixes["batch_events"] == result["truth"]["events"]
    assert fixes["late_recovered"] == fixes["event_gap"] == result["truth"]["events"] - result["realtime"]["events"]
    assert fixes["late_recovered"] <= sent["late"]  # only events later than the window period were lost
    assert fixes["duplicates_removed"] == sent["duplicates"] and fixes["invalid_dropped"] == 0
    # the output is narration, not JVM logs
    assert "WARN" not in stdout and "log4j" not in stdout + stderr
    assert "The batch answer is equal to the truth" in " ".join(stdout.split())





def _truth_events(truth_dir: Path) -> int:
    """Unique impressions on 2026-11-20 according to the generator's truth log."""
    files = sorted(truth_dir.glob("*impressions*")) or sorted(truth_dir.glob("*"))
    ids: set[str] = set()
    for f in files:
        for line in f.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                if str(rec.get("timestamp", "")).startswith("2026-11-20"):
                    ids.add(rec.get("impression_id") or rec.get("id"))
    return len(ids)
