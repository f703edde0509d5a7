"""Multi-value string dimensions in queries, on the real broker (indexer → deep storage → broker):
Druid's any-value filters, GROUP BY explosion, the MV_/ARRAY_ functions and UNNEST, worked out by hand
from the four rows below."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from serving.broker.native import run_native_query
from serving.errors import DruidError
from tests.unit.test_sql_execution import run

SCHEMA: dict[str, Any] = {
    "dataSource": "pages",
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["page", {"type": "string", "name": "tags", "multiValueHandling": "SORTED_ARRAY"}]},
    "metricsSpec": [{"type": "count", "name": "count"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False},
}
# page A: [a, b] 1 · B: [c] 2 · C: no values 4 · D: [a, c] 8
ROWS = pa.table({"ts": ["2024-01-01T01:00:00Z", "2024-01-01T02:00:00Z", "2024-01-01T03:00:00Z", "2024-01-01T04:00:00Z"],
                 "page": ["A", "B", "C", "D"], "tags": ['["b", "a"]', "c", "[]", '["a", "c"]'], "added": [1, 2, 4, 8]})


@pytest.fixture
def env(broker_env: Any) -> Any:
    broker_env.index(ROWS, SCHEMA, version="2024-02-01T00:00:00.000Z")
    broker_env.service.refresh()
    return broker_env


def rows(env: Any, sql: str) -> list[tuple[Any, ...]]:
    return run(env, sql)[1]


def test_group_by_explodes_values(env: Any) -> None:
    assert rows(env, "SELECT tags, SUM(added) FROM pages GROUP BY tags ORDER BY tags NULLS FIRST") == [
        (None, 4), ("a", 9), ("b", 1), ("c", 10)]
    assert rows(env, "SELECT tags, page, COUNT(*) FROM pages GROUP BY 1, 2 ORDER BY 1, 2") == [
        (None, "C", 1), ("a", "A", 1), ("a", "D", 1), ("b", "A", 1), ("c", "B", 1), ("c", "D", 1)]
    assert rows(env, "SELECT DISTINCT tags FROM pages ORDER BY 1") == [(None,), ("a",), ("b",), ("c",)]
    assert rows(env, "SELECT UPPER(tags) AS t, SUM(added) FROM pages GROUP BY 1 HAVING SUM(added) > 5 ORDER BY 1") == [
        ("A", 9), ("C", 10)]


def test_filters_match_any_value(env: Any) -> None:
    def added(where: str) -> int | None:
        return rows(env, f"SELECT SUM(added) FROM pages WHERE {where}")[0][0]

    assert added("tags = 'a'") == 9
    assert added("'a' = tags") == 9
    assert added("tags <> 'a'") == 2  # no value is 'a' (and rows without values are unknown)
    assert added("tags IN ('b', 'c')") == 11
    assert added("tags NOT IN ('b', 'c')") is None
    assert added("tags LIKE 'c%'") == 10
    assert added("tags IS NULL") == 4
    assert added("MV_CONTAINS(tags, 'a') AND MV_CONTAINS(tags, 'c')") == 8
    assert added("UPPER(tags) = 'B' OR page = 'C'") == 5
    assert added("CONTAINS_STRING(tags, 'b')") == 1


def test_comparisons_of_one_column_are_gathered_into_ranges_as_calcite_does(env: Any) -> None:
    """Druid 33's answers (its planner, Calcite, reads the column as one value; checked against a local
    Druid 33 on the corpus's ``corpus_mixed``)."""
    def added(where: str) -> int | None:
        return rows(env, f"SELECT SUM(added) FROM pages WHERE {where}")[0][0]

    assert added("tags = 'a' AND tags = 'c'") is None  # FALSE: one value is never two
    assert added("tags = 'a' AND page = 'D' AND tags = 'c'") is None
    assert added("tags = 'a' AND tags <> 'b'") == 9  # = tags = 'a' (A counts although it has 'b')
    assert added("tags IN ('a', 'b') AND tags NOT IN ('b')") == 9
    assert added("tags = 'a' AND (tags = 'c' OR page = 'A')") == 1  # 'c' is decided false beside 'a'
    assert added("NOT (tags = 'a' AND tags = 'c')") == 11  # tags IS NOT NULL
    assert added("tags <> 'a' OR tags <> 'c'") == 11
    assert added("tags BETWEEN 'b' AND 'c' AND tags <> 'c'") == 1  # one value in ['b', 'c')
    assert added("tags < 'b' OR tags > 'b'") == 10  # NOT (tags = 'b'): B, D (C has no value: unknown)
    assert added("NOT (tags < 'b')") == 11  # tags >= 'b': A ('b'), B, D ('c')
    assert added("(tags = 'a' AND tags = 'c') OR page = 'C'") == 4
    # a filtering subquery's filter merges with the query's, as Calcite merges them
    assert rows(env, "SELECT SUM(added) FROM (SELECT * FROM pages WHERE tags = 'a') WHERE tags = 'c'")[0][0] is None
    assert rows(env, "SELECT SUM(added) FROM (SELECT * FROM pages WHERE tags = 'a') WHERE tags <> 'b'")[0][0] == 9
    assert rows(env, "SELECT SUM(added) FROM (SELECT * FROM pages WHERE tags IN ('a', 'c')) "
                     "WHERE tags IN ('b', 'c')")[0][0] == 10  # one value in {'c'}: B and D
    assert rows(env, "SELECT SUM(added) FROM (SELECT * FROM pages WHERE tags IN ('a', 'b')) "
                     "WHERE tags = 'b' OR tags = 'c'")[0][0] == 1  # one value in {'b'}: A (not D)
    assert rows(env, "SELECT SUM(CASE WHEN tags = 'a' AND tags = 'c' THEN 1 ELSE 0 END), "
                     "COUNT(*) FILTER (WHERE tags = 'a' AND tags = 'b') FROM pages") == [(0, 0)]


