from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from radstack.spec import (
    DataSchema,
    DimensionSchema,
    MetricSpec,
    SpecError,
    load_datasource_spec,
    parse_data_schema,
)
from radstack.time.granularity import Granularity
from radstack.time.intervals import Interval, Period, parse_instant

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def wiki() -> dict[str, Any]:
    return {
        "dataSource": "wikipedia",
        "timestampSpec": {"column": "time", "format": "iso"},
        "dimensionsSpec": {
            "dimensions": ["channel", {"type": "long", "name": "delta"}, {"name": "page"}],
            "dimensionExclusions": ["comment"],
        },
        "metricsSpec": [
            {"type": "count", "name": "count"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
            {"type": "doubleMax", "name": "maxDelta", "fieldName": "delta"},
        ],
        "granularitySpec": {
            "segmentGranularity": "hour",
            "queryGranularity": "minute",
            "rollup": False,
            "intervals": ["2016-06-27/2016-06-28"],
        },
    }


def test_bare_data_schema_fields() -> None:
    s = parse_data_schema(wiki())
    assert s.data_source == "wikipedia"
    assert s.timestamp_spec.column == "time" and s.timestamp_spec.format == "iso"
    assert s.dimensions == (
        DimensionSchema("channel", "string"),
        DimensionSchema("delta", "long"),
        DimensionSchema("page", "string"),
    )
    assert s.dimension_exclusions == ("comment",)
    assert s.metrics[1] == MetricSpec("longSum", "added", "added")
    assert s.segment_granularity == Granularity.parse("hour")
    assert s.query_granularity == Granularity.parse("minute")
    assert s.rollup is False
    assert s.intervals == (Interval(parse_instant("2016-06-27"), parse_instant("2016-06-28")),)


def test_druid_defaults() -> None:
    s = parse_data_schema({"dataSource": "x"})
    assert s.timestamp_spec.column == "timestamp"
    assert s.timestamp_spec.format == "auto"
    assert s.timestamp_spec.missing_value is None
    assert s.segment_granularity == Granularity.parse("DAY")
    assert s.query_granularity.is_none
    assert s.rollup is True
    assert s.intervals == ()
    assert s.is_schemaless


def test_ingestion_spec_wrapper_returns_the_data_schema() -> None:
    spec = {"type": "index_parallel", "spec": {"dataSchema": wiki(), "ioConfig": {"type": "index_parallel"}}}
    assert parse_data_schema(spec) == parse_data_schema(wiki())


def test_legacy_parser_parse_spec_layout() -> None:
    ds = wiki()
    ts, dims = ds.pop("timestampSpec"), ds.pop("dimensionsSpec")
    ds["parser"] = {"type": "string", "parseSpec": {"format": "json", "timestampSpec": ts, "dimensionsSpec": dims}}
    assert parse_data_schema(ds) == parse_data_schema(wiki())


def test_schemaless_discovery_sorted_and_excludes() -> None:
    ds = {
        "dataSource": "x",
        "timestampSpec": {"column": "ts"},
        "dimensionsSpec": {"dimensions": [], "dimensionExclusions": ["secret"]},
        "metricsSpec": [{"type": "longSum", "name": "total", "fieldName": "amount"}],
        "transformSpec": {"transforms": [{"type": "expression", "name": "upper", "expression": "upper(b)"}]},
    }
    s = parse_data_schema(ds)
    dims = s.resolve_dimensions(["ts", "zeta", "amount", "alpha", "secret", "total", "__time", "b"])
    assert [d.name for d in dims] == ["alpha", "b", "upper", "zeta"]
    assert all(d.type == "string" for d in dims)


def test_declared_dimensions_are_not_rediscovered() -> None:
    s = parse_data_schema(wiki())
    assert s.resolve_dimensions(["other", "channel"]) == s.dimensions


@pytest.mark.parametrize(
    ("metric", "combined"),
    [
        (MetricSpec("count", "count"), MetricSpec("longSum", "count", "count")),
        (MetricSpec("longSum", "s", "x"), MetricSpec("longSum", "s", "s")),
        (MetricSpec("doubleMin", "lo", None, "x * 2"), MetricSpec("doubleMin", "lo", "lo")),
        (MetricSpec("floatMax", "hi", "x"), MetricSpec("floatMax", "hi", "hi")),
    ],
)
def test_combining(metric: MetricSpec, combined: MetricSpec) -> None:
    assert metric.combining() == combined


def test_metric_types_case_insensitive_and_value_types() -> None:
    s = parse_data_schema(
        {
            "dataSource": "x",
            "metricsSpec": [
                {"type": "LONGSUM", "name": "a", "fieldName": "a"},
                {"type": "floatSum", "name": "b", "fieldName": "b"},
                {"type": "doubleMax", "name": "c", "expression": "a + b"},
            ],
        }
    )
    assert [m.type for m in s.metrics] == ["longSum", "floatSum", "doubleMax"]
    assert [m.value_type for m in s.metrics] == ["long", "float", "double"]
    assert [m.kind for m in s.metrics] == ["sum", "sum", "max"]


def test_to_json_round_trips() -> None:
    ds = wiki()
    ds["transformSpec"] = {
        "transforms": [{"type": "expression", "name": "up", "expression": "upper(channel)"}],
        "filter": {"type": "selector", "dimension": "channel", "value": "#en"},
    }
    ds["timestampSpec"]["missingValue"] = "2010-01-01T00:00:00Z"
    s = parse_data_schema(ds)
    assert parse_data_schema(s.to_json()) == s
    assert parse_data_schema(json.loads(json.dumps(s.to_json()))).transform_filter == ds["transformSpec"]["filter"]


def test_missing_value_parsed_to_millis() -> None:
    s = parse_data_schema({"dataSource": "x", "timestampSpec": {"missingValue": "2010-01-01T00:00:00Z"}})
    assert s.timestamp_spec.missing_value == parse_instant("2010-01-01")


def test_joda_format_accepted() -> None:
    s = parse_data_schema({"dataSource": "x", "timestampSpec": {"format": "yyyy-MM-dd HH:mm:ss"}})
    assert s.timestamp_spec.format == "yyyy-MM-dd HH:mm:ss"
    assert s.timestamp_spec.is_joda


def test_format_names_normalised() -> None:
    s = parse_data_schema({"dataSource": "x", "timestampSpec": {"format": "POSIX"}})
    assert s.timestamp_spec.format == "posix" and not s.timestamp_spec.is_joda


# ---- errors ------------------------------------------------------------------------------------


def _set(d: dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    for k in keys[:-1]:
        d = d[int(k)] if isinstance(d, list) else d.setdefault(k, {})
    if isinstance(d, list):
        d[int(keys[-1])] = value
    elif value is _DELETE:
        del d[keys[-1]]
    else:
        d[keys[-1]] = value


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("granularitySpec.segmentGranularity", "fortnight",
         "dataSchema.granularitySpec.segmentGranularity: unknown granularity 'fortnight'"),
        ("granularitySpec.queryGranularity", "day",
         "dataSchema.granularitySpec.queryGranularity: queryGranularity 'day' is coarser"),
        ("granularitySpec.segmentGranularity", "none",
         "dataSchema.granularitySpec.segmentGranularity: segmentGranularity cannot be NONE"),
        ("granularitySpec.rollup", "maybe", "dataSchema.granularitySpec.rollup: expected true or false"),
        ("granularitySpec.intervals", ["2016-06-28/2016-06-27"], "dataSchema.granularitySpec.intervals[0]:"),
        ("granularitySpec.intervals", ["yesterday"], "dataSchema.granularitySpec.intervals[0]:"),
        ("granularitySpec.intervals", "2016-06-27/2016-06-28", "dataSchema.granularitySpec.intervals: expected a list"),
        ("granularitySpec.type", "weird", "dataSchema.granularitySpec.type: unknown granularitySpec type"),
        ("metricsSpec.1.type", "hyperUnique", "dataSchema.metricsSpec[1].type: unknown metric type 'hyperUnique'"),
        ("metricsSpec.1", {"type": "longSum", "name": "added"},
         "dataSchema.metricsSpec[1]: longSum 'added' needs 'fieldName' or 'expression'"),
        ("metricsSpec.1", {"type": "longSum", "name": "", "fieldName": "a"}, "dataSchema.metricsSpec[1].name:"),
        ("metricsSpec.1", {"type": "longSum", "name": "channel", "fieldName": "a"},
         "dataSchema.metricsSpec[1].name: 'channel' is already used by dataSchema.dimensionsSpec.dimensions[0]"),
        ("metricsSpec.1", "count", "dataSchema.metricsSpec[1]: expected an object"),
        ("dimensionsSpec.dimensions.1", {"type": "complex", "name": "delta"},
         "dataSchema.dimensionsSpec.dimensions[1].type: unknown dimension type 'complex'"),
        ("dimensionsSpec.dimensions.1", {"type": "long"}, "dataSchema.dimensionsSpec.dimensions[1].name:"),
        ("dimensionsSpec.dimensions.1", "channel",
         "dataSchema.dimensionsSpec.dimensions[1]: duplicate column name 'channel'"),
        ("dimensionsSpec.dimensions.1", "__time", "dataSchema.dimensionsSpec.dimensions[1]: '__time' cannot"),
        ("dimensionsSpec.dimensionExclusions", ["page"],
         "dataSchema.dimensionsSpec.dimensionExclusions: page cannot be both"),
        ("dataSource", "a/b", "dataSchema.dataSource: dataSource 'a/b' cannot contain '/'"),
        ("dataSource", ".hidden", "dataSchema.dataSource: dataSource '.hidden' cannot start with '.'"),
        ("dataSource", "tab\tname", "dataSchema.dataSource: dataSource 'tab\\tname' cannot contain whitespace"),
        ("dataSource", _DELETE, "dataSchema.dataSource: expected a non-empty string"),
        ("timestampSpec.format", "qqq", "dataSchema.timestampSpec.format: unknown timestamp format 'qqq'"),
        ("timestampSpec.format", "---", "dataSchema.timestampSpec.format: unknown timestamp format '---'"),
        ("timestampSpec.column", "", "dataSchema.timestampSpec.column: expected a non-empty string"),
        ("timestampSpec.missingValue", "not a time", "dataSchema.timestampSpec.missingValue:"),
        ("transformSpec.transforms", [{"type": "expression", "expression": "1"}],
         "dataSchema.transformSpec.transforms[0].name:"),
        ("transformSpec.transforms", [{"type": "javascript", "name": "a", "expression": "1"}],
         "dataSchema.transformSpec.transforms[0].type: unknown transform type"),
        ("transformSpec.transforms", [{"name": "a", "expression": "1"}, {"name": "a", "expression": "2"}],
         "dataSchema.transformSpec.transforms[1].name: duplicate transform 'a'"),
        ("transformSpec.filter", {"dimension": "a", "value": "b"}, "dataSchema.transformSpec.filter.type: missing"),
        ("transformSpec.filter", "channel = 'a'", "dataSchema.transformSpec.filter: expected an object"),
        ("transformSpec.filter", {"type": "nonsense"}, "dataSchema.transformSpec.filter: invalid filter"),
        ("transformSpec.transforms", [{"type": "expression", "name": "a", "expression": "upper(("}],
         "dataSchema.transformSpec.transforms[0].expression: invalid expression 'upper(('"),
        ("metricsSpec.1", {"type": "longSum", "name": "x", "expression": "1 +"},
         "dataSchema.metricsSpec[1].expression: invalid expression '1 +'"),
    ],
)
def test_bad_fields_name_their_path(path: str, value: Any, message: str) -> None:
    ds = copy.deepcopy(wiki())
    _set(ds, path, value)
    with pytest.raises(SpecError) as ei:
        parse_data_schema({"dataSchema": ds})
    assert str(ei.value).startswith(message), str(ei.value)


