"""Corrections are exact: real time served hour 0 without its late events and hour 2 (handed off) complete;
the archive holds every event, copies of some and invalid records; the Spark rebuild's publish records,
per hour it took over, both answers and the reasons — then ``sys.corrections`` shows them, and a second
rebuild (which replaces a batch version, not real time) records nothing."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import httpx
import orjson
import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

from radstack.spec import load_datasource_spec
from radstack.storage.indexer import index_partition
from radstack.storage.publish import publish
from radstack.storage.replicas import HANDOFF_SUFFIX
from radstack.time.intervals import Interval, format_instant, parse_instant
from serving.coordinator.duties.self_metrics import CORRECTION_FIELDS, ingest_self_metrics
from tests.fixtures.batch import set_watermark, write_archive
from tests.fixtures.server import running_server

pytestmark = pytest.mark.slow

T0 = parse_instant("2026-11-20T00:00:00Z")
HOUR = 3_600_000
SPEC = """\
dataSchema:
  dataSource: web
  timestampSpec: {column: timestamp, format: iso}
  dimensionsSpec: {dimensions: [page]}
  metricsSpec:
    - {type: count, name: count}
    - {type: longSum, name: bytes, fieldName: bytes}
    - {type: longMax, name: biggest, fieldName: bytes}
  granularitySpec: {segmentGranularity: hour, queryGranularity: minute, rollup: true}
processing:
  topics: [web]
  eventId: id
  windowPeriod: PT10M
