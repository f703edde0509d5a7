"""#54 part 3, the warm Spark: ``radctl up`` starts Spark's Connect server and ``radctl backfill`` runs its
rebuild there — the same segments, row by row, as with a Spark of its own, from the parsed columns and from
the raw JSON (Spark Connect parses it with ``from_json``); one set of Python workers serves job after job;
a client without the token is refused, and a backfill that cannot use the server runs its own Spark."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from operations.processes import free_port, port_in_use
from operations.spark_connect_warm_up import WARM_UP_JOBS, read_state
from operations.training_job import TRAINING_EVENTS
from radstack.config import load_settings
from radstack.pipeline.spark_connect import endpoint_file, read_endpoint
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.metadata import MetadataStore
from radstack.time.intervals import Interval, format_instant
from tests.fixtures.batch import set_watermark, write_archive
from tests.fixtures.mixed_archive import HOUR, SPEC, T0, mixed_archive, segment_rows

pytestmark = pytest.mark.slow

WHOLE = Interval(T0, T0 + 2 * HOUR)

WRONG_TOKEN = """
import sys
from pyspark.sql import SparkSession
try:
    SparkSession.builder.remote(f"sc://localhost:{sys.argv[1]}/;token=wrong").create().range(1).collect()
except Exception as e:  # gRPC's error types vary
    print(type(e).__name__, e)
    sys.exit(3)
"""


def _radctl(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "operations", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


def _backfill(env: dict[str, str], **extra: str) -> list[dict[str, Any]]:
    """``radctl backfill --json --force`` of the two hours; the chunk lines (each names the Spark it ran on)."""
    proc = _radctl({**env, **extra}, "backfill", "--interval", f"{format_instant(WHOLE.start)}/PT2H",
                   "--datasource", "mixed", "--via", "local", "--json", "--force")  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    chunks = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert len(chunks) == 2 and {c["status"] for c in chunks} == {"published"}, chunks
    return chunks


def _daemons_of(pid: int) -> list[int]:
    """The pyspark.daemon processes the server (the JVM of ``pid``, or a child of it) started."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    procs = [(int(p), int(pp), a) for p, pp, a in (ln.split(None, 2) for ln in out.splitlines() if ln.strip())]
    tree, grew = {pid}, True
    while grew:
        more = {p for p, pp, _ in procs if pp in tree} - tree
        tree |= more
        grew = bool(more)
    return [p for p, pp, a in procs if "pyspark.daemon" in a and pp in tree and "pyspark.daemon" not in
            next((x for q, _, x in procs if q == pp), "")]  # fmt: skip


@pytest.fixture
def warm_home(tmp_path: Path):  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    (home / "datasources").mkdir(parents=True)
    (home / "datasources" / "mixed.yaml").write_text(SPEC)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env.update(RADSTACK_HOME=str(home), RADSTACK_SPARK__CONNECT_PORT=str(free_port()),
               RADSTACK_SPARK__SHUFFLE_PARTITIONS="2", COLUMNS="200")  # fmt: skip
    settings = load_settings(env=env)
    with MetadataStore.from_settings(settings) as md:
        write_archive(open_deep_storage(settings), "mixed", mixed_archive(), per_file=170)
        set_watermark(md, "mixed", T0 + 4 * HOUR)
    yield env, settings
    _radctl(env, "down", timeout=120)


def _warm_up_done(settings: Any, timeout: float = 240) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while (state := read_state(settings)) is not None and state["state"] == "running":
        assert time.monotonic() < deadline, state
        time.sleep(0.5)
    assert state is not None
    return state


