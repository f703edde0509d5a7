"""The parsed archive: each record's top-level JSON members as typed columns beside its raw bytes.

One flush is parsed in bulk by DuckDB (two passes over the values: the members of each record, then
their values by path) and its values typed by Arrow's kernels from their JSON text, not field by field
in Python. A member's value goes to the column of its
kind — ``p:string:<name>``, ``p:long:<name>``, ``p:double:<name>``, ``p:bool:<name>``
(:func:`radstack.storage.raw_archive.parsed_column`) — so a member that changes type between records
loses nothing: each record's value stays in the column of its own kind.

The rebuild reads a parsed record from the columns instead of parsing its value, so a record is
``parsed`` only when the columns say exactly what the rebuild's JSON reader (Spark's, Jackson) would
read from its bytes: a JSON object (valid for DuckDB; invalid UTF-8 is no JSON), no member twice
(Jackson keeps the last, DuckDB the first), every member a string, a boolean, null, a number that is
an integer of 64 bits or a double (Spark writes a double as Java's ``Double.toString``, which its
cast from DOUBLE repeats), no member names equal but for case (Spark resolves column names without
case), and at most :data:`MAX_MEMBERS` distinct members per flush. Any other record keeps its bytes and
is not parsed (the rebuild parses its value, as before), and :attr:`ParsedFields.unparsed` counts it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from radstack.storage.raw_archive import PARSED_COLUMN, parsed_column
from radstack.time.timestamps import query_arrow, utc_connection

MAX_MEMBERS = 256
"""Distinct top-level members given columns per flush (the most frequent); a record with another is
not parsed."""

_WORD = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class ParsedFields:
    """What one flush's parse gives the archive table."""

    valid_json: pa.Array  # bool: the value is valid JSON (DuckDB's json_valid)
    member_text: pa.Array  # string: the timestamp member as json_extract_string reads it (trimmed)
    parsed: pa.Array  # bool: the record is read from the columns (module docstring)
    columns: dict[str, pa.Array]  # archive column → typed values, only the kinds that occur
    unparsed: int  # records that are valid JSON objects but not parsed (their values are read raw)


def parse_fields(values: pa.Array | pa.ChunkedArray, timestamp_field: str) -> ParsedFields:
    """Parse one flush's values (UTF-8 strings, null where not UTF-8)."""
    con = utc_connection()
    try:
        con.register("raw", pa.table({"s": values}))
        # pass 1: the members of each object (NULL for anything else)
        keys = _one(query_arrow(con, "SELECT CASE WHEN regexp_matches(s, '^[ \\t\\n\\r]*\\{') "
                                     "THEN try(json_keys(s)) END AS k FROM raw").column("k"))
        members = _members(keys, timestamp_field)
        con.register("raw", pa.table({"s": values, "k": keys}))
        # pass 2: every member's value as JSON text, by path (one parse per record)
        paths = ", ".join(sql_string("$." + json_path_part(m)) for m in members)
        ts_path = sql_string("$." + json_path_part(timestamp_field))
        listed = (f"CAST(CASE WHEN k IS NOT NULL THEN json_extract(s, [{paths}]) END AS VARCHAR[])" if members
                  else "CAST(NULL AS VARCHAR[])")
        ts = "NULL" if timestamp_field in members else f"trim(CASE WHEN k IS NOT NULL THEN json_extract_string(s, {ts_path}) END)"
        extracted = query_arrow(con, "SELECT CASE WHEN k IS NOT NULL THEN true ELSE coalesce(json_valid(s), false) END "
                                     f"AS ok, len(k) AS nk, {listed} AS v, CAST({ts} AS VARCHAR) AS ts FROM raw")
    finally:
        con.close()
    v = _one(extracted.column("v"))
    columns: dict[str, pa.Array] = {}
    exact = pc.is_valid(keys)
    found = pa.array(np.zeros(len(keys), np.int32))
    member_text = _one(extracted.column("ts"))
    for i, m in enumerate(members):
        x = pc.list_element(v, i)
        typed, fits = _typed(x)
        exact = pc.and_(exact, fits)
        found = pc.add(found, pc.is_valid(x).cast(pa.int32()))
        for kind, col in typed.items():
            if col.null_count < len(col):
                columns[parsed_column(kind, m)] = col
        if m == timestamp_field:  # the member's text as json_extract_string gives it (NULL for JSON null)
            string = typed.get("string")
            text = x if string is None else pc.if_else(pc.is_valid(string), string, x)
            member_text = pc.utf8_trim_whitespace(pc.if_else(pc.equal(x, "null"), pa.scalar(None, pa.string()), text))
    # every member of the record has a column and none is there twice: as many values found as names
    exact = pc.and_(exact, pc.equal(_one(extracted.column("nk")).cast(pa.int32()), found))
    parsed = pc.fill_null(exact, False)
    objects = pc.sum(pc.is_valid(keys).cast(pa.int64())).as_py() or 0
    unparsed = objects - (pc.sum(parsed.cast(pa.int64())).as_py() or 0)
    return ParsedFields(_one(extracted.column("ok")), member_text, parsed, columns, unparsed)


_NUMBER_START = frozenset("-0123456789")
_SCALAR_START = frozenset('ntf"')
_LONG_DIGITS = 18  # an integer of at most 18 digits always fits 64 bits
_NULL_STRING = pa.scalar(None, pa.string())


