"""``radctl backfill --wait`` returns once the server serves each rebuilt chunk's new version
(operations/served.py), asked of a running server through ``sys.segments`` as a client would."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from batch.backfill import BackfillPlan, ChunkResult
from operations.commands import backfill as command
from operations.served import ServingUnreachable, wait_served
from radstack.storage.metadata import MetadataStore
from radstack.storage.supervisors import SupervisorRecord, datasource_spec_from_supervisor, save_supervisor
from radstack.time.intervals import Interval, parse_instant
from tests.fixtures.broker import WIKI_SCHEMA, index_and_publish
from tests.fixtures.server import running_server, server_settings

DAY = Interval(parse_instant("2024-01-01T00:00:00Z"), parse_instant("2024-01-02T00:00:00Z"))


def _table(n: int) -> pa.Table:
    return pa.table({"ts": [f"2024-01-01T{i % 24:02d}:00:00Z" for i in range(n)], "page": [f"p{i}" for i in range(n)],
                     "user": ["u"] * n, "country": ["US"] * n, "ns": list(range(n)), "added": list(range(n)),
                     "delta": [0.5] * n})


def test_the_wait_ends_when_the_new_version_is_served_and_not_before() -> None:
    schema = {**WIKI_SCHEMA, "dataSource": "w", "granularitySpec": {
        "segmentGranularity": "day", "queryGranularity": "none", "rollup": False}}
    with tempfile.TemporaryDirectory() as home, running_server(Path(home)) as srv:
        index_and_publish(srv.ctx.metadata, srv.ctx.deep_storage, _table(10), schema, version="v1")
        srv.ctx.broker.refresh(force=True)
        rebuilt = [ChunkResult("w", DAY, status="published", version="v2")]
        # v2 is not published yet: the chunk is still waiting when the time runs out
        assert wait_served(srv.settings, rebuilt, timeout_s=0.5, poll_s=0.1) == rebuilt

        def publish_later() -> None:
            time.sleep(0.5)
            index_and_publish(srv.ctx.metadata, srv.ctx.deep_storage, _table(20), schema, version="v2")

        t = threading.Thread(target=publish_later)
        t.start()
        seen: list[tuple[int, int]] = []
        started = time.monotonic()
        left = wait_served(srv.settings, rebuilt, timeout_s=60, poll_s=0.1, on_poll=lambda n, total: seen.append((n, total)))
        t.join()
        assert left == [] and seen[0] == (0, 1) and seen[-1] == (1, 1)
        assert time.monotonic() - started >= 0.5  # it waited for the publish, and the broker's pick-up
        # failed chunks and chunks without a version are not waited for
        assert wait_served(srv.settings, [ChunkResult("w", DAY, status="failed", version="v9")], timeout_s=0) == []


def test_a_server_that_is_not_running_is_reported_not_waited_for(tmp_path: Path) -> None:
    settings = server_settings(tmp_path, {"server": {"host": "127.0.0.1", "port": 9}})  # discard: nothing listens
    with pytest.raises(ServingUnreachable, match="does not answer"):
        wait_served(settings, [ChunkResult("w", DAY, status="published", version="v2")], timeout_s=5)


def test_the_archive_wait_covers_a_supervisors_datasource(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--wait`` waits for the archiver on the topics of every datasource the plan rebuilds, a
    supervisor's included (the plan reads the same catalog: spec files and supervisors)."""
    posted = {"type": "kafka", "spec": {"ioConfig": {"topic": "clicks"}, "dataSchema": {
        "dataSource": "clicks", "timestampSpec": {"column": "timestamp", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["page"]}, "granularitySpec": {"segmentGranularity": "hour"}}}}
    with MetadataStore.from_settings(settings) as md:
        save_supervisor(md, SupervisorRecord(id="clicks", spec=posted, datasource=datasource_spec_from_supervisor(posted)))
    asked: list[list[str]] = []
    monkeypatch.setattr(command, "wait_archived", lambda _s, topics, **_kw: asked.append(list(topics)) or 0)
    command._wait_archived(settings, BackfillPlan(DAY, {"clicks": [DAY]}))
    assert asked == [["clicks"]]
