"""The warm Spark's warm-up (``python -m operations.spark_connect_warm_up``): once ``radctl up`` has the
Connect server listening, this process runs the training job (:mod:`operations.training_job`, one
generated hour in a home of its own) on it, in the background, and exits.

A new server's first rebuild is slower than a rebuild on a Spark of its own (its JIT is cold: 16–20 s
against 13–15 s for an hour of 100 k events, docs/benchmarks.md); after a job or two the same hour takes
4–5 s. The warm-up pays for those first jobs before a scheduled one has to. Its outcome goes to
``{home}/run/spark-connect-warm-up.json`` (``state`` ``running``/``done``/``failed``, ``seconds``) and its
log to ``{home}/logs/spark-connect-warm-up.log``; a server that stops meanwhile only ends it
(``failed``). Real jobs need not wait for it: they share the server and its session from the start."""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from operations.spark_connect_local import server_conf
from radstack.config import Settings, load_settings
from radstack.pipeline.spark_connect import close_session, connect_session
from radstack.private_files import write_private

__all__ = ["state_file", "read_state", "start", "main"]

log = logging.getLogger(__name__)

WARM_UP_JOBS = 2
"""Training jobs the warm-up runs one after the other (the JIT compiles a method once it has run often
enough): the second costs ≈1 s and took the first hourly rebuild after it from 5.8 to 4.9 s
(docs/benchmarks.md, "On the warm Spark")."""


def state_file(settings: Settings) -> Path:
    return settings.run_dir / "spark-connect-warm-up.json"


def read_state(settings: Settings) -> dict[str, Any] | None:
    try:
        return dict(json.loads(state_file(settings).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _write_state(settings: Settings, **state: Any) -> None:
    path = state_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, json.dumps(state))


def start(settings: Settings, env: dict[str, str], server_pid: int | None = None) -> str | None:
    """Start the warm-up in the background (the stack's ``after_ready`` of ``spark-connect``); ``env`` is
    the stack's child environment (it names the settings file). Only with a local master: the training job
reads and writes a temporary home on this machine. Returns the line ``radctl up`` prints."""
    if not settings.spark.connect_warm_up or not str(settings.spark.master or "local").startswith("local"):
        return None  # off, or a cluster's master: its executors could not read the training home's files
    log_path = settings.logs_dir / "spark-connect-warm-up.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    _write_state(settings, state="running", started=time.time())
    with log_path.open("ab") as out:
        watch = ["--server-pid", str(server_pid)] if server_pid else []
        subprocess.Popen([sys.executable, "-m", "operations.spark_connect_warm_up", *watch], stdout=out,  # noqa: S603
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=settings.home,
                         start_new_session=True)  # fmt: skip
    return f"warming up in the background (log: {log_path})"


def warm_up(settings: Settings) -> dict[str, Any]:
    """Run the training job on the warm Spark of ``settings``; returns the state written."""
    from operations.training_job import rebuild_generated_hour  # lazy: pyspark and the batch job

    t0 = time.monotonic()
    spark = connect_session(settings, app_name="radstack-warm-up", conf=server_conf(settings))  # the server's own settings
    if spark is None:
        state = {"state": "failed", "reason": "the warm Spark did not take the session (see the log)"}
    else:
        try:
            for _ in range(WARM_UP_JOBS):
                events = rebuild_generated_hour(spark)
            state = {"state": "done", "jobs": WARM_UP_JOBS, "events": events}
        except Exception as e:  # noqa: BLE001 - a server stopped meanwhile, say: the warm-up only ends
            log.warning("the warm-up ended early: %s: %s", type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")
            state = {"state": "failed", "reason": f"{type(e).__name__}"}
        finally:
            close_session(spark)
    state["seconds"] = round(time.monotonic() - t0, 1)
    _write_state(settings, **state)
    return state


def _end_with_the_server(settings: Settings, pid: int) -> None:
    """Exit as soon as the server's process is gone (``radctl down``): Spark's client would otherwise retry
    its calls for minutes."""
    while True:
        time.sleep(1.0)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            log.warning("the warm Spark (pid %d) stopped: the warm-up ends", pid)
            _write_state(settings, state="failed", reason="the warm Spark stopped")
            os._exit(1)
        except PermissionError:  # someone else's process now holds the pid: ours is gone
            os._exit(1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server-pid", type=int, default=0, help="end when this process does")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = load_settings()
    if a.server_pid:
        threading.Thread(target=_end_with_the_server, args=(settings, a.server_pid), daemon=True).start()
    state = warm_up(settings)
    log.info("warm-up %s in %.1f s", state["state"], state["seconds"])
    return 0 if state["state"] == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