def test_no_window_over_a_multi_value_column(env: Any) -> None:
    with pytest.raises(DruidError, match="Window processing does not support MVDs"):
        rows(env, "SELECT page, tags, ROW_NUMBER() OVER (ORDER BY page) FROM pages")
    assert rows(env, "SELECT page, ROW_NUMBER() OVER (ORDER BY page) FROM pages WHERE tags = 'a'") == [("A", 1), ("D", 2)]


def test_is_null_as_a_value_tests_the_row(env: Any) -> None:
    # Druid 33: grouped by, ``tags IS NULL`` is whether the row has no values (C), never split per value
    assert rows(env, "SELECT tags IS NULL AS k, SUM(added) FROM pages GROUP BY 1 ORDER BY 1") == [(False, 11), (True, 4)]
    assert rows(env, "SELECT SUM(added) FROM pages WHERE tags IS NULL")[0][0] == 4


def test_the_filter_applies_to_the_row_before_it_is_exploded(env: Any) -> None:
    # as in Druid: the rows with 'a' also bring their other values into the groups
    assert rows(env, "SELECT tags, SUM(added) FROM pages WHERE tags = 'a' GROUP BY tags ORDER BY 1") == [
        ("a", 9), ("b", 1), ("c", 8)]
    assert rows(env, "SELECT MV_FILTER_ONLY(tags, ARRAY['a', 'b']) AS t, SUM(added) FROM pages GROUP BY 1 "
                     "ORDER BY 1 NULLS FIRST") == [(None, 6), ("a", 9), ("b", 1)]


def test_scan_returns_one_value_or_the_json_array(env: Any) -> None:
    assert rows(env, "SELECT page, tags FROM pages ORDER BY __time") == [
        ("A", '["a","b"]'), ("B", "c"), ("C", None), ("D", '["a","c"]')]
    names, got = run(env, "SELECT * FROM pages WHERE page = 'A'")
    assert got[0][names.index("tags")] == '["a","b"]'