def test_error_path_inside_ingestion_spec() -> None:
    ds = wiki()
    ds["granularitySpec"]["segmentGranularity"] = "fortnight"
    with pytest.raises(SpecError, match=r"^spec\.dataSchema\.granularitySpec\.segmentGranularity: "):
        parse_data_schema({"type": "index_parallel", "spec": {"dataSchema": ds}})


def test_spec_error_is_a_value_error_with_path() -> None:
    with pytest.raises(ValueError) as ei:
        parse_data_schema({"dataSource": "x", "granularitySpec": {"rollup": 3}})
    assert isinstance(ei.value, SpecError)
    assert ei.value.path == "dataSchema.granularitySpec.rollup"


# ---- datasource spec files -----------------------------------------------------------------------


def test_load_yaml_file_with_processing(tmp_path: Path) -> None:
    p = tmp_path / "wiki.yaml"
    p.write_text(
        """
dataSchema:
  dataSource: wikipedia
  timestampSpec: {column: time, format: iso}
  dimensionsSpec: {dimensions: [channel, page]}
  metricsSpec: [{type: count, name: count}]
processing:
  topics: [wiki-raw, wiki-raw-2]
  eventId: id
  windowPeriod: PT5M
  deadLetterTopic: wiki-dlq
  joins:
    - {name: users, type: lookup, lookup: user_names, key: user}
  lookups:
    user_names: {type: map, map: {a: Alice}}
"""
    )
    spec = load_datasource_spec(p)
    assert spec.name == "wikipedia"
    assert spec.source == p
    assert spec.data_schema.dimension_names == ("channel", "page")
    pr = spec.processing
    assert pr.topics == ("wiki-raw", "wiki-raw-2")
    assert pr.event_id == "id"
    assert pr.window_period == Period.parse("PT5M")
    assert pr.dead_letter_topic == "wiki-dlq"
    assert pr.joins[0].name == "users" and pr.joins[0].options == {"lookup": "user_names", "key": "user"}
    assert pr.lookups[0].name == "user_names" and pr.lookups[0].options == {"map": {"a": "Alice"}}


