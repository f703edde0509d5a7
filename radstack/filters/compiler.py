"""The filter types (``f_<type>``, found by name), compiled to SQL predicates with Druid's semantics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from radstack.expressions import expression_to_predicate_sql, normalize_type
from radstack.filters.columns import NUMERIC_TYPES, Col, FilterError, num_literal, parse_number, stringify
from radstack.filters.extraction import ExtractionCompiler
from radstack.sql_text import ExpressionError, quote_identifier
from radstack.time.intervals import Interval, TimeParseError
from radstack.value_sql import values_or_null_sql

#: Filters on one column that match a multi-value row when one of its values matches.
_VALUE_FILTERS = frozenset({"selector", "equals", "in", "bound", "range", "regex", "like", "search", "null"})
_VALUE = "__filter_value"


class FilterCompiler(ExtractionCompiler):
    """A filter compiled by its type's method; a filter on a multi-value column matches any value."""

    def compile(self, f: Any, field: str = "filter") -> str:
        if not isinstance(f, Mapping):
            raise FilterError("a filter must be a JSON object", field)
        typ = f.get("type")
        method = getattr(self, "f_" + str(typ).replace("-", "_"), None) if isinstance(typ, str) else None
        if method is None:
            raise FilterError(f"unknown filter type {typ!r}", f"{field}.type")
        name = f.get("dimension", f.get("column"))
        if typ in _VALUE_FILTERS and name in self.multi and name not in self.value_of:
            var = f"{_VALUE}{len(self.value_of)}"
            self.value_of[name] = var
            try:
                body = method(f, field)
            finally:
                del self.value_of[name]
            # SQL's three values over the values, a row without values read as one NULL value (Druid)
            col = quote_identifier(name, self.d)
            values = values_or_null_sql(col)
            return (f"(CASE WHEN len(list_filter({values}, lambda {var}: {body})) > 0 THEN TRUE "
                    f"WHEN len(list_filter({values}, lambda {var}: ({body}) IS NULL)) > 0 THEN NULL ELSE FALSE END)")
        return method(f, field)

    def never(self, c: Col) -> str:
        """Matches no row, yet stays unknown on null rows (so that ``not`` does not match them)."""
        return f"(CASE WHEN {c.sql} IS NOT NULL THEN FALSE END)"

    def eq_value(self, c: Col, value: Any) -> str:
        """``c = value`` with Druid's typing (numeric columns compare numerically)."""
        if value is None:
            return f"({c.sql} IS NULL)"
        if c.type in NUMERIC_TYPES:
            n = parse_number(value)
            if n is None:
                return self.never(c)
            return f"({c.sql} = {num_literal(n)})"
        return f"({self.as_string(c)} = {self.lit(stringify(value))})"

    def f_selector(self, f: Mapping[str, Any], field: str) -> str:
        return self.eq_value(self.dimension(f), f.get("value"))

    def array_element(self, value: Any, element_type: str, field: str) -> str:
        """A literal of an ARRAY element type (``STRING``/``LONG``/``DOUBLE``); NULL stays NULL."""
        if value is None:
            return "NULL"
        if element_type in NUMERIC_TYPES:
            n = parse_number(value)
            if n is None:
                raise FilterError(f"{value!r} is not a {element_type}", field)
            return num_literal(n)
        return self.lit(stringify(value))

    def whole_array(self, name: Any, field: str) -> str:
        """An ARRAY (or multi-value) column as one list, never one of its values."""
        if not isinstance(name, str) or not name:
            raise FilterError("a column name is required", field)
        return quote_identifier(name, self.d)

    def f_arrayContainsElement(self, f: Mapping[str, Any], field: str) -> str:  # noqa: N802
        """Druid's ``arrayContainsElement``: the row's array holds ``elementMatchValue``."""
        col = self.whole_array(f.get("column"), f"{field}.column")
        etype = normalize_type(f.get("elementMatchValueType") or "STRING")
        if etype not in ("STRING", "LONG", "DOUBLE"):
            raise FilterError("unsupported elementMatchValueType", f"{field}.elementMatchValueType")
        if f.get("elementMatchValue") is None:
            raise FilterError("arrayContainsElement needs a non-null elementMatchValue", f"{field}.elementMatchValue")
        v = self.array_element(f["elementMatchValue"], etype, f"{field}.elementMatchValue")
        # a NULL array is unknown (neither it nor its ``not`` matches)
        return f"array_contains({col}, {v})" if self.d == "spark" else f"list_contains({col}, {v})"

    def array_equals(self, f: Mapping[str, Any], mtype: str, field: str) -> str:
        """``equals`` with an ARRAY ``matchValueType``: the row's whole array equals ``matchValue``."""
        col = self.whole_array(f.get("column"), f"{field}.column")
        value = f["matchValue"]
        if not isinstance(value, list):
            value = [value]
        etype = normalize_type(mtype[len("ARRAY<"):-1])
        if etype not in ("STRING", "LONG", "DOUBLE"):
            raise FilterError("unsupported matchValueType", f"{field}.matchValueType")
        items = ", ".join(self.array_element(v, etype, f"{field}.matchValue") for v in value)
        literal = f"array({items})" if self.d == "spark" else f"[{items}]"
        return f"({col} = {literal})"  # NULL elements equal each other, as in Druid's array comparison

    def f_equals(self, f: Mapping[str, Any], field: str) -> str:
        if "matchValue" not in f or f.get("matchValue") is None:
            raise FilterError("equals filter needs a non-null matchValue (use a null filter)", f"{field}.matchValue")
        raw_type = str(f.get("matchValueType") or "STRING").replace(" ", "").upper()
        if raw_type.startswith("ARRAY<") and raw_type.endswith(">"):
            return self.array_equals(f, raw_type, field)
        c = self.column(f.get("column"), f"{field}.column")
        mtype = normalize_type(f.get("matchValueType") or "STRING")
        if mtype is None:
            raise FilterError("unsupported matchValueType", f"{field}.matchValueType")
        value = f["matchValue"]
        if mtype in NUMERIC_TYPES or c.type in NUMERIC_TYPES:
            n = parse_number(value)
            if n is None:
                return self.never(c)
            return f"({self.as_double(c) if c.type not in NUMERIC_TYPES else c.sql} = {num_literal(n)})"
        return f"({self.as_string(c)} = {self.lit(stringify(value))})"

    def f_in(self, f: Mapping[str, Any], field: str) -> str:
        values = f.get("values")
        if not isinstance(values, Sequence) or isinstance(values, str):
            raise FilterError("in filter needs a list of values", f"{field}.values")
        c = self.dimension(f)
        has_null = any(v is None for v in values)
        parts: list[str] = []
        if c.type in NUMERIC_TYPES:
            nums = {n for v in values if v is not None and (n := parse_number(v)) is not None}
            lits = [num_literal(n) for n in sorted(nums, key=float)]
            col = c.sql
        else:
            lits = [self.lit(s) for s in sorted({stringify(v) for v in values if v is not None})]
            col = self.as_string(c)
        if lits:
            parts.append(f"({col} IN ({', '.join(lits)}))")
        if has_null:
            parts.append(f"({c.sql} IS NULL)")
        if not parts:
            return self.never(c)
        return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"

    def cmp(self, c: Col, op: str, value: Any, ordering: str, field: str) -> str:
        if ordering == "numeric":
            n = parse_number(value)
            if n is None:
                raise FilterError(f"bound {value!r} is not a number", field)
            return f"({self.as_double(c)} {op} {num_literal(n)})"
        v = self.as_string(c)
        s = self.lit(stringify(value))
        if ordering == "lexicographic":
            return f"({v} {op} {s})"
        if ordering == "strlen":
            strict = op.rstrip("=")
            return f"((length({v}) {strict} length({s})) OR (length({v}) = length({s}) AND {v} {op} {s}))"
        if ordering in ("alphanumeric", "natural"):
            return f"({self.alnum_key(v)} {op} {self.alnum_key(s)})"
        raise FilterError(f"unsupported ordering {ordering!r}", field)

    def alnum_key(self, v: str) -> str:
        """A byte-comparable key for Druid's alphanumeric ordering: digit runs padded to 20 digits."""
        zeros = "0" * 20
        if self.d == "spark":
            padded = f"regexp_replace({v}, '([0-9]+)', '{zeros}$1')"
            return f"regexp_replace({padded}, '[0-9]*([0-9]{{20}})', '$1')"
        padded = f"regexp_replace({v}, '([0-9]+)', '{zeros}\\1', 'g')"
        return f"regexp_replace({padded}, '[0-9]*([0-9]{{20}})', '\\1', 'g')"

    def f_bound(self, f: Mapping[str, Any], field: str) -> str:
        c = self.dimension(f)
        ordering = f.get("ordering") or ("numeric" if f.get("alphaNumeric") is False else "lexicographic")
        if isinstance(ordering, Mapping):
            ordering = ordering.get("type")
        if f.get("alphaNumeric") is True:
            ordering = "alphanumeric"
        ordering = str(ordering).lower()
        if ordering == "version":
            raise FilterError("ordering 'version' is not supported", f"{field}.ordering")
        parts = []
        if f.get("lower") is not None:
            op = ">" if f.get("lowerStrict") else ">="
            parts.append(self.cmp(c, op, f["lower"], ordering, f"{field}.lower"))
        if f.get("upper") is not None:
            op = "<" if f.get("upperStrict") else "<="
            parts.append(self.cmp(c, op, f["upper"], ordering, f"{field}.upper"))
        if not parts:
            return f"({c.sql} IS NOT NULL)"
        return parts[0] if len(parts) == 1 else f"({parts[0]} AND {parts[1]})"

    def f_range(self, f: Mapping[str, Any], field: str) -> str:
        c = self.column(f.get("column"), f"{field}.column")
        mtype = normalize_type(f.get("matchValueType") or "STRING")
        if mtype not in ("STRING", "LONG", "DOUBLE"):
            raise FilterError("unsupported matchValueType", f"{field}.matchValueType")
        ordering = "numeric" if mtype in NUMERIC_TYPES else "lexicographic"
        parts = []
        if f.get("lower") is not None:
            op = ">" if f.get("lowerOpen") else ">="
            parts.append(self.cmp(c, op, f["lower"], ordering, f"{field}.lower"))
        if f.get("upper") is not None:
            op = "<" if f.get("upperOpen") else "<="
            parts.append(self.cmp(c, op, f["upper"], ordering, f"{field}.upper"))
        if not parts:
            return f"({c.sql} IS NOT NULL)"
        return parts[0] if len(parts) == 1 else f"({parts[0]} AND {parts[1]})"

    def f_and(self, f: Mapping[str, Any], field: str) -> str:
        subs = self.fields(f, field)
        if not subs:
            return "TRUE"
        return subs[0] if len(subs) == 1 else "(" + " AND ".join(subs) + ")"

    def f_or(self, f: Mapping[str, Any], field: str) -> str:
        subs = self.fields(f, field)
        if not subs:
            return "FALSE"
        return subs[0] if len(subs) == 1 else "(" + " OR ".join(subs) + ")"

    def fields(self, f: Mapping[str, Any], field: str) -> list[str]:
        subs = f.get("fields")
        if not isinstance(subs, list):
            raise FilterError("expected a list of filters", f"{field}.fields")
        return [self.compile(s, f"{field}.fields[{i}]") for i, s in enumerate(subs)]

    def f_not(self, f: Mapping[str, Any], field: str) -> str:
        if "field" not in f:
            raise FilterError("not filter needs 'field'", f"{field}.field")
        # SQL's three-valued NOT is Druid's SQL-compatible behaviour: a row whose inner filter is
        # unknown (null) matches neither the filter nor its negation.
        return f"(NOT {self.compile(f['field'], f'{field}.field')})"

    def f_regex(self, f: Mapping[str, Any], field: str) -> str:
        pattern = f.get("pattern")
        if not isinstance(pattern, str):
            raise FilterError("regex filter needs a string 'pattern'", f"{field}.pattern")
        return self.regex_match(self.as_string(self.dimension(f)), pattern)

    def f_like(self, f: Mapping[str, Any], field: str) -> str:
        pattern = f.get("pattern")
        if not isinstance(pattern, str):
            raise FilterError("like filter needs a string 'pattern'", f"{field}.pattern")
        esc = f.get("escape")
        if esc is not None and (not isinstance(esc, str) or len(esc) != 1):
            raise FilterError("escape must be a single character", f"{field}.escape")
        v = self.as_string(self.dimension(f))
        if esc is None and self.d == "spark":
            # Spark's LIKE escapes with '\' by default; Druid has no default escape.
            esc = next(ch for ch in "!#~^|@" if ch not in pattern)
        tail = f" ESCAPE {self.lit(esc)}" if esc is not None else ""
        return f"({v} LIKE {self.lit(pattern)}{tail})"

    def f_interval(self, f: Mapping[str, Any], field: str) -> str:
        ivs = f.get("intervals")
        if not isinstance(ivs, list):
            raise FilterError("interval filter needs a list of 'intervals'", f"{field}.intervals")
        c = self.dimension({**f, "dimension": f.get("dimension") or "__time"})
        ms = c.sql if c.type in NUMERIC_TYPES else f"TRY_CAST({c.sql} AS BIGINT)"
        parts = []
        for i, text in enumerate(ivs):
            try:
                iv = Interval.parse(str(text))
            except TimeParseError as e:
                raise FilterError(str(e), f"{field}.intervals[{i}]") from e
            parts.append(f"({ms} >= {iv.start} AND {ms} < {iv.end})")
        if not parts:
            return "FALSE"
        return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"

    def contains(self, v: str, needle: Any, case_sensitive: bool) -> str:
        n = self.lit(stringify(needle))
        if not case_sensitive:
            v, n = f"lower({v})", f"lower({n})"
        if self.d == "spark":
            return f"(instr({v}, {n}) > 0)"
        return f"contains({v}, {n})"

    def f_search(self, f: Mapping[str, Any], field: str) -> str:
        q = f.get("query")
        if not isinstance(q, Mapping):
            raise FilterError("search filter needs a 'query' object", f"{field}.query")
        v = self.as_string(self.dimension(f))
        qt = q.get("type")
        if qt in ("contains", "insensitive_contains"):
            if q.get("value") is None:
                raise FilterError("search query needs 'value'", f"{field}.query.value")
            cs = bool(q.get("caseSensitive", False)) and qt == "contains"
            return self.contains(v, q["value"], cs)
        if qt == "fragment":
            values = q.get("values")
            if not isinstance(values, list) or not values:
                raise FilterError("fragment search needs 'values'", f"{field}.query.values")
            cs = bool(q.get("caseSensitive", False))
            parts = [self.contains(v, x, cs) for x in values]
            return parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")"
        if qt == "regex":
            pattern = q.get("pattern")
            if not isinstance(pattern, str):
                raise FilterError("regex search needs 'pattern'", f"{field}.query.pattern")
            return self.regex_match(v, pattern)
        raise FilterError(f"unsupported search query type {qt!r}", f"{field}.query.type")

    def f_columnComparison(self, f: Mapping[str, Any], field: str) -> str:  # noqa: N802
        dims = f.get("dimensions")
        if not isinstance(dims, list) or len(dims) < 2:
            raise FilterError("columnComparison needs at least two dimensions", f"{field}.dimensions")
        cols = [self.as_string(self.dimension_spec(d, f"{field}.dimensions[{i}]")) for i, d in enumerate(dims)]
        eq = "<=>" if self.d == "spark" else "IS NOT DISTINCT FROM"
        parts = [f"({cols[0]} {eq} {other})" for other in cols[1:]]
        return parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")"

    def f_expression(self, f: Mapping[str, Any], field: str) -> str:
        text = f.get("expression")
        if not isinstance(text, str):
            raise FilterError("expression filter needs a string 'expression'", f"{field}.expression")
        try:
            return expression_to_predicate_sql(text, dialect=self.d, column_types=self.column_types,
                                               multi_value_columns=self.multi)
        except ExpressionError as e:
            raise FilterError(str(e), f"{field}.expression") from e

    def f_true(self, f: Mapping[str, Any], field: str) -> str:
        return "TRUE"

    def f_false(self, f: Mapping[str, Any], field: str) -> str:
        return "FALSE"

    def f_null(self, f: Mapping[str, Any], field: str) -> str:
        return f"({self.column(f.get('column'), f'{field}.column').sql} IS NULL)"
