"""What every filter is compiled from: column references with their Druid types, values and the
compiler's dialect (:class:`ColumnCompiler`), and the one error a filter raises."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from radstack.expressions import (
    json_scalar_text,
    normalize_type,
)
from radstack.sql_text import ExpressionError, check_dialect, quote_identifier, string_literal

NUMERIC_TYPES = ("LONG", "DOUBLE")


class FilterError(ValueError):
    """A filter that cannot be compiled; ``field`` names the offending JSON field."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(f"{message} (field: {field})" if field else message)
        self.field = field


class Col:
    """A compiled column reference: SQL plus Druid type (``LONG``/``DOUBLE``/``STRING``/None), and the
    column it reads when it reads one directly."""

    __slots__ = ("name", "sql", "type")

    def __init__(self, sql: str, type_: str | None, name: str | None = None) -> None:
        self.sql = sql
        self.type = type_
        self.name = name


def parse_number(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value if not (isinstance(value, float) and math.isnan(value)) else None
    try:
        return int(str(value).strip())
    except ValueError:
        pass
    try:
        f = float(str(value).strip())
    except ValueError:
        return None
    return None if math.isnan(f) else f


def num_literal(v: int | float) -> str:
    if isinstance(v, int):
        return str(v)
    if math.isinf(v):
        return "CAST('Infinity' AS DOUBLE)" if v > 0 else "CAST('-Infinity' AS DOUBLE)"
    return f"CAST({v!r} AS DOUBLE)"


#: Filters on one column that match a multi-value row when one of its values matches.
def stringify(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)



class ColumnCompiler:
    """The dialect, the column types and the multi-value columns a filter is compiled against."""

    def __init__(self, dialect: str, column_types: Mapping[str, str] | None,
                 multi_value_columns: frozenset[str] = frozenset()) -> None:
        try:
            self.d = check_dialect(dialect)
        except ExpressionError as e:
            raise FilterError(str(e), "dialect") from e
        self.column_types = dict(column_types or {})
        self.types = {k: normalize_type(v) for k, v in self.column_types.items()}
        self.multi = multi_value_columns
        self.value_of: dict[str, str] = {}  # a multi-value column → the lambda variable standing for one value

    # ---- helpers --------------------------------------------------------------------------
    def lit(self, s: Any) -> str:
        return string_literal(str(s), self.d)

    def str_type(self) -> str:
        return "STRING" if self.d == "spark" else "VARCHAR"

    def column(self, name: Any, field: str) -> Col:
        if not isinstance(name, str) or not name:
            raise FilterError("a column name is required", field)
        t = self.types.get(name)
        if name == "__time" and t is None:
            t = "TIMESTAMP"
        if name in self.value_of:
            return Col(self.value_of[name], "STRING")
        q = quote_identifier(name, self.d)
        if t == "TIMESTAMP":
            return Col(f"unix_millis({q})" if self.d == "spark" else f"epoch_ms({q})", "LONG")
        return Col(q, t, name)

    def as_string(self, c: Col) -> str:
        if c.type == "STRING":
            return c.sql
        if c.type is None and self.d == "duckdb" and c.name is not None \
                and str(self.column_types.get(c.name, "")).upper() in ("COMPLEX<JSON>", "JSON"):
            # a JSON column compared as text: its scalar's value (an object or array is none), as Druid
            sql = f"(CASE WHEN json_type({c.sql}) IN ('OBJECT', 'ARRAY') THEN NULL ELSE {c.sql} END)"
            return json_scalar_text(sql)
        if c.type is None:
            return c.sql
        return f"CAST({c.sql} AS {self.str_type()})"

    def as_double(self, c: Col) -> str:
        if c.type in NUMERIC_TYPES:
            return c.sql
        return f"TRY_CAST({c.sql} AS DOUBLE)"

    def regex_match(self, value: str, pattern: str) -> str:
        p = self.lit(pattern)
        return f"({value} RLIKE {p})" if self.d == "spark" else f"regexp_matches({value}, {p})"
