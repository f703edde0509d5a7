"""A Druid value in its stored form, as SQL for both dialects: numbers converted as Druid converts them,
multi-value strings, ARRAY columns and JSON text. One function per conversion, a branch per dialect, so
the indexer (DuckDB: the stream, native tasks, compaction) and the Spark jobs store the same values
(``tests/integration/test_json_pipeline.py``, ``test_array_pipeline.py`` and ``test_multi_value_pipeline.py``
compare the two paths row by row).

``src`` is the input column's type: a Druid type (``long``, ``double``, ``string``, ``array``, ``multi``
…) or a Spark/Druid upper-case name (``LONG``, ``DOUBLE``, ``STRING``, ``ARRAY<…>``); only its kind
matters here.
"""

from __future__ import annotations

from radstack.sql_text import check_dialect

_SQL_TYPES = {
    "duckdb": {"long": "BIGINT", "float": "FLOAT", "double": "DOUBLE", "string": "VARCHAR", "json": "VARCHAR",
               "multi": "VARCHAR[]", "sketch": "BLOB", "array<string>": "VARCHAR[]", "array<long>": "BIGINT[]",
               "array<double>": "DOUBLE[]"},
    "spark": {"long": "BIGINT", "float": "FLOAT", "double": "DOUBLE", "string": "STRING", "json": "STRING",
              "multi": "ARRAY<STRING>", "sketch": "BINARY", "array<string>": "ARRAY<STRING>",
              "array<long>": "ARRAY<BIGINT>", "array<double>": "ARRAY<DOUBLE>"},
}  # fmt: skip


def sql_type(value_type: str, dialect: str = "duckdb") -> str:
    """The SQL type a column of Druid value type ``value_type`` is stored as."""
    return _SQL_TYPES[check_dialect(dialect)][value_type.lower()]


def _kind(src: str) -> str:
    s = src.lower()
    return "array" if s.startswith("array") or s == "multi" else s


def numeric_cast_sql(expr: str, src: str, target: str, dialect: str = "duckdb") -> str:
    """``expr`` (of type ``src``) as ``long``/``float``/``double``, converted as Druid does: strings are
    trimmed, integers exact, decimals truncated toward zero for longs; NULL when it does not convert.
    A ``string``/``json`` target is ``expr`` itself."""
    kind, target = _kind(src), target.lower()
    if target in ("string", "json"):
        return expr
    if check_dialect(dialect) == "spark":
        if kind == "string":
            if target == "long":
                return (f"(CASE WHEN trim({expr}) RLIKE '^[+-]?[0-9]+$' THEN try_cast(trim({expr}) AS BIGINT) "
                        f"ELSE try_cast(try_cast(trim({expr}) AS DOUBLE) AS BIGINT) END)")
            return f"try_cast(trim({expr}) AS {sql_type(target, 'spark')})"
        return f"try_cast({expr} AS {sql_type(target, 'spark')})"  # Spark truncates doubles to longs
    if target == "long":
        if kind == "long":
            return f"TRY_CAST({expr} AS BIGINT)"
        if kind in ("double", "float"):
            return f"TRY_CAST(trunc({expr}) AS BIGINT)"
        s = f"trim(CAST({expr} AS VARCHAR))"
        return (f"(CASE WHEN regexp_full_match({s}, '[+-]?\\d+') THEN TRY_CAST({s} AS BIGINT) "
                f"ELSE TRY_CAST(trunc(TRY_CAST({s} AS DOUBLE)) AS BIGINT) END)")
    if kind in ("long", "double", "float"):
        return f"TRY_CAST({expr} AS {sql_type(target)})"
    return f"TRY_CAST(trim(CAST({expr} AS VARCHAR)) AS {sql_type(target)})"


def values_or_null_sql(values: str) -> str:
    """A multi-value row's values as Druid reads them: its list, or one NULL value when it has none
    (filters, grouping and ``UNNEST`` see a row without values as ``[NULL]``; DuckDB)."""
    return f"(CASE WHEN len({values}) > 0 THEN {values} ELSE CAST([NULL] AS VARCHAR[]) END)"


