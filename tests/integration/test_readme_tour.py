"""The README's first command (`radctl quickstart`, shortened), then its 5-minute tour run as written
(commands read from README.md), on a fresh home.

The quickstart runs with `--down` and its own result is checked first (the batch answer equals the
generator's truth, the corrections account for every late and duplicate event); the tour's
`radctl up` then starts the stack again from the same home, so one quickstart run covers both the
first command and `radctl quickstart --down` (the tour used to run a second quickstart for that).

Ports are the test's own: ``localhost:8888`` in a command becomes the serving port of this stack,
and ``source .venv/bin/activate`` the activate script of the Python running the tests. Between the
commands the test checks what the README says each one shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from operations.processes import free_port
from tests.readme_commands import ROOT, tour_commands

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


def _archiver_lag(sh: Shell) -> int | None:
    st = json.loads(sh.run("radctl status --json").stdout)
    groups = [g for g in st["kafka"]["groups"] if g["group"] == "radstack-archiver"]
    return groups[0]["lag"] if groups else None


def test_tour_runs_as_written(tmp_path: Path) -> None:
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

        sh.run(cmds[0])  # source .venv/bin/activate
        up = sh.run(cmds[1])  # starts the whole stack again on the quickstart's home
        assert "already running" not in up.stdout
        deadline = time.monotonic() + 180  # the restarted streaming job reports its first micro-batch
        while _last_batch(sh) < 0:
            assert time.monotonic() < deadline, "the restarted streaming job never reported progress"
            time.sleep(2)
        status = sh.run(cmds[2])
        assert "stream" in status.stdout and "archiver" in status.stdout

        top = json.loads(sh.run(cmds[3]).stdout)  # the quickstart's real-time + batch segments
        assert 1 <= len(top) <= 5 and {"publisher", "events"} <= set(top[0])

        batch_before = _last_batch(sh)
        thrown_before = int(_stream(sh).get("thrownAway") or 0)
        sh.run(cmds[4])  # generate a past day
        summary = json.loads((home / "generated" / "ads" / "summary.json").read_text())
        assert summary["streams"]["impressions"]["unique"] == DAY_EVENTS

        # the streaming job reads the replayed day (a new micro-batch, nothing left behind in Kafka) and
        # indexes none of it: far older than the watermark and the window period
        deadline = time.monotonic() + 180
        while not (_last_batch(sh) > batch_before and _stream_lag(sh) == 0):
            assert time.monotonic() < deadline, "the streaming job never read the replayed day"
            time.sleep(2)
        # ... and `radctl status` counts it as thrown away (the progress is polled every second)
        deadline = time.monotonic() + 30
        while int(_stream(sh).get("thrownAway") or 0) - thrown_before < DAY_EVENTS:
            assert time.monotonic() < deadline, _stream(sh)
            time.sleep(1)
        assert _day_total(sh.run(cmds[5]).stdout) == 0  # `[]`: nothing of 2026-11-20 in real time

        sh.run(cmds[6])  # radctl status: wait until the archiver's lag is 0, as the README says
        deadline = time.monotonic() + 120
        while _archiver_lag(sh) != 0:
            assert time.monotonic() < deadline, "the archiver never caught up"
            time.sleep(2)

        backfill = sh.run(cmds[7], timeout=900)
        assert "published" in backfill.stdout
        # the serving process loads the new version on its next metadata poll (seconds)
        deadline = time.monotonic() + 60
        while (after := _day_total(sh.run(cmds[8]).stdout)) != DAY_EVENTS and time.monotonic() < deadline:
            time.sleep(1)
        assert after == DAY_EVENTS  # the generator's truth, from the raw archive
        truth = _truth_events(home / "generated" / "ads" / "truth")
        assert truth == DAY_EVENTS

        console = httpx.get(f"http://localhost:{port}/", timeout=10)  # the console the README points to
        assert console.status_code == 200 and "<script" in console.text

        sh.run(cmds[9])  # radctl down
        assert not list((home / "run").glob("*.pid"))
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


def _stream(sh: Shell) -> dict[str, Any]:
    st = json.loads(sh.run("radctl status --json").stdout)
    return dict((st.get("streaming") or {}).get("ads") or {})


def _last_batch(sh: Shell) -> int:
    return int(_stream(sh).get("lastBatchId") or -1)


def _stream_lag(sh: Shell) -> int | None:
    lag = _stream(sh).get("lag")
    return None if lag is None else int(lag)


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
