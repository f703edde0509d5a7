"""#54: the rebuild reads the parsed archive's typed columns, and parses the raw JSON of every record they
cannot say exactly — both ways give the same segments, row by row, on the same archive (duplicates,
late events, invalid records, values that change type, nested values, repeated members, escapes)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest

from radstack.time.intervals import Interval, format_instant, parse_instant
from tests.fixtures.batch import set_watermark, write_archive

pytestmark = pytest.mark.slow

T0 = parse_instant("2026-11-20T00:00:00Z")
HOUR = 3_600_000
SPEC = """\
dataSchema:
  dataSource: mixed
  timestampSpec: {column: timestamp, format: auto}
  dimensionsSpec:
    dimensions: [page, code, amount, note, {type: string, name: tags, multiValueHandling: SORTED_ARRAY}]
  metricsSpec:
    - {type: count, name: count}
    - {type: longSum, name: bytes, fieldName: bytes}
    - {type: doubleSum, name: price, fieldName: price}
  granularitySpec: {segmentGranularity: hour, queryGranularity: minute, rollup: true}
processing:
  topics: [mixed]
  eventId: id
  windowPeriod: PT10M
"""


def _events(rng: random.Random, n: int, start: int, prefix: str) -> list[bytes]:
    out = []
    for i in range(n):
        ts = start + rng.randrange(0, HOUR)
        e: dict[str, Any] = {
            "timestamp": format_instant(ts) if i % 5 else ts,  # text and millis
            "id": f"{prefix}-{i}",
            "page": rng.choice(["/a", "/b", "/ü", 'q"uote', "back\\slash"]),
            "code": rng.choice([1, "x", 2.5, True, None, -0]),  # one member, several kinds
            "amount": rng.choice([1e8, 0.002, 12, 1.0, -3.25e-7]),  # a double as a string dimension: Java's text
            "bytes": rng.randrange(0, 2000),
            "price": rng.choice([1.5, 2, 0.1]),
        }
        if i % 7 == 0:
            e["tags"] = rng.choice([["b", "a"], [], "c"])  # nested: the record is read raw
        if i % 11 == 0:
            e["note"] = rng.choice(["line\nbreak", "tab\t", "é"])
        if i % 13 == 0:
            del e["page"]
        out.append(orjson.dumps(e))
    return out


@pytest.fixture
def mixed(settings, tmp_path: Path):  # type: ignore[no-untyped-def]
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore

    settings.datasources_dir.mkdir(parents=True, exist_ok=True)
    (settings.datasources_dir / "mixed.yaml").write_text(SPEC)
    md = MetadataStore.from_settings(settings)
    yield settings, md, open_deep_storage(settings)
    md.close()


def _segment_rows(md: Any, interval: Interval) -> list[tuple[Any, ...]]:
    from batch.backfill import visible

    rows = []
    for seg, _part in visible(md, "mixed", interval):
        if not seg.is_tombstone:
            for r in pq.read_table(seg.load_spec["path"]).to_pylist():
                rows.append(tuple(sorted((k, repr(v)) for k, v in r.items())))
    return sorted(rows)


def test_the_parsed_archive_gives_the_segments_of_the_raw_json(mixed, batch_spark) -> None:  # type: ignore[no-untyped-def]
    from batch.archive_reader import read_archive
    from batch.rebuild_job import rebuild
    from radstack.pipeline.input_schema import input_fields
    from radstack.storage.supervisors import datasource_spec

    settings, md, storage = mixed
    rng = random.Random(54)
    hour0, hour1 = _events(rng, 300, T0, "h0"), _events(rng, 200, T0 + HOUR, "h1")
    late = _events(rng, 20, T0, "late")  # delivered with hour 1's traffic
    raw = hour0 + hour1 + late + hour0[:30] + hour1[5:15]  # re-sent copies
    raw += [b"not json", b'["an", "array"]', b'{"timestamp": "2026-11-20T00:10:00Z", "id": "dup", "page": "/a", "page": "/b"}',
            b'{"timestamp": "2026-11-20T00:11:00Z", "id": "big", "code": 123456789012345678901234}',
            b'{"timestamp": "2026-11-20T00:12:00Z", "id": "nested", "code": {"k": 1}}', b"", b"{}",
            b'{"timestamp": "2026-11-20T00:13:00Z", "id": "Case", "Page": "/cap"}']
    write_archive(storage, "mixed", raw, per_file=170)
    set_watermark(md, "mixed", T0 + 4 * HOUR)
    whole = Interval(T0, T0 + 2 * HOUR)

    spec = datasource_spec(settings, "mixed", md)
    archived = read_archive(batch_spark, storage, {"mixed": whole}, input_fields(spec))
    flags = {r["parsed"]: r["count"] for r in archived.groupBy("parsed").count().collect()}
    assert flags[True] > 400 and flags[False] > 60  # both paths are taken

    raw_json = settings.model_copy(update={"batch": settings.batch.model_copy(update={"parsed_archive": False})})
    first = rebuild(raw_json, "mixed", whole, spark=batch_spark)
    from_json = _segment_rows(md, whole)
    second = rebuild(settings, "mixed", whole, spark=batch_spark)
    from_columns = _segment_rows(md, whole)
    assert second.version > first.version
    assert from_json and from_columns == from_json
    assert second.stats == first.stats and (second.rows, second.events) == (first.rows, first.events)