"""


def _events(n: int, start: int, seed: int, prefix: str) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [{"timestamp": format_instant(start + rng.randrange(0, HOUR)), "id": f"{prefix}{i}",
             "page": rng.choice(["/a", "/b", "/c"]), "bytes": rng.randrange(1, 1000)} for i in range(n)]  # fmt: skip


def _realtime(settings: Any, md: Any, storage: Any, events: list[dict[str, Any]], hour: Interval, *,
              handoff: bool = False, offset: int = 0) -> None:  # fmt: skip
    """Index ``events`` the way the real-time layer does: appended partitions of the interval-start
    version, or (``handoff``) one complete set of the handoff version."""
    schema = load_datasource_spec(settings.datasources_dir / "web.yaml").data_schema
    version = format_instant(hour.start) + (HANDOFF_SUFFIX if handoff else "")
    res = index_partition(pa.Table.from_pylist(events), schema, version=version, deep_storage=storage,
                          shard="core" if handoff else "append", partition_offset={hour: offset})  # fmt: skip
    publish(md, storage, res.segments)


def test_rebuild_records_exact_corrections(settings, batch_spark) -> None:  # type: ignore[no-untyped-def]
    from batch.rebuild_job import rebuild
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore

    settings.datasources_dir.mkdir(parents=True, exist_ok=True)
    (settings.datasources_dir / "web.yaml").write_text(SPEC)
    storage = open_deep_storage(settings)
    md = MetadataStore.from_settings(settings)
    hour0, hour2 = Interval(T0, T0 + HOUR), Interval(T0 + 2 * HOUR, T0 + 3 * HOUR)
    on_time0 = _events(400, T0, 1, "a")
    late0 = _events(25, T0, 2, "late")  # reached Kafka after the window period: real time threw them away
    on_time2 = _events(300, T0 + 2 * HOUR, 3, "c")
    only_late3 = _events(10, T0 + 3 * HOUR, 4, "d")  # hour 3: every event late, real time served nothing
    copies = on_time0[:40] + late0[:5] + on_time2[10:30]  # re-sent by the producer
    _realtime(settings, md, storage, on_time0[:250], hour0)
    _realtime(settings, md, storage, on_time0[250:], hour0, offset=1)  # a second micro-batch: another partition
    _realtime(settings, md, storage, on_time2, hour2, handoff=True)

    nxt = write_archive(storage, "web", [orjson.dumps(e) for e in on_time0 + on_time2 + late0 + only_late3 + copies], per_file=200)
    # invalid records of hour 0, filed by their Kafka time: not JSON, no timestamp, a bad one
    invalid = [b"not json", b"{broken", b'{"page": "/x"}', b'{"timestamp": "soon", "id": "x1", "page": "/x"}']
    write_archive(storage, "web", invalid, first_offset=nxt, kafka_ts=T0 + 1_000)
    set_watermark(md, "web", T0 + 5 * HOUR)

    res = rebuild(settings, "web", Interval(T0, T0 + 4 * HOUR), spark=batch_spark)
    by_start = {c.start: c for c in res.corrections}
    assert sorted(by_start) == [hour0.start, hour2.start, hour0.start + 3 * HOUR], "hour 1: no events at all"

    c0 = by_start[hour0.start]
    assert (c0.realtime_events, c0.batch_events, c0.late_recovered, c0.event_gap) == (400, 425, 25, 25)
    assert (c0.duplicates_removed, c0.invalid_dropped, c0.raw_events) == (45, 4, 400 + 25 + 45 + 4)
    assert c0.realtime_version == format_instant(T0) and c0.version == res.version
    assert c0.realtime_metrics == {"count": 400.0, "bytes": float(sum(e["bytes"] for e in on_time0)),
                                   "biggest": float(max(e["bytes"] for e in on_time0))}  # fmt: skip
    assert c0.batch_metrics == {"count": 425.0, "bytes": float(sum(e["bytes"] for e in on_time0 + late0)),
                                "biggest": float(max(e["bytes"] for e in on_time0 + late0))}  # fmt: skip

    c2 = by_start[hour2.start]
    assert (c2.realtime_events, c2.batch_events, c2.late_recovered) == (300, 300, 0)
    assert (c2.duplicates_removed, c2.invalid_dropped, c2.raw_events) == (20, 0, 320)
    assert c2.realtime_version == format_instant(hour2.start) + HANDOFF_SUFFIX
    assert c2.realtime_metrics == c2.batch_metrics

    c3 = by_start[hour0.start + 3 * HOUR]
    assert (c3.realtime_events, c3.batch_events, c3.late_recovered, c3.realtime_version) == (0, 10, 10, "")

    # stored with the publish, and a rebuild over a batch version records nothing new
    assert [c.start for c in md.corrections("web")] == [hour0.start, hour2.start, hour0.start + 3 * HOUR]
    again = rebuild(settings, "web", Interval(T0, T0 + 4 * HOUR), spark=batch_spark)
    assert again.corrections == [] and len(md.corrections("web")) == 3

    # and kept in the self-metrics datasource, each once
    empty = CollectorRegistry()
    assert ingest_self_metrics(md, storage, registry=empty) == 3 * len(CORRECTION_FIELDS) + 3 * 2 * 3 - 3  # hour 3: no real-time metrics
    assert ingest_self_metrics(md, storage, registry=empty) == 0
    md.close()

    with running_server(Path(settings.home)) as srv:
        sql = lambda q: httpx.post(srv.url + "/druid/v2/sql", json={"query": q})  # noqa: E731
        r = sql("SELECT \"start\", realtime_events, batch_events, event_gap, late_recovered, duplicates_removed, "
                "invalid_dropped, raw_events, realtime_version, JSON_VALUE(PARSE_JSON(batch_metrics), '$.bytes') AS b "
                "FROM sys.corrections WHERE datasource = 'web' ORDER BY \"start\"")
        assert r.status_code == 200, r.text
        rows = r.json()
        m = sql("SELECT metric, SUM(value_sum) AS v FROM radstack_metrics WHERE datasource = 'web' AND metric IN "
                "('radstack_correction_late_recovered', 'radstack_correction_duplicates_removed') GROUP BY 1 ORDER BY 1")
        assert m.status_code == 200, m.text
    assert [(x["start"], x["realtime_events"], x["batch_events"], x["event_gap"], x["late_recovered"],
             x["duplicates_removed"], x["invalid_dropped"], x["raw_events"]) for x in rows] == [
        (format_instant(T0), 400, 425, 25, 25, 45, 4, 474),
        (format_instant(hour2.start), 300, 300, 0, 0, 20, 0, 320),
        (format_instant(hour0.start + 3 * HOUR), 0, 10, 10, 10, 0, 0, 10),
    ]  # fmt: skip
    assert float(rows[0]["b"]) == sum(e["bytes"] for e in on_time0 + late0)
    assert [(x["metric"], x["v"]) for x in m.json()] == [
        ("radstack_correction_duplicates_removed", 65.0), ("radstack_correction_late_recovered", 35.0)]