def _typed(x: pa.Array) -> tuple[dict[str, pa.Array], pa.Array]:
    """One member's JSON texts (as DuckDB writes them: a string in quotes, escaping only what JSON must;
    a number without ``.``/``e`` only when it is an integer) split by kind, without parsing them again
    (Arrow's kernels), and where each fitted a kind (missing or null fits). Only the kinds whose first
    character occurs are computed: a member is mostly of one kind, and the kernels of the others were
    most of a flush's parse (docs/benchmarks.md, "Archiver")."""
    first = pc.utf8_slice_codeunits(x, 0, 1)
    present = {c for c in pc.unique(first).to_pylist() if c is not None}
    out: dict[str, pa.Array] = {}
    fits = pc.is_null(x)
    bad_escape = None
    if '"' in present:
        out["string"], bad_escape = _strings(x, first)
    if present & _SCALAR_START:
        fits = pc.or_(fits, pc.is_in(first, value_set=pa.array(sorted(present & _SCALAR_START))))
    if present & {"t", "f"}:
        out["bool"] = pc.if_else(pc.is_in(first, value_set=pa.array(["t", "f"])), pc.equal(first, "t"),
                                 pa.scalar(None, pa.bool_()))  # fmt: skip
    if present & _NUMBER_START:
        numbers = _numbers(x, pc.is_in(first, value_set=pa.array(sorted(present & _NUMBER_START))))
        out.update({k: v for k, v in numbers.items() if not k.endswith("_ok")})
        fits = pc.or_(fits, pc.or_(numbers["long_ok"], numbers["double_ok"]))
    fits = pc.fill_null(fits, False)
    if bad_escape is not None:
        fits = pc.and_(fits, pc.invert(pc.fill_null(bad_escape, False)))
    return out, fits


def _strings(x: pa.Array, first: pa.Array) -> tuple[pa.Array, pa.Array | None]:
    """The string members' values (unquoted, unescaped) and where an escape gave no UTF-8 text."""
    is_string = pc.equal(first, '"')
    string = pc.if_else(is_string, pc.utf8_slice_codeunits(x, 1, -1), _NULL_STRING)
    escaped = pc.and_(is_string, pc.match_substring(x, "\\"))
    if not pc.any(escaped).as_py():
        return string, None
    # few values: those unescaped one by one (JSON's own rules)
    fixed = [_unescaped(t) if e else v for t, v, e in zip(x.to_pylist(), string.to_pylist(), escaped.to_pylist(),
                                                         strict=True)]  # fmt: skip
    string = pa.array(fixed, pa.string())
    return string, pc.and_(escaped, pc.is_null(string))  # a lone surrogate: no UTF-8 text, read raw


def _numbers(x: pa.Array, number: pa.Array) -> dict[str, pa.Array]:
    """The number members' values: ``long`` (an integer of 64 bits) and ``double`` (finite), each with
    where it fitted (``long_ok``, ``double_ok``, False elsewhere)."""
    fractional = pc.or_(pc.match_substring(x, "."), pc.or_(pc.match_substring(x, "e"), pc.match_substring(x, "E")))
    integer = pc.and_(number, pc.invert(fractional))
    short = pc.and_(integer, pc.less_equal(pc.utf8_length(x), _LONG_DIGITS))
    long = pc.cast(pc.if_else(short, x, _NULL_STRING), pa.int64())
    long_ok = short
    wide = pc.and_(integer, pc.invert(short))
    if pc.any(wide).as_py():  # 19 digits or more: in 64 bits or not (then Jackson keeps the digits)
        wide_values = pa.array([_int64(t) if w else None for t, w in zip(x.to_pylist(), wide.to_pylist(), strict=True)],
                               pa.int64())
        long = pc.coalesce(long, wide_values)
        long_ok = pc.or_(short, pc.is_valid(wide_values))
    is_double = pc.and_(number, fractional)
    double = pc.cast(pc.if_else(is_double, x, _NULL_STRING), pa.float64())
    double_ok = pc.fill_null(pc.and_(is_double, pc.is_finite(double)), False)
    return {"long": long, "long_ok": pc.fill_null(long_ok, False),
            "double": pc.if_else(double_ok, double, pa.scalar(None, pa.float64())), "double_ok": double_ok}


def _unescaped(text: str) -> str | None:
    """A JSON string literal's value; None when it is not UTF-8 text (a lone surrogate escape)."""
    value = json.loads(text)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return str(value)


def _int64(text: str) -> int | None:
    n = int(text)
    return n if -(2**63) <= n < 2**63 else None


def archive_columns(p: ParsedFields) -> list[tuple[str, pa.Array]]:
    """The parsed archive's columns for the archive table: ``parsed``, then each typed column."""
    return [(PARSED_COLUMN, p.parsed), *sorted(p.columns.items())]


def _members(keys: pa.Array, timestamp_field: str) -> list[str]:
    """The flush's members given columns: the most frequent, at most MAX_MEMBERS, none of two whose
    names are equal but for case (the timestamp's member first)."""
    flat = pc.list_flatten(keys)
    if len(flat) == 0:
        return []
    counts = pc.value_counts(flat)
    ranked = sorted(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True),
                    key=lambda vc: (-vc[1], vc[0]))
    folded: dict[str, int] = {}
    for name, _ in ranked:
        folded[name.casefold()] = folded.get(name.casefold(), 0) + 1
    out = [name for name, _ in ranked if folded[name.casefold()] == 1][:MAX_MEMBERS]
    if timestamp_field in out:
        out.remove(timestamp_field)
        out.insert(0, timestamp_field)
    return out


def _one(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def sql_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def json_path_part(name: str) -> str:
    """A member name as one JSONPath step of DuckDB (quoted unless it is a plain ASCII word)."""
    if _WORD.fullmatch(name):
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
