"""The lookup configuration (radstack/lookups.py): Druid's container shape, the checks, and the
parsing of ``uri`` lookup files in each ``namespaceParseSpec`` format."""

from __future__ import annotations

from typing import Any

import pytest

from radstack.lookups import LookupSpecError, ParseSpec, parse_config, parse_container, parse_rows, replaces


def uri_factory(parse_spec: dict[str, Any], **ns: Any) -> dict[str, Any]:
    return {"type": "cachedNamespace",
            "extractionNamespace": {"type": "uri", "uri": "file:///x.csv", "namespaceParseSpec": parse_spec, **ns}}


def test_map_container() -> None:
    d = parse_container("country", {"version": "v1", "lookupExtractorFactory": {
        "type": "map", "map": {"US": "United States", "n": None, "one": 1}, "injective": True}})
    assert (d.kind, d.version, d.injective) == ("map", "v1", True)
    assert dict(d.pairs) == {"US": "United States", "one": "1"}  # null values are no pair
    assert d.to_json()["lookupExtractorFactory"]["map"]["US"] == "United States"


def test_uri_container() -> None:
    d = parse_container("c", {"version": "2024", "lookupExtractorFactory": uri_factory(
        {"format": "csv", "columns": ["k", "v"]}, pollPeriod="PT5M")})
    assert (d.kind, d.uri, d.poll_ms, d.parse_spec.format) == ("uri", "file:///x.csv", 300_000, "csv")  # type: ignore[union-attr]
    d = parse_container("c", {"version": "1", "lookupExtractorFactory": {"type": "cachedNamespace", "extractionNamespace": {
        "type": "uri", "uriPrefix": "file:///d/", "fileRegex": "renames-[0-9]*\\.csv",
        "namespaceParseSpec": {"format": "simpleJson"}}}})
    assert (d.uri, d.uri_prefix, d.file_regex, d.poll_ms) == (None, "file:///d/", "renames-[0-9]*\\.csv", 0)


@pytest.mark.parametrize("raw,path", [
    ({"lookupExtractorFactory": {"type": "map", "map": {}}}, "lookup.version"),
    ({"version": "v1"}, "lookup.lookupExtractorFactory"),
    ({"version": "v1", "lookupExtractorFactory": {"type": "nope"}}, "lookup.lookupExtractorFactory.type"),
    ({"version": "v1", "lookupExtractorFactory": {"type": "map", "map": {"a": {"b": 1}}}},
     "lookup.lookupExtractorFactory.map.a"),
    ({"version": "v1", "lookupExtractorFactory": {"type": "cachedNamespace", "extractionNamespace": {
        "type": "jdbc"}}}, "lookup.lookupExtractorFactory.extractionNamespace.type"),
    ({"version": "v1", "lookupExtractorFactory": uri_factory({"format": "xml"})},
     "lookup.lookupExtractorFactory.extractionNamespace.namespaceParseSpec.format"),
    ({"version": "v1", "lookupExtractorFactory": uri_factory({"format": "csv"}, uriPrefix="file:///d/")},
     "lookup.lookupExtractorFactory.extractionNamespace"),
    ({"version": "v1", "lookupExtractorFactory": uri_factory({"format": "csv"}, pollPeriod="P1M")},
     "lookup.lookupExtractorFactory.extractionNamespace.pollPeriod"),
    ({"version": "v1", "lookupExtractorFactory": uri_factory({"format": "customJson", "keyFieldName": "k"})},
     "lookup.lookupExtractorFactory.extractionNamespace.namespaceParseSpec.valueFieldName"),
])
def test_bad_containers_name_the_field(raw: dict[str, Any], path: str) -> None:
    with pytest.raises(LookupSpecError) as e:
        parse_container("lookup", raw, "lookup")
    assert e.value.path == path


def test_bulk_config_and_names() -> None:
    cfg = parse_config({"__default": {"a": {"version": "1", "lookupExtractorFactory": {"type": "map", "map": {}}}},
                        "hot": {}})
    assert list(cfg) == ["__default", "hot"] and cfg["__default"]["a"].pairs == ()
    for bad in ({"a/b": {}}, {"__default": {"": {}}}, {"__default": []}, ["x"]):
        with pytest.raises(LookupSpecError):
            parse_config(bad)


def test_versions_must_grow() -> None:
    assert replaces("v2", "v1") and replaces("2024-02-01", "2024-01-31")
    assert not replaces("v1", "v1") and not replaces("v10", "v9")  # lexicographic, as in Druid


def test_parse_csv_by_position_header_and_named_columns() -> None:
    data = b"bar,something,foo\nbat,something2,baz\ntruck,something3,buck\n"
    spec = ParseSpec("csv", ("value", "somethingElse", "key"), "key", "value")
    assert parse_rows(data, spec) == {"foo": "bar", "baz": "bat", "buck": "truck"}
    assert parse_rows(b"a,1\nb,2\n", ParseSpec("csv")) == {"a": "1", "b": "2"}
    head = b"# comment line\ncode,name\nUS,\"United States, of America\"\n"
    assert parse_rows(head, ParseSpec("csv", (), "code", "name", ",", True, 1)) == {
        "US": "United States, of America"}


def test_parse_tsv_and_json_formats() -> None:
    assert parse_rows(b"bar|x|foo\n", ParseSpec("tsv", ("value", "o", "key"), "key", "value", "|")) == {"foo": "bar"}
    lines = b'{"key": "foo", "value": "bar"}\n{"key": "baz", "value": null}\n\n{"key": 1, "value": 2}\n'
    assert parse_rows(lines, ParseSpec("customJson", key_field="key", value_field="value")) == {"foo": "bar", "1": "2"}
    assert parse_rows(b'{"foo": "bar"}\n{"baz": "bat", "x": "y"}\n', ParseSpec("simpleJson")) == {
        "foo": "bar", "baz": "bat", "x": "y"}
    with pytest.raises(LookupSpecError, match="line 1"):
        parse_rows(b"not json\n", ParseSpec("simpleJson"))
    with pytest.raises(LookupSpecError, match="line 1"):
        parse_rows(b"[1, 2]\n", ParseSpec("customJson", key_field="k", value_field="v"))