def test_mv_function_results_are_multi_value_strings_in_the_answer(env: Any) -> None:
    # Druid 33 answers a VARCHAR: one value as itself, several as their JSON array text, none as NULL
    # (appending to a row without values is NULL too)
    sql = ("SELECT page, MV_APPEND(tags, 'z'), MV_FILTER_ONLY(tags, ARRAY['a']), MV_SLICE(tags, 0, 0), "
           "STRING_TO_MV(page, ',') FROM pages ORDER BY __time")
    names, got = run(env, sql)
    assert got == [("A", '["a","b","z"]', "a", None, "A"), ("B", '["c","z"]', None, None, "B"),
                   ("C", None, None, None, "C"), ("D", '["a","c","z"]', "a", None, "D")]
    # also where the block unnests (a join)
    got = rows(env, "SELECT page, c, MV_PREPEND('y', STRING_TO_MV(page, ',')) FROM pages, "
                    "UNNEST(MV_TO_ARRAY(tags)) AS u(c) WHERE page = 'B'")
    assert got == [("B", "c", '["y","B"]')]


def test_mv_and_array_functions(env: Any) -> None:
    got = rows(env, "SELECT page, MV_LENGTH(tags), MV_CONTAINS(tags, 'a'), MV_CONTAINS(tags, ARRAY['a', 'c']), "
                    "MV_OVERLAP(tags, ARRAY['b', 'z']), MV_TO_STRING(tags, '|'), MV_OFFSET(tags, 0), MV_ORDINAL(tags, 2), "
                    "MV_OFFSET_OF(tags, 'c'), ARRAY_LENGTH(MV_TO_ARRAY(tags)) FROM pages ORDER BY __time")
    assert got == [
        ("A", 2, True, False, True, "a|b", "a", "b", None, 2),
        ("B", 1, False, False, False, "c", "c", None, 0, 1),
        # a row without values contains nothing: false, as Druid 33 answers (the differential corpus)
        ("C", None, False, False, False, None, None, None, None, None),
        ("D", 2, True, True, False, "a|c", "a", "c", 1, 2),
    ]
    got = rows(env, "SELECT ARRAY_TO_STRING(STRING_TO_ARRAY('x,y,z', ','), '-'), ARRAY_CONTAINS(ARRAY[1, 2], 2), "
                    "ARRAY_OFFSET(ARRAY['p', 'q'], 1), ARRAY_LENGTH(ARRAY_APPEND(ARRAY['p'], 'q')), "
                    "ARRAY_TO_STRING(ARRAY_SLICE(ARRAY['p', 'q', 'r'], 1, 3), ''), "
                    "MV_TO_STRING(MV_FILTER_NONE(STRING_TO_MV('a,b,c', ','), ARRAY['b']), ',')")
    assert got == [("x-y-z", True, "q", 2, "qr", "a,c")]
    got = rows(env, "SELECT ARRAY_LENGTH(ARRAY_AGG(page)), ARRAY_LENGTH(ARRAY_AGG(DISTINCT MV_TO_STRING(tags, ','))), "
                    "ARRAY_LENGTH(ARRAY_CONCAT_AGG(MV_TO_ARRAY(tags))) FROM pages")
    assert got == [(4, 4, 5)]  # DISTINCT counts the NULL of C too, as Druid's ARRAY_AGG keeps NULLs


def test_unnest(env: Any) -> None:
    # a row without values unnests to one NULL, as Druid reads it (Druid's QA suite, qaUnnest/mv)
    assert rows(env, "SELECT t.d, SUM(added) FROM pages CROSS JOIN UNNEST(MV_TO_ARRAY(tags)) AS t(d) "
                     "GROUP BY 1 ORDER BY 1") == [(None, 4), ("a", 9), ("b", 1), ("c", 10)]
    # a scan of an UNNEST orders by __time only, as Druid's: sorted here
    assert sorted(rows(env, "SELECT page, d FROM pages, UNNEST(MV_TO_ARRAY(tags)) AS u(d) WHERE d <> 'a'")) == [
        ("A", "b"), ("B", "c"), ("D", "c")]
    with pytest.raises(DruidError, match="ordering a table by non-time column"):
        rows(env, "SELECT page, d FROM pages, UNNEST(MV_TO_ARRAY(tags)) AS u(d) ORDER BY 1, 2")