def test_load_json_file_and_defaults(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"dataSchema": {"dataSource": "x"}}))
    spec = load_datasource_spec(p)
    assert spec.processing.window_period == Period.parse("PT10M")
    assert spec.processing.topics == ()
    assert spec.processing.event_id is None


def test_load_mapping_of_every_shape() -> None:
    a = load_datasource_spec(wiki())
    b = load_datasource_spec({"type": "index_parallel", "spec": {"dataSchema": wiki()}})
    c = load_datasource_spec({"dataSchema": wiki(), "processing": {"topic": "t"}})
    assert a.data_schema == b.data_schema == c.data_schema
    assert c.processing.topics == ("t",)


def test_examples_rollup_tutorial_specs_agree() -> None:
    yaml_spec = load_datasource_spec(EXAMPLES / "rollup-tutorial" / "rollup-tutorial.yaml")
    druid_spec = load_datasource_spec(EXAMPLES / "rollup-tutorial" / "rollup-index.json")
    assert yaml_spec.data_schema.metrics == druid_spec.data_schema.metrics
    assert yaml_spec.data_schema.dimensions == druid_spec.data_schema.dimensions
    assert druid_spec.data_schema.segment_granularity == Granularity.parse("week")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"dataSchema": {"dataSource": "x"}, "procesing": {}}, "procesing: unknown top-level key"),
        ({"processing": {}}, "dataSchema: missing"),
        ({"dataSchema": {"dataSource": "x"}, "processing": {"windowPeriod": "10 minutes"}},
         "processing.windowPeriod: cannot parse period"),
        ({"dataSchema": {"dataSource": "x"}, "processing": {"topics": [""]}}, "processing.topics[0]:"),
        ({"dataSchema": {"dataSource": "x"}, "processing": {"joins": ["users"]}},
         "processing.joins[0]: expected an object"),
        ({"dataSchema": {"dataSource": "x"}, "processing": {"lookups": [{"type": "map"}]}},
         "processing.lookups[0].name:"),
        ({"dataSchema": {"dataSource": "x"}, "processing": []}, "processing: expected an object"),
    ],
)
def test_bad_datasource_spec(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as ei:
        load_datasource_spec(doc)
    assert str(ei.value).startswith(message), str(ei.value)


def test_bad_yaml_file(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("dataSchema: [unclosed")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_datasource_spec(p)


def test_data_schema_is_frozen() -> None:
    s = parse_data_schema(wiki())
    with pytest.raises(AttributeError):
        s.data_source = "other"  # type: ignore[misc]
    assert isinstance(s, DataSchema)