def multi_value_sql(expr: str, src: str, handling: str, dialect: str = "duckdb") -> str:
    """The stored values of a multi-value dimension, as Druid stores them: a list input's values as
    strings, a JSON array's (the text Spark's parse stage gives for one), any other value as one value;
    NULL elements kept; a nested array element as Java prints a list (``["3", ["4", "5"]]`` →
    ``[3, [4, 5]]``); sorted, NULLs first (``SORTED_ARRAY``), sorted without repeats (``SORTED_SET``) or
    as they came (``ARRAY``); no values → NULL."""
    kind = _kind(src)
    spark = check_dialect(dialect) == "spark"
    if kind == "array":
        values = (f"transform({expr}, __v -> CAST(__v AS STRING))" if spark
                  else f"list_transform({expr}, lambda __v: CAST(__v AS VARCHAR))")
    elif spark:
        text = expr if kind == "string" else f"CAST({expr} AS STRING)"
        values = (f"CASE WHEN {text} IS NULL THEN NULL WHEN {text} RLIKE '^\\\\s*\\\\[' "
                  f"AND from_json({text}, 'array<string>') IS NOT NULL THEN from_json({text}, 'array<string>') "
                  f"ELSE array({text}) END")
    else:
        text = expr if kind == "string" else f"CAST({expr} AS VARCHAR)"
        values = (f"CASE WHEN {text} IS NULL THEN NULL WHEN json_valid({text}) AND json_type({text}) = 'ARRAY' "
                  f"THEN from_json({text}, '[\"VARCHAR\"]') ELSE [{text}] END")
    # a nested array arrives as its compact JSON text; Druid keeps Java's List.toString of it
    java_list = "CASE WHEN __v LIKE '[%' THEN replace(replace(__v, '\"', ''), ',', ', ') ELSE __v END"
    values = (f"transform({values}, __v -> {java_list})" if spark
              else f"list_transform({values}, lambda __v: {java_list})")
    sort, length = ("sort_array({}, true)", "size") if spark else ("list_sort({}, 'ASC', 'NULLS FIRST')", "len")
    if handling == "SORTED_SET":
        # list_distinct drops NULL; Druid's sorted set keeps one
        keep_null = (f"CASE WHEN array_contains(transform({values}, __v -> __v IS NULL), true) "
                     f"THEN concat(array(CAST(NULL AS STRING)), array_distinct(filter({values}, __v -> __v IS NOT NULL))) "
                     f"ELSE array_distinct({values}) END") if spark else (
                     f"CASE WHEN list_contains(list_transform({values}, lambda __v: __v IS NULL), true) "
                     f"THEN list_concat([NULL::VARCHAR], list_distinct({values})) ELSE list_distinct({values}) END")
        values = sort.format(keep_null)
    elif handling == "SORTED_ARRAY":
        values = sort.format(values)
    return f"CASE WHEN {length}({values}) <= 0 THEN NULL ELSE {values} END"


def array_sql(expr: str, src: str, value_type: str, dialect: str = "duckdb") -> str:
    """The stored value of an ARRAY column (``array<string|long|double>``): a list input or a JSON array
    (the text Spark's parse stage gives for one) element by element, any other value as a one-element
    array; elements that do not convert become NULL and stay, order and repeats are kept, ``[]`` stays
    an empty array, NULL stays NULL — Druid's ``auto`` column cast to an ARRAY type."""
    element = value_type[len("array<"):-1]
    kind = _kind(src)
    if check_dialect(dialect) == "spark":

        def convert(v: str) -> str:
            if element == "string":
                return f"CAST({v} AS STRING)"
            # JSON booleans are 1/0 in numeric arrays, as Druid stores them
            text = f"CASE CAST({v} AS STRING) WHEN 'true' THEN '1' WHEN 'false' THEN '0' ELSE CAST({v} AS STRING) END"
            return numeric_cast_sql(f"({text})", "string", element, "spark")

        if kind == "array":
            return f"transform({expr}, __v -> {convert('__v')})"
        text = expr if kind == "string" else f"CAST({expr} AS STRING)"
        # from_json with array<string> keeps a string element's text and renders others as their JSON
        items = f"from_json({text}, 'array<string>')"
        return (f"CASE WHEN {text} IS NULL THEN NULL WHEN {text} RLIKE '^\\\\s*\\\\[' AND {items} IS NOT NULL "
                f"THEN transform({items}, __v -> {convert('__v')}) ELSE array({convert(text)}) END")

    def to_element(v: str, v_src: str) -> str:
        return f"CAST({v} AS VARCHAR)" if element == "string" else numeric_cast_sql(v, v_src, element)

    if kind == "array":
        return f"list_transform({expr}, lambda __v: {to_element('__v', 'string')})"
    if kind != "string":
        return f"CASE WHEN {expr} IS NULL THEN NULL ELSE [{to_element(expr, kind)}] END"
    items = f"from_json({expr}, '[\"JSON\"]')"
    # a JSON string element is unquoted; numbers and nested values keep their JSON text
    element_text = "CASE WHEN json_type(__v) = 'VARCHAR' THEN json_extract_string(__v, '$') ELSE CAST(__v AS VARCHAR) END"
    if element != "string":  # JSON booleans are 1/0 in numeric arrays, as Druid stores them
        element_text = ("CASE WHEN json_type(__v) = 'BOOLEAN' THEN CASE WHEN CAST(__v AS VARCHAR) = 'true' "
                        f"THEN '1' ELSE '0' END ELSE {element_text} END")
    as_list = f"list_transform({items}, lambda __v: {to_element(element_text, 'string')})"
    return (f"CASE WHEN {expr} IS NULL THEN NULL WHEN json_valid({expr}) AND json_type({expr}) = 'ARRAY' "
            f"THEN CAST({as_list} AS {sql_type(element)}[]) ELSE [{to_element(expr, 'string')}] END")


def json_text_sql(expr: str, src: str, dialect: str = "duckdb") -> str:
    """The stored text of a ``json`` dimension: input that is JSON text is kept (an object or array
    arrives from Spark's parse stage as its compact rendering; DuckDB minifies it); any other string
    becomes a JSON string; objects, lists and numbers their JSON."""
    kind = _kind(src)
    if check_dialect(dialect) == "spark":
        if kind != "string":
            return f"to_json({expr})"
        quoted = f"to_json(array({expr}))"
        return (f"CASE WHEN {expr} IS NULL THEN NULL WHEN get_json_object({expr}, '$') IS NOT NULL THEN {expr} "
                f"ELSE substring({quoted}, 2, length({quoted}) - 2) END")
    if kind == "string":
        return f"CASE WHEN json_valid({expr}) THEN CAST(json({expr}) AS VARCHAR) ELSE CAST(to_json({expr}) AS VARCHAR) END"
    return f"CAST(to_json({expr}) AS VARCHAR)"
