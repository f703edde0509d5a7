"""The README's first command, shortened: `radctl quickstart --short --down` on a fresh home.

It starts the real stack (Kafka, receiver, serving process, archiver, Spark streaming job), streams
the ads workload with duplicates and late events, rebuilds the closed minutes with the Spark batch
job, and must end with the batch answer equal to the exact truth from the generator's log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from operations.processes import free_port

pytestmark = pytest.mark.slow


def test_quickstart_short(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    kafka = free_port()
    env.update(
        RADSTACK_HOME=str(home),
        RADSTACK_KAFKA__PORT=str(kafka),
        RADSTACK_KAFKA__CONTROLLER_PORT=str(free_port()),
        RADSTACK_KAFKA__BOOTSTRAP_SERVERS=f"127.0.0.1:{kafka}",
        RADSTACK_SERVER__PORT=str(free_port()),
        RADSTACK_RECEIVER__PORT=str(free_port()),
        RADSTACK_ARCHIVER__METRICS_PORT=str(free_port()),
    )
    result_file = tmp_path / "result.json"
    radctl = Path(sys.executable).parent / "radctl"
    out = subprocess.run(
        [str(radctl), "quickstart", "--short", "--down", "--result-json", str(result_file)],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    (tmp_path / "quickstart.out").write_text(out.stdout + out.stderr)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(result_file.read_text())
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
    assert "WARN" not in out.stdout and "log4j" not in out.stdout + out.stderr
    assert "The batch answer is equal to the truth" in " ".join(out.stdout.split())
    assert not list((home / "run").glob("*.pid")), "--down leaves no process behind"