def test_unknown_mv_function_is_unsupported(env: Any) -> None:
    # not a Druid function: Druid's 400 (the registry of Druid's functions decides, not a name prefix)
    with pytest.raises(DruidError) as e:
        rows(env, "SELECT MV_NOSUCH(tags) FROM pages")
    assert e.value.status == 400 and "No match found for function signature MV_NOSUCH" in e.value.message
    # a Druid function this broker refuses: 501 naming it
    with pytest.raises(DruidError) as e:
        rows(env, "SELECT TDIGEST_QUANTILE(MV_TO_ARRAY(tags), 0.5) FROM pages")
    assert e.value.status == 501 and "TDIGEST_QUANTILE" in e.value.message


# ---- native -------------------------------------------------------------------------------------


def native(env: Any, **q: Any) -> list[dict[str, Any]]:
    from serving.broker.native import run_native_query

    q.setdefault("dataSource", "pages")
    q.setdefault("intervals", ["2024-01-01/2024-01-02"])
    return run_native_query(env.service, q)


ADDED = {"type": "longSum", "name": "added", "fieldName": "added"}


def test_native_group_by_and_top_n_explode(env: Any) -> None:
    out = native(env, queryType="groupBy", granularity="all", dimensions=["tags"], aggregations=[ADDED])
    assert [(r["event"]["tags"], r["event"]["added"]) for r in out] == [(None, 4), ("a", 9), ("b", 1), ("c", 10)]
    out = native(env, queryType="groupBy", granularity="all", dimensions=["tags"], aggregations=[ADDED],
                 filter={"type": "selector", "dimension": "tags", "value": "a"})
    assert [(r["event"]["tags"], r["event"]["added"]) for r in out] == [("a", 9), ("b", 1), ("c", 8)]
    out = native(env, queryType="topN", granularity="all", dimension="tags", metric="added", threshold=2,
                 aggregations=[ADDED])
    assert out[0]["result"] == [{"tags": "c", "added": 10}, {"tags": "a", "added": 9}]


@pytest.mark.parametrize("flt,added", [
    ({"type": "selector", "dimension": "tags", "value": "c"}, 10),
    ({"type": "in", "dimension": "tags", "values": ["b", "zz"]}, 1),
    ({"type": "not", "field": {"type": "selector", "dimension": "tags", "value": "a"}}, 2),
    ({"type": "like", "dimension": "tags", "pattern": "%c"}, 10),
    ({"type": "bound", "dimension": "tags", "lower": "b", "ordering": "lexicographic"}, 11),
    ({"type": "and", "fields": [{"type": "selector", "dimension": "tags", "value": "a"},
                                {"type": "selector", "dimension": "tags", "value": "c"}]}, 8),
    ({"type": "null", "column": "tags"}, 4),
])
def test_native_filters_match_any_value(env: Any, flt: dict[str, Any], added: int) -> None:
    out = native(env, queryType="timeseries", granularity="all", aggregations=[ADDED], filter=flt)
    assert out[0]["result"]["added"] == added


def test_native_scan_returns_values(env: Any) -> None:
    out = native(env, queryType="scan", columns=["page", "tags"], order="ascending")
    events = [e for part in out for e in part["events"]]
    assert events == [{"page": "A", "tags": ["a", "b"]}, {"page": "B", "tags": "c"}, {"page": "C", "tags": None},
                      {"page": "D", "tags": ["a", "c"]}]


def test_segment_metadata_analyses_the_values(env: Any) -> None:
    from serving.broker.native import run_native_query

    out = run_native_query(env.service, {"queryType": "segmentMetadata", "dataSource": "pages",
                                         "intervals": ["2024-01-01/2024-01-02"], "analysisTypes":
                                         ["cardinality", "minmax", "size"]})
    tags, page = out[0]["columns"]["tags"], out[0]["columns"]["page"]
    assert (tags["type"], tags["hasMultipleValues"], tags["cardinality"], tags["minValue"], tags["maxValue"],
            tags["hasNulls"]) == ("STRING", True, 4, None, "c", True)  # NULL is a value, as in Druid
    assert tags["size"] == 5  # five one-byte values, each once per row holding it (Druid 33: no per-row bytes)
    assert page["hasMultipleValues"] is False


