"""Druid's extraction functions (``extractionFn`` of a filter or a dimension spec) as SQL string
expressions: substring, strlen, upper, lower, identity, regex, partial, cascade, timeFormat."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from radstack.filters.columns import NUMERIC_TYPES, Col, ColumnCompiler, FilterError
from radstack.sql_text import ExpressionError
from radstack.time.floor import granularity_floor_sql
from radstack.time.granularity import Granularity, GranularityError
from radstack.time.sql import time_format_sql


class ExtractionCompiler(ColumnCompiler):
    def dimension(self, f: Mapping[str, Any], key: str = "dimension") -> Col:
        col = self.column(f.get(key), key)
        fn = f.get("extractionFn")
        if fn is not None:
            return Col(self.extraction(fn, col, "extractionFn"), "STRING")
        return col

    def dimension_spec(self, spec: Any, field: str) -> Col:
        if isinstance(spec, str):
            return self.column(spec, field)
        if not isinstance(spec, Mapping):
            raise FilterError("expected a column name or a dimension spec", field)
        col = self.column(spec.get("dimension"), f"{field}.dimension")
        fn = spec.get("extractionFn")
        if fn is not None:
            return Col(self.extraction(fn, col, f"{field}.extractionFn"), "STRING")
        return col

    def extraction(self, fn: Any, col: Col, field: str) -> str:
        if not isinstance(fn, Mapping):
            raise FilterError("extractionFn must be an object", field)
        typ = fn.get("type")
        v = self.as_string(col)
        if typ == "substring":
            idx = fn.get("index", 0)
            length = fn.get("length")
            if not isinstance(idx, int) or idx < 0:
                raise FilterError("substring index must be a non-negative integer", f"{field}.index")
            if length is not None and (not isinstance(length, int) or length < 0):
                raise FilterError("substring length must be a non-negative integer", f"{field}.length")
            body = f"substr({v}, {idx + 1}, {length})" if length is not None else f"substr({v}, {idx + 1})"
            return f"(CASE WHEN {idx} < length({v}) THEN {body} END)"
        if typ == "strlen":
            return f"CAST(length({v}) AS {self.str_type()})"
        if typ in ("upper", "lower"):
            return f"{typ}({v})"
        if typ == "identity":
            return v
        if typ == "regex":
            pattern = fn.get("expr")
            if not isinstance(pattern, str):
                raise FilterError("regex extractionFn needs 'expr'", f"{field}.expr")
            idx = fn.get("index", 1)
            if not isinstance(idx, int) or idx < 0:
                raise FilterError("regex index must be a non-negative integer", f"{field}.index")
            if fn.get("replaceMissingValue"):
                repl = fn.get("replaceMissingValueWith")
                missing = "NULL" if repl is None else self.lit(repl)
            else:
                missing = v
            return (
                f"(CASE WHEN {self.regex_match(v, pattern)} THEN regexp_extract({v}, {self.lit(pattern)}, {idx}) "
                f"ELSE {missing} END)"
            )
        if typ == "partial":
            pattern = fn.get("expr")
            if not isinstance(pattern, str):
                raise FilterError("partial extractionFn needs 'expr'", f"{field}.expr")
            return f"(CASE WHEN {self.regex_match(v, pattern)} THEN {v} END)"
        if typ == "cascade":
            fns = fn.get("extractionFns")
            if not isinstance(fns, list) or not fns:
                raise FilterError("cascade needs a list of extractionFns", f"{field}.extractionFns")
            cur = col
            for i, sub in enumerate(fns):
                cur = Col(self.extraction(sub, cur, f"{field}.extractionFns[{i}]"), "STRING")
            return cur.sql
        if typ == "timeFormat":
            return self.time_format(fn, col, field)
        raise FilterError(f"unsupported extractionFn type {typ!r}", f"{field}.type")

    def time_format(self, fn: Mapping[str, Any], col: Col, field: str) -> str:
        if col.type in NUMERIC_TYPES:
            ms = col.sql if col.type == "LONG" else f"CAST({col.sql} AS BIGINT)"
        else:
            ms = f"TRY_CAST({col.sql} AS BIGINT)"
        tz = fn.get("timeZone") or "UTC"
        gran = fn.get("granularity")
        try:
            if gran is not None:
                ms = granularity_floor_sql(Granularity.parse(gran), ms, self.d)
            return time_format_sql(ms, fn.get("format"), tz, self.d)
        except GranularityError as e:
            raise FilterError(str(e), f"{field}.granularity") from e
        except ExpressionError as e:
            raise FilterError(str(e), f"{field}.format") from e
