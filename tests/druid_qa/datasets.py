"""Ingesting one dataset directory of the QA suite into a radstack server with the suite's own
ingestion specs, through the task API (the only change: a relative ``baseDir`` is made absolute
against the QA root, as Druid's test framework resolves it against its working directory)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from radstack.druid_cluster.submit import DruidApiError, OverlordClient, TaskFailedError


@dataclass
class DatasetLoad:
    directory: str
    specs: list[str] = field(default_factory=list)
    datasources: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # spec file -> why the task was refused or failed
    unparseable_rows: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.refused


def ingest_specs(root: Path, directory: str) -> list[Path]:
    """The ingestion specs of a dataset directory: its top-level ``*.json`` files."""
    folder = root / directory
    return sorted(p for p in folder.glob("*.json") if p.is_file())


def adapt(task: dict[str, Any], root: Path) -> dict[str, Any]:
    task = copy.deepcopy(task)
    source = task.get("spec", {}).get("ioConfig", {}).get("inputSource", {})
    base = source.get("baseDir")
    if isinstance(base, str) and not base.startswith("/"):
        source["baseDir"] = str((root / base).resolve())
    return task


def load_dataset(client: OverlordClient, root: Path, directory: str, *, timeout_s: float = 600.0) -> DatasetLoad:
    result = DatasetLoad(directory)
    for path in ingest_specs(root, directory):
        result.specs.append(path.name)
        task = adapt(orjson.loads(path.read_bytes()), root)
        ds = task.get("spec", {}).get("dataSchema", {}).get("dataSource", "")
        try:
            task_id = client.submit_task(task)
            client.wait_for_task(task_id, timeout_s=timeout_s, poll_s=0.2)
        except (DruidApiError, TaskFailedError, TimeoutError) as e:
            result.refused[path.name] = str(e)[:500]
            continue
        try:
            report = client.task_report(task_id)
            stats = _row_stats(report)
            if stats.get("unparseable"):
                result.unparseable_rows[path.name] = int(stats["unparseable"])
        except DruidApiError:
            pass
        if ds not in result.datasources:
            result.datasources.append(ds)
    return result


def _row_stats(report: Any) -> dict[str, Any]:
    try:
        totals = report["ingestionStatsAndErrors"]["payload"]["rowStats"]
        build = totals.get("buildSegments", totals)
        return {"processed": build.get("processed"), "unparseable": build.get("unparseable")}
    except (KeyError, TypeError):
        return {}