def test_backfill_on_the_warm_spark_gives_the_segments_of_its_own_spark(warm_home) -> None:  # type: ignore[no-untyped-def]
    env, settings = warm_home
    up = _radctl(env, "up", "--only", "spark-connect")
    assert up.returncode == 0 and "spark-connect: started" in up.stdout, up.stdout + up.stderr
    ep = read_endpoint(settings)
    assert ep is not None and ep.port == settings.spark.connect_port
    assert endpoint_file(settings).stat().st_mode & 0o077 == 0  # the token is the owner's only
    assert "warming up in the background" in " ".join(up.stdout.split())
    with MetadataStore.from_settings(settings) as md:
        warm = _backfill(env)  # while the warm-up may still run: the two share the server
        assert {c["spark"] for c in warm} == {"connect"}
        # the warm-up's training jobs ran on the server, in a home of their own (nothing of theirs in this one)
        state = _warm_up_done(settings)
        assert state["state"] == "done" and state["jobs"] == WARM_UP_JOBS and state["events"] == TRAINING_EVENTS, state
        assert "warm-up done" in (settings.logs_dir / "spark-connect-warm-up.log").read_text()
        assert {seg.data_source for seg in md.segments(used=None)} == {"mixed"}
        on_warm = segment_rows(md, WHOLE)
        own = _backfill(env, RADSTACK_SPARK__CONNECT_SERVER="false")
        assert {c["spark"] for c in own} == {"local"}
        assert on_warm and segment_rows(md, WHOLE) == on_warm
        # the raw JSON on the warm Spark (from_json: no JVM in the client) reads as the parsed columns do
        raw = _backfill(env, RADSTACK_BATCH__PARSED_ARCHIVE="false")
        assert {c["spark"] for c in raw} == {"connect"}
        assert segment_rows(md, WHOLE) == on_warm
        assert [c["batch_events"] for c in raw] == [c["batch_events"] for c in warm] == [c["batch_events"] for c in own]

    # one set of Python workers served both jobs (a set per job would stay behind, idle)
    server = json.loads((settings.run_dir / "spark-connect.pid").read_text())["pid"]
    assert len(_daemons_of(server)) == 1
    # every socket the server listens on is a loopback one (gRPC, the driver's RPC, the block manager)
    ss = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    mine = [ln.split()[3] for ln in ss.splitlines() if f"pid={server}," in ln]
    assert f"[::ffff:127.0.0.1]:{ep.port}" in mine or f"127.0.0.1:{ep.port}" in mine, mine
    assert all(a.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:")) for a in mine), mine

    # a client without the token is refused (in a process of its own: a Connect client marks its whole
    # process as Spark Connect's, and SparkSession.builder keeps the URL, which would turn this worker's
    # later local sessions into Connect ones); a backfill that cannot use the server runs its own Spark
    refused = subprocess.run([sys.executable, "-c", WRONG_TOKEN, str(ep.port)], capture_output=True, text=True,
                             timeout=120, check=False)  # fmt: skip
    assert refused.returncode == 3 and re.search("UNAUTHENTICATED|authentication", refused.stdout), refused
    endpoint_file(settings).write_text(json.dumps({**ep.to_json(), "token": "wrong"}))
    assert {c["spark"] for c in _backfill(env)} == {"local"}

    down = _radctl(env, "down", "--only", "spark-connect")
    assert down.returncode == 0 and "spark-connect: stopped" in down.stdout, down.stdout + down.stderr
    assert not port_in_use("127.0.0.1", ep.port)


def test_radctl_down_during_the_warm_up_ends_it(warm_home) -> None:  # type: ignore[no-untyped-def]
    env, settings = warm_home
    up = _radctl(env, "up", "--only", "spark-connect")
    assert up.returncode == 0, up.stdout + up.stderr
    assert (read_state(settings) or {}).get("state") == "running" and _warm_ups_of(settings)  # 14–18 s of work ahead
    down = _radctl(env, "down", "--only", "spark-connect")
    assert down.returncode == 0, down.stdout + down.stderr
    deadline = time.monotonic() + 15  # it checks the server's pid every second
    while _warm_ups_of(settings):
        assert time.monotonic() < deadline, _warm_ups_of(settings)
        time.sleep(0.5)
    state = read_state(settings)
    assert state is not None and state["state"] in ("failed", "done"), state  # done: it won the race


def _warm_ups_of(settings: Any) -> list[str]:
    """The warm-up processes running for this home (their working directory is the home)."""
    out = subprocess.run(["pgrep", "-f", "operations.spark_connect_warm_up"], capture_output=True, text=True).stdout
    return [p for p in out.split() if os.path.realpath(f"/proc/{p}/cwd") == os.path.realpath(settings.home)]
