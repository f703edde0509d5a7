"""Real-time replicas: partition ranges, which copy the broker serves, and the handoff of one copy."""

from __future__ import annotations

from typing import Any

import pytest

from radstack.storage.replicas import (
    MAX_REPLICAS,
    choose_replicas,
    committed_total,
    is_realtime_segment,
    partition_range,
    realtime_replicas,
    replica_of,
    serve_one_replica,
    state_key,
)
from radstack.storage.segments import DataSegment, ShardSpec
from radstack.time.intervals import Interval, format_instant

HOUR = Interval(1_700_000_000_000 // 3_600_000 * 3_600_000, 1_700_000_000_000 // 3_600_000 * 3_600_000 + 3_600_000)


def _rt(pn: int, ds: str = "ads") -> DataSegment:
    return DataSegment(ds, HOUR, format_instant(HOUR.start), shard_spec=ShardSpec("numbered", pn, 0))


def test_partition_ranges_are_disjoint_and_below_the_int_limit() -> None:
    ranges = [partition_range(r) for r in range(MAX_REPLICAS)]
    assert ranges[0] == (0, 2**30)
    for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False):
        assert hi <= lo
    assert ranges[-1][1] <= 2**31 - 1
    for r, (lo, hi) in enumerate(ranges):
        assert replica_of(_rt(lo)) == r and replica_of(_rt(hi - 1)) == r
    with pytest.raises(ValueError):
        partition_range(MAX_REPLICAS)


def test_state_keys_keep_the_single_job_name_for_replica_0() -> None:
    assert state_key("ads") == "streaming.ads" and state_key("ads", 2) == "streaming.ads.replica2"


def test_the_replica_furthest_ahead_is_served_and_ties_stick() -> None:
    states: dict[str, Any] = {
        "streaming.ads": {"offsets": {"t": {"0": 100, "1": 50}}},
        "streaming.ads.replica1": {"offsets": {"t": {"0": 60, "1": 100}}},
    }
    assert committed_total(states["streaming.ads"]) == 150
    present = realtime_replicas([_rt(3), _rt(partition_range(1)[0])])
    assert present == {"ads": {0, 1}}
    assert choose_replicas(present, states.get) == {"ads": 1}
    states["streaming.ads"]["offsets"]["t"]["0"] = 110  # tie at 160: keep serving what was served
    assert choose_replicas(present, states.get, {"ads": 1}) == {"ads": 1}
    assert choose_replicas(present, states.get, {}) == {"ads": 0}
    assert choose_replicas({"ads": {0}}, states.get) == {}  # one copy: nothing to choose


def test_only_the_chosen_copy_of_real_time_segments_is_served() -> None:
    own, other = _rt(7), _rt(partition_range(1)[0] + 7)
    handed = DataSegment("ads", HOUR, format_instant(HOUR.start) + "-handoff", shard_spec=ShardSpec("numbered", 0, 1))
    assert is_realtime_segment(own) and not is_realtime_segment(handed)
    kept = serve_one_replica([own, other, handed], {"ads": 1})
    assert kept == [other, handed]
    assert serve_one_replica([own, other], {}) == [own, other]