def test_a_subquery_or_cte_passes_the_column_on_as_multi_value(env: Any) -> None:
    # Druid keeps a multi-value column multi-value through subqueries: UNNEST reads its values, filters
    # match any value, GROUP BY explodes, and the answer renders it as a scan of the table would
    assert sorted(rows(env, "SELECT c FROM (SELECT tags AS t FROM pages) s, UNNEST(MV_TO_ARRAY(t)) AS u(c)"),
                  key=str) == [("a",), ("a",), ("b",), ("c",), ("c",), (None,)]
    assert rows(env, "SELECT SUM(added) FROM (SELECT * FROM pages) WHERE tags = 'a'") == [(9,)]
    assert rows(env, "WITH p AS (SELECT page, tags, added FROM pages) "
                     "SELECT tags, SUM(added) FROM p GROUP BY tags ORDER BY tags NULLS FIRST") == [
        (None, 4), ("a", 9), ("b", 1), ("c", 10)]
    assert sorted(rows(env, "SELECT page, tags FROM (SELECT page, tags FROM pages WHERE page IN ('A', 'B'))")) \
        == sorted(rows(env, "SELECT page, tags FROM pages WHERE page IN ('A', 'B')"))


def test_unnested_values_are_text_for_numeric_functions_and_casts(env: Any) -> None:
    # UNNEST(MV_TO_ARRAY(tags)) gives VARCHAR values (typed so): a numeric function or a CAST reads
    # them as numbers, NULL where they are not, as Druid does — not a conversion error for the query
    assert rows(env, "SELECT COUNT(*), COUNT(CAST(c AS INTEGER)), COUNT(ABS(c)) "
                     "FROM pages, UNNEST(MV_TO_ARRAY(tags)) AS u(c)") == [(6, 0, 0)]


def test_unnest_of_a_multi_value_column_needs_mv_to_array(env: Any) -> None:
    # Druid unnests arrays only ("Cannot apply 'UNNEST' to arguments of type 'UNNEST(<VARCHAR>)'")
    with pytest.raises(DruidError) as e:
        rows(env, "SELECT c FROM pages, UNNEST(tags) AS u(c)")
    assert e.value.status == 400 and "UNNEST(MV_TO_ARRAY(column))" in e.value.message


def test_grouping_by_array_to_mv_explodes_it(env: Any) -> None:
    """Druid 33 (the differential corpus): ``ARRAY_TO_MV(…)`` is a multi-value string, so grouping by it
    gives one row per element, as grouping by a multi-value column does."""
    assert sorted(rows(env, "SELECT ARRAY_TO_MV(ARRAY['x', 'y']) AS v, COUNT(*) FROM pages GROUP BY 1")) == [
        ("x", 4), ("y", 4)]
    assert sorted(rows(env, "SELECT ARRAY_TO_MV(MV_TO_ARRAY(page)) AS v, SUM(added) FROM pages GROUP BY 1")) == [
        ("A", 1), ("B", 2), ("C", 4), ("D", 8)]


