"""``radctl backfill --via local`` reading the raw archive from ``s3a://`` (moto server over HTTP,
``hadoop-aws`` from the JVM manifest) and ``hdfs://`` (the real single-node HDFS), writing segments to
the same deep storage, with the per-chunk summary (both hours in one Spark job)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from radstack.time.intervals import format_instant, parse_instant
from tests.fixtures.batch import set_watermark, write_archive

pytestmark = pytest.mark.slow

T0 = parse_instant("2026-11-20T00:00:00Z")
HOUR = 3_600_000
SPEC = """\
dataSchema:
  dataSource: web
  timestampSpec: {column: timestamp, format: iso}
  dimensionsSpec: {dimensions: [page]}
  metricsSpec: [{type: count, name: count}]
  granularitySpec: {segmentGranularity: hour, queryGranularity: hour}
processing: {topics: [web], eventId: id, windowPeriod: PT10M}
"""


def _env_for(home: Path, ds: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env["RADSTACK_HOME"] = str(home)
    env["RADSTACK_SPARK__SHUFFLE_PARTITIONS"] = "2"
    for k, v in ds.items():
        env[f"RADSTACK_DEEP_STORAGE__{k.upper()}"] = str(v)
    return env


def _run_backfill(radstack_home: Path, ds_settings: dict[str, str]) -> tuple[list[dict[str, Any]], str]:
    from radstack.config import load_settings
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore

    (radstack_home / "datasources").mkdir(exist_ok=True)
    (radstack_home / "datasources" / "web.yaml").write_text(SPEC)
    settings = load_settings(env={"RADSTACK_HOME": str(radstack_home)}, overrides={"deep_storage": ds_settings})
    storage = open_deep_storage(settings)
    events = [{"timestamp": format_instant(T0 + 30 * HOUR // 60 + i * 1000), "id": f"e{i}", "page": f"/p{i % 4}"}
              for i in range(120)]  # fmt: skip
    write_archive(storage, "web", [orjson.dumps(e) for e in events + events[:15]], per_file=50)
    with MetadataStore.from_settings(settings) as md:
        set_watermark(md, "web", T0 + 3 * HOUR)
    proc = subprocess.run(
        [sys.executable, "-m", "operations", "backfill", "--interval", "2026-11-20T00/PT2H", "--datasource", "web",
         "--via", "local", "--json"],
        env=_env_for(radstack_home, ds_settings), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [orjson.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    # the batch segments live in the same deep storage
    assert storage.list("segments/web/")
    return lines, proc.stdout


def _check(lines: list[dict[str, Any]], stdout: str) -> None:
    assert [ln["status"] for ln in lines] == ["published", "published"]
    first, second = lines
    assert first["interval"] == "2026-11-20T00:00:00.000Z/2026-11-20T01:00:00.000Z"
    assert (first["batch_rows"], first["batch_events"]) == (4, 120)  # 4 pages × 1 hour, duplicates dropped
    assert (first["realtime_rows"], first["realtime_events"]) == (0, 0)
    assert (second["batch_rows"], second["batch_events"]) == (0, 0)  # a tombstone
    # one rebuild (one Spark job, one version: its start time) for both chunks (batch.chunks_per_job)
    assert second["version"] == first["version"] > "2026-11-21"
    assert first["group"] == second["group"] == "2026-11-20T00:00:00.000Z/2026-11-20T02:00:00.000Z"
    assert "backfill summary" in stdout and "serving version" in stdout
    assert "1 other chunk: no events (tombstones)" in stdout


def test_backfill_from_s3a(radstack_home: Path, s3_deep_storage_settings: dict[str, str]) -> None:
    lines, out = _run_backfill(radstack_home, s3_deep_storage_settings)
    _check(lines, out)


def test_backfill_from_hdfs(radstack_home: Path, hdfs_deep_storage_settings: dict[str, str]) -> None:
    lines, out = _run_backfill(radstack_home, hdfs_deep_storage_settings)
    _check(lines, out)