def test_broker_serves_one_copy(broker_env: Any) -> None:
    """Two replicas' real-time segments of the same events: the broker counts them once, from the
    replica with the most committed offsets."""
    import pyarrow as pa

    from radstack.storage.replicas import partition_range

    schema = {"dataSource": "ads", "timestampSpec": {"column": "ts", "format": "millis"},
              "dimensionsSpec": {"dimensions": ["c"]}, "metricsSpec": [{"type": "count", "name": "count"}],
              "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "none", "rollup": False}}
    rows = pa.table({"ts": [HOUR.start + i for i in range(10)], "c": ["x"] * 10})
    version = format_instant(HOUR.start)
    broker_env.index(rows.slice(0, 6), schema, version=version, shard="append", partition_offset={HOUR: 0},
                     publish=True)
    broker_env.index(rows, schema, version=version, shard="append",
                     partition_offset={HOUR: partition_range(1)[0]}, publish=True)
    broker_env.metadata.put_state("streaming.ads", {"offsets": {"t": {"0": 6}}})
    broker_env.metadata.put_state("streaming.ads.replica1", {"offsets": {"t": {"0": 10}}})
    svc = broker_env.service
    svc.refresh(force=True)
    from serving.broker.sql.engine import execute

    def count() -> int:
        res = execute(svc, 'SELECT SUM("count") FROM ads')
        try:
            return int([v for b in res.batches() for v in b.column(0).to_pylist()][0])
        finally:
            res.close()

    assert count() == 10 and svc._replicas == {"ads": 1}


def test_status_lists_every_replica(settings: Any) -> None:
    """``radctl status --json`` shows each further replica's counters under ``replicas``."""
    from pathlib import Path

    from radstack.storage.metadata import MetadataStore
    from realtime.streaming.progress import streaming_status

    settings.datasources_dir.mkdir(parents=True, exist_ok=True)
    ads = Path(__file__).resolve().parents[2] / "examples" / "ads" / "ads.yaml"
    (settings.datasources_dir / "ads.yaml").write_text(ads.read_text())
    md = MetadataStore.from_settings(settings)
    md.put_state("streaming.ads", {"lastBatchId": 2, "offsets": {"t": {"0": 4}}, "counters": {"processed": 4}})
    md.put_state("streaming.ads.replica1", {"lastBatchId": 3, "offsets": {"t": {"0": 5}}, "counters": {"processed": 5}})
    view = streaming_status(settings, md)["ads"]
    assert (view["processed"], view["committedOffsets"]) == (4, {"t": {"0": 4}})
    assert view["replicas"]["1"]["processed"] == 5 and view["replicas"]["1"]["lastBatchId"] == 3
    md.close()


def test_status_shows_the_archiver_watermark_of_each_topic_read(settings: Any) -> None:
    """``radctl status`` shows the archiver watermark backfill's closed check waits for (#51)."""
    from pathlib import Path

    from operations.stack import archiver_watermarks
    from radstack.storage.metadata import MetadataStore
    from radstack.storage.raw_archive import watermark_key

    assert archiver_watermarks(settings) == {}  # no datasource, no store: nothing, and no error
    settings.datasources_dir.mkdir(parents=True, exist_ok=True)
    ads = Path(__file__).resolve().parents[2] / "examples" / "ads" / "ads.yaml"
    (settings.datasources_dir / "ads.yaml").write_text(ads.read_text())
    md = MetadataStore.from_settings(settings)
    topics = sorted(archiver_watermarks(settings))
    assert topics and archiver_watermarks(settings) == {t: None for t in topics}  # the archiver never ran
    md.put_state(watermark_key(topics[0]), {"watermark": 1_795_000_000_000})
    assert archiver_watermarks(settings)[topics[0]] == 1_795_000_000_000
    md.close()


def test_status_fits_a_terminal_of_80_columns(settings: Any, monkeypatch: Any) -> None:
    """``radctl status`` at 80 columns: no header squeezed to "dat… inp… thr…" (#51)."""
    import io
    from pathlib import Path

    from rich.console import Console
    from typer.testing import CliRunner

    from operations.cli import app
    from operations.commands import stack as stack_command
    from radstack.storage.metadata import MetadataStore

    settings.datasources_dir.mkdir(parents=True, exist_ok=True)
    ads = Path(__file__).resolve().parents[2] / "examples" / "ads" / "ads.yaml"
    (settings.datasources_dir / "ads.yaml").write_text(ads.read_text())
    with MetadataStore.from_settings(settings) as md:
        md.put_state("streaming.ads", {"lastBatchId": 2, "offsets": {"impressions": {"0": 4}},
                                       "counters": {"processed": 12345, "thrownAway": 7}})
    out = io.StringIO()
    monkeypatch.setattr(stack_command, "console", Console(file=out, width=80, highlight=False))
    monkeypatch.setenv("RADSTACK_HOME", str(settings.home))
    CliRunner().invoke(app, ["status", "--no-kafka"])
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text, text
    assert "thrown away" in text and "12,345" in text and "archiver watermark" in text
