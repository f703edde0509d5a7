"""#54: the rebuild reads the parsed archive's typed columns, and parses the raw JSON of every record they
cannot say exactly — both ways give the same segments, row by row, on the same archive (duplicates,
late events, invalid records, values that change type, nested values, repeated members, escapes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from radstack.time.intervals import Interval
from tests.fixtures.batch import set_watermark, write_archive
from tests.fixtures.mixed_archive import HOUR, SPEC, T0, mixed_archive, segment_rows

pytestmark = pytest.mark.slow


@pytest.fixture
def mixed(settings, tmp_path: Path):  # type: ignore[no-untyped-def]
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore

    settings.datasources_dir.mkdir(parents=True, exist_ok=True)
    (settings.datasources_dir / "mixed.yaml").write_text(SPEC)
    md = MetadataStore.from_settings(settings)
    yield settings, md, open_deep_storage(settings)
    md.close()


def test_the_parsed_archive_gives_the_segments_of_the_raw_json(mixed, batch_spark) -> None:  # type: ignore[no-untyped-def]
    from batch.archive_reader import read_archive
    from batch.rebuild_job import rebuild
    from radstack.pipeline.input_schema import input_fields
    from radstack.storage.supervisors import datasource_spec

    settings, md, storage = mixed
    raw = mixed_archive()
    write_archive(storage, "mixed", raw, per_file=170)
    set_watermark(md, "mixed", T0 + 4 * HOUR)
    whole = Interval(T0, T0 + 2 * HOUR)

    spec = datasource_spec(settings, "mixed", md)
    archived = read_archive(batch_spark, storage, {"mixed": whole}, input_fields(spec))
    flags = {r["parsed"]: r["count"] for r in archived.groupBy("parsed").count().collect()}
    assert flags[True] > 400 and flags[False] > 60  # both paths are taken

    raw_json = settings.model_copy(update={"batch": settings.batch.model_copy(update={"parsed_archive": False})})
    first = rebuild(raw_json, "mixed", whole, spark=batch_spark)
    from_json = segment_rows(md, whole)
    second = rebuild(settings, "mixed", whole, spark=batch_spark)
    from_columns = segment_rows(md, whole)
    assert second.version > first.version
    assert from_json and from_columns == from_json
    assert second.stats == first.stats and (second.rows, second.events) == (first.rows, first.events)