def test_native_search_and_list_filtered_read_each_value(env: Any) -> None:
    """#48 (held-out kinds): a native ``search`` over a multi-value dimension matches value by value, and
    ``listFiltered`` (Druid's shape: a ``delegate`` spec) drops the other values before the row is
    exploded — a row left without values counts once, as NULL (checked against Druid 33)."""
    span = ["2024-01-01/2024-01-02"]
    found = run_native_query(env.service, {"queryType": "search", "dataSource": "pages", "intervals": span,
                                           "searchDimensions": ["tags"], "query": {"type": "contains", "value": "a"},
                                           "granularity": "all"})
    assert found[0]["result"] == [{"dimension": "tags", "value": "a", "count": 2}]
    grouped = run_native_query(env.service, {
        "queryType": "groupBy", "dataSource": "pages", "intervals": span, "granularity": "all",
        "dimensions": [{"type": "listFiltered", "delegate": {"type": "default", "dimension": "tags", "outputName": "t"},
                        "values": ["a"]}],
        "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]})
    # A [a,b] → a · B [c] → none: NULL · C no values: NULL · D [a,c] → a
    assert sorted((r["event"]["t"] or "", r["event"]["added"]) for r in grouped) == [("", 6), ("a", 9)]


def test_a_topn_over_a_filtered_dimension_spec_ranks_only_the_values_let_through(env: Any) -> None:
    """Druid 33's topN over an allow-list (or a regex, a prefix) has no NULL group, though the groupBy
    above has one: the rows left without values are not ranked (checked against a local Druid 33)."""
    span = ["2024-01-01/2024-01-02"]
    base = {"queryType": "topN", "dataSource": "pages", "intervals": span, "granularity": "all", "metric": "added",
            "threshold": 5, "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]}
    allowed = run_native_query(env.service, {**base, "dimension": {"type": "listFiltered", "delegate": "tags",
                                                                   "values": ["a"]}})
    assert allowed[0]["result"] == [{"tags": "a", "added": 9}]
    regex = run_native_query(env.service, {**base, "dimension": {"type": "regexFiltered", "delegate": "tags",
                                                                 "pattern": "^c$"}})
    assert [r["tags"] for r in regex[0]["result"]] == ["c"]


def vcol(expr: str, out_type: str | None = None) -> dict[str, Any]:
    return {"type": "expression", "name": "v0", "expression": expr, **({"outputType": out_type} if out_type else {})}


def test_native_expressions_are_applied_to_each_value(env: Any) -> None:
    """#48: a native expression reading a multi-value column as a scalar maps over its values (a row
    without values as one NULL); the answers are a local Druid 33's on these four rows."""
    def grouped(expr: str, out_type: str | None = None) -> list[tuple[Any, int]]:
        out = native(env, queryType="groupBy", granularity="all", virtualColumns=[vcol(expr, out_type)],
                     dimensions=[{"type": "default", "dimension": "v0", "outputName": "v0", "outputType": out_type or "STRING"}],
                     aggregations=[ADDED])
        return [(e["event"]["v0"], e["event"]["added"]) for e in out]

    assert grouped("concat(tags, '!')", "STRING") == [(None, 4), ("a!", 9), ("b!", 1), ("c!", 10)]
    assert grouped("upper(tags)") == [(None, 4), ("A", 9), ("B", 1), ("C", 10)]
    assert grouped("concat(page, tags)") == [(None, 4), ("Aa", 1), ("Ab", 1), ("Bc", 2), ("Da", 8), ("Dc", 8)]
    assert grouped("concat(tags, tags)") == [(None, 4), ("aa", 9), ("bb", 1), ("cc", 10)]  # one column, one value
    assert grouped("strlen(tags)", "LONG") == [(None, 13), (1, 2)]  # a number of several values is NULL
    assert grouped("isnull(tags)", "LONG") == [(0, 11), (1, 4)]  # a row test, not mapped

    scanned = native(env, queryType="scan", columns=["page", "v0"], virtualColumns=[vcol("nvl(tags, 'z')")],
                     resultFormat="list")
    assert [(e["page"], e["v0"]) for b in scanned for e in b["events"]] == [
        ("A", ["a", "b"]), ("B", "c"), ("C", "z"), ("D", ["a", "c"])]
    # a filter on the mapped column matches any value
    out = native(env, queryType="timeseries", granularity="all", aggregations=[ADDED],
                 virtualColumns=[vcol("concat(tags, '!')")], filter={"type": "selector", "dimension": "v0", "value": "a!"})
    assert out[0]["result"]["added"] == 9


@pytest.mark.parametrize(("expr", "added"), [
    ("concat(tags, '!') == 'a!'", 9), ("strlen(tags)", 11), ("tags == 'a'", 9), ("isnull(tags)", 4),
    ("notnull(tags)", 11), ("upper(tags) == 'B' || page == 'C'", 5), ("nvl(tags, 'z') == 'z'", 4)])
def test_native_expression_filter_matches_any_value(env: Any, expr: str, added: int) -> None:
    out = native(env, queryType="timeseries", granularity="all", aggregations=[ADDED],
                 filter={"type": "expression", "expression": expr})
    assert out[0]["result"]["added"] == added


def test_native_aggregator_expression_reads_one_value(env: Any) -> None:
    out = native(env, queryType="timeseries", granularity="all",
                 aggregations=[{"type": "longSum", "name": "s", "expression": "strlen(tags)"},
                               {"type": "longSum", "name": "n", "expression": "notnull(tags)"}])
    assert out[0]["result"] == {"s": 1, "n": 3}  # only B has one value; C has none
