"""Input sources, input formats, staging and task-spec validation of the Overlord (no server)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from radstack.config import Settings
from radstack.storage.ingest_stats import IngestStats, MaxParseExceptionsExceeded
from serving.overlord.input_formats import read_batches, rows_to_batch
from serving.overlord.input_sources import (
    SOURCES,
    InputEntity,
    InputSpecError,
    resolve_input_source,
    validate_input_source,
)
from serving.overlord.reports import ingestion_report
from serving.overlord.staging import StagedInput
from serving.overlord.task_spec import TaskSpecError, parse_task


def _entity(name: str, data: bytes) -> InputEntity:
    return InputEntity(name, lambda: io.BytesIO(data), len(data))


def _rows(batches: list[pa.RecordBatch]) -> list[dict]:
    return pa.Table.from_batches(batches).to_pylist() if batches else []


def test_json_lines_counts_bad_lines_and_bytes() -> None:
    data = b'{"a": 1, "b": "x"}\n\nnot json\n[1,2]\n{"a": 2, "c": {"n": 1}}\n'
    stats = IngestStats()
    rows = _rows(list(read_batches(_entity("f.json", data), {"type": "json"}, stats)))
    assert rows == [{"a": 1, "b": "x", "c": None}, {"a": 2, "b": None, "c": '{"n":1}'}]
    assert stats.unparseable == 2
    assert stats.processed_bytes == len(data)
    assert [s["errorType"] for s in stats.samples] == ["unparseable", "unparseable"]
    assert stats.samples[0]["input"] == "not json"


def test_json_gz_is_decompressed() -> None:
    raw = b'{"a": 1}\n{"a": 2}\n'
    stats = IngestStats()
    rows = _rows(list(read_batches(_entity("f.json.gz", gzip.compress(raw)), {"type": "json"}, stats)))
    assert rows == [{"a": 1}, {"a": 2}]
    assert stats.processed_bytes == len(raw)


def test_mixed_types_become_strings() -> None:
    batch = rows_to_batch([{"v": 1}, {"v": "x"}, {"v": None}])
    assert batch.schema.field("v").type == pa.string()
    assert batch.column(0).to_pylist() == ["1", "x", None]


def test_csv_header_skip_and_short_rows() -> None:
    # as Druid zips columns and values: a short row's missing values are null (its timestamp, if
    # unreadable, makes it unparseable later, in the indexer)
    data = b"# comment line\nts,page,added\n2020-01-01T00:00:00Z,a,1\n2020-01-01T01:00:00Z,,2\nbroken,row\n"
    stats = IngestStats()
    fmt = {"type": "csv", "findColumnsFromHeader": True, "skipHeaderRows": 1}
    rows = _rows(list(read_batches(_entity("f.csv", data), fmt, stats)))
    assert rows == [
        {"ts": "2020-01-01T00:00:00Z", "page": "a", "added": "1"},
        {"ts": "2020-01-01T01:00:00Z", "page": None, "added": "2"},
        {"ts": "broken", "page": "row", "added": None},
    ]
    assert stats.unparseable == 0


def test_tsv_trailing_delimiter_is_ignored() -> None:
    # TPC-H's .tbl files end every line with the delimiter: Druid ignores the extra empty value
    data = b"1|AFRICA|lar deposits|\n2|AMERICA|hs use ironic|\n"
    fmt = {"type": "tsv", "columns": ["r_regionkey", "r_name", "r_comment"], "delimiter": "|"}
    stats = IngestStats()
    rows = _rows(list(read_batches(_entity("region.tbl", data), fmt, stats)))
    assert rows == [
        {"r_regionkey": "1", "r_name": "AFRICA", "r_comment": "lar deposits"},
        {"r_regionkey": "2", "r_name": "AMERICA", "r_comment": "hs use ironic"},
    ]
    assert stats.unparseable == 0


def test_tsv_with_columns_and_custom_delimiter() -> None:
    data = b"2020-01-01|x|3\n2020-01-02|y|4\n"
    fmt = {"type": "tsv", "columns": ["ts", "d", "m"], "delimiter": "|"}
    rows = _rows(list(read_batches(_entity("f.tsv", data), fmt, IngestStats())))
    assert rows == [{"ts": "2020-01-01", "d": "x", "m": "3"}, {"ts": "2020-01-02", "d": "y", "m": "4"}]


def test_parquet_from_non_seekable_stream(tmp_path: Path) -> None:
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"ts": ["2020-01-01"], "n": [5], "b": [b"raw"]}), path)
    data = path.read_bytes()

    class OneWay(io.RawIOBase):
        def __init__(self) -> None:
            self._b = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def seekable(self) -> bool:
            return False

        def readinto(self, b):  # type: ignore[no-untyped-def]
            chunk = self._b.read(len(b))
            b[: len(chunk)] = chunk
            return len(chunk)

    ent = InputEntity("s3://b/in.parquet", lambda: OneWay(), None)
    rows = _rows(list(read_batches(ent, {"type": "parquet", "binaryAsString": True}, IngestStats())))
    assert rows == [{"ts": "2020-01-01", "n": 5, "b": "raw"}]


def test_local_source_filter_is_recursive_on_file_names(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for p in ("a.json", "sub/b.json", "c.csv"):
        (tmp_path / p).write_text("{}\n")
    settings = Settings.model_validate({"ingestion": {"local": {"allowed_dirs": [str(tmp_path)]}}})
    ents = resolve_input_source({"type": "local", "baseDir": str(tmp_path), "filter": "*.json"}, settings)
    assert sorted(Path(e.name).name for e in ents) == ["a.json", "b.json"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"type": "ftp"}, "inputSource.type"),
        ({"type": "local"}, "inputSource.baseDir"),
        ({"type": "inline"}, "inputSource.data"),
        ({"type": "http", "uris": ["ftp://x/y"]}, "inputSource.uris"),
        ({"type": "s3", "uris": ["s3://b/k"], "prefixes": ["s3://b/"]}, "inputSource"),
        ({"type": "s3", "uris": ["http://b/k"]}, "inputSource.uris"),
        ({"type": "hdfs"}, "inputSource.paths"),
    ],
)
def test_bad_input_sources_name_the_field(spec: dict, field: str) -> None:
    with pytest.raises(InputSpecError) as e:
        validate_input_source(spec)
    assert str(e.value).startswith(f"spec.ioConfig.{field}")


def test_staging_unifies_schemas_and_casts(tmp_path: Path) -> None:
    staged = StagedInput(tmp_path)
    try:
        staged.add(rows_to_batch([{"ts": "t1", "n": "5", "d": "x"}]))
        staged.add(rows_to_batch([{"ts": "t2", "n": "oops", "e": 1.5}]))
        rows = pa.Table.from_batches(list(staged.batches({"n": "long"}))).to_pylist()
    finally:
        staged.close()
    assert rows == [{"ts": "t1", "n": 5, "d": "x", "e": None}, {"ts": "t2", "n": None, "d": None, "e": 1.5}]
    assert not staged.dir.exists()


def test_max_parse_exceptions_raises_past_the_limit() -> None:
    stats = IngestStats(max_parse_exceptions=1)
    stats.add_unparseable("a", "bad")
    with pytest.raises(MaxParseExceptionsExceeded, match=r"Max parse exceptions\[1\] exceeded"):
        stats.add_unparseable("b", "bad")
    report = ingestion_report("t1", stats, state="COMPLETED", error_msg="x")["ingestionStatsAndErrors"]
    assert report["payload"]["rowStats"]["buildSegments"]["unparseable"] == 2
    assert len(report["payload"]["unparseableEvents"]["buildSegments"]) == 2


TASK = {
    "type": "index_parallel",
    "spec": {
        "dataSchema": {"dataSource": "wiki", "timestampSpec": {"column": "ts"},
                       "dimensionsSpec": {"dimensions": ["page"]}},
        "ioConfig": {"type": "index_parallel", "inputSource": {"type": "inline", "data": "{}"},
                     "inputFormat": {"type": "json"}},
        "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 7},
                         "maxParseExceptions": 3},
    },
}


def test_parse_task_defaults_and_id_shape() -> None:
    spec = parse_task(TASK, 1_600_000_000_000)
    assert spec.id.startswith("index_parallel_wiki_") and spec.id.endswith("_2020-09-13T12:26:40.000Z")
    assert spec.max_rows_per_segment == 7 and spec.max_parse_exceptions == 3
    assert spec.append_to_existing is False
    assert spec.payload["spec"]["ioConfig"]["inputSource"]["type"] == "inline"


def test_parse_task_accepts_top_level_layout_and_given_id() -> None:
    old = {"type": "index", "id": "my-task", **TASK["spec"]}
    spec = parse_task(old, 0)
    assert spec.id == "my-task" and spec.type == "index" and spec.data_source == "wiki"


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda t: t.update(type="kill"), "type"),
        (lambda t: t["spec"].pop("dataSchema"), "spec.dataSchema"),
        (lambda t: t["spec"]["dataSchema"].update(granularitySpec={"segmentGranularity": "fortnight"}),
         "spec.dataSchema.granularitySpec.segmentGranularity"),
        (lambda t: t["spec"]["ioConfig"].update(inputFormat={"type": "avro"}), "spec.ioConfig.inputFormat.type"),
        (lambda t: t["spec"]["ioConfig"].update(appendToExisting="yes"), "spec.ioConfig.appendToExisting"),
        (lambda t: t["spec"]["tuningConfig"].update(maxParseExceptions=-1), "spec.tuningConfig.maxParseExceptions"),
        (lambda t: t["spec"]["tuningConfig"].update(partitionsSpec={"type": "hash"}),
         "spec.tuningConfig.partitionsSpec.type"),
        # Druid: hashed/range partitioning is for perfect rollup only
        (lambda t: t["spec"]["tuningConfig"].update(partitionsSpec={"type": "hashed"}),
         "spec.tuningConfig.forceGuaranteedRollup"),
        (lambda t: t["spec"]["tuningConfig"].update(partitionsSpec={"type": "range"}, forceGuaranteedRollup=True),
         "spec.tuningConfig.partitionsSpec.partitionDimensions"),
    ],
)
def test_parse_task_errors_name_the_field(mutate, field: str) -> None:  # type: ignore[no-untyped-def]
    import copy

    task = copy.deepcopy(TASK)
    mutate(task)
    with pytest.raises(TaskSpecError) as e:
        parse_task(task, 0)
    assert e.value.path == field, str(e.value)


@pytest.mark.parametrize("context", [True, "x", [1], 5])
def test_a_task_context_must_be_an_object(context: object) -> None:
    task = {"type": "index_parallel", "spec": {
        "dataSchema": {"dataSource": "t", "timestampSpec": {"column": "ts"}, "dimensionsSpec": {"dimensions": []},
                       "granularitySpec": {"segmentGranularity": "day"}},
        "ioConfig": {"inputSource": {"type": "inline", "data": "{}"}, "inputFormat": {"type": "json"}}},
        "context": context}
    with pytest.raises(TaskSpecError, match="context"):
        parse_task(task, 0)


def test_every_input_source_type_is_one_module_and_one_doc_row() -> None:
    root = Path(__file__).resolve().parents[2]
    modules = {p.stem for p in (root / "serving/overlord/input_sources").glob("*.py")} - {"__init__", "base"}
    doc = (root / "docs/ingestion.md").read_text()
    section = doc[doc.index("## Input sources"):].split("\n## ")[0]
    rows = {line.split("`")[1] for line in section.splitlines() if line.startswith("| `")}
    assert set(SOURCES) == modules == rows
    assert all(SOURCES[name].type == name for name in modules)
