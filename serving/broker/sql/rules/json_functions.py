"""Druid's JSON functions over nested (``COMPLEX<json>``) columns and JSON text, on DuckDB's JSON type.

| Druid | DuckDB |
| --- | --- |
| ``JSON_VALUE(expr, path [RETURNING type])`` | the scalar at ``path`` as VARCHAR (NULL for an object or array), ``TRY_CAST`` to ``type`` |
| ``JSON_VALUE(expr, path RETURNING type ARRAY)`` | the array at ``path``, elements converted as an ARRAY column's (booleans 1/0) |
| ``JSON_QUERY(expr, path)`` | ``json_extract`` (JSON) |
| ``JSON_KEYS(expr, path)`` | ``json_keys`` when ``path`` is an object, an array's positions as text, else NULL |
| ``JSON_PATHS(expr)`` | every path to a literal (or an array of literals), a UDF |
| ``JSON_OBJECT(KEY k VALUE v, …)`` / ``JSON_OBJECT(k: v, …)`` | ``json_object`` |
| ``PARSE_JSON(s)`` / ``TRY_PARSE_JSON(s)`` | ``json(s)`` (400 when not JSON) / NULL when not JSON |
| ``TO_JSON_STRING(expr)`` | ``to_json`` as VARCHAR |

Paths are JSONPath (``$.a.b[0]``, ``$['a b']``) or jq-style (``.a.b[0]``), as Druid accepts; both
arrive parsed (sqlglot) or as string literals and are written out in DuckDB's JSONPath syntax."""

from __future__ import annotations

import re

from sqlglot import exp

from radstack.expressions.json_path import duckdb_json_path, path_key
from radstack.sql_text import ExpressionError
from radstack.value_sql import array_sql
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import aggregates, anonymous_name, answers_the_query, sql_around
from serving.broker.sql.timeexpr import call, to_millis
from serving.broker.sql.translation_context import TranslationContext
from serving.broker.sql.type_rules import is_timestamp


def _path_text(node: exp.Expression | None, fn: str) -> str:
    """DuckDB JSONPath text for a parsed JSONPath node or a string literal (JSONPath or jq-style)."""
    if isinstance(node, exp.JSONPath):
        out = ""
        for part in node.expressions:
            if isinstance(part, exp.JSONPathRoot):
                out = "$"
            elif isinstance(part, exp.JSONPathKey):
                out += path_key(str(part.this))
            elif isinstance(part, exp.JSONPathSubscript) and isinstance(part.this, int):
                out += f"[{part.this}]"
            else:
                raise validation_error(f"{fn}: unsupported JSON path element {part.sql()!r}")
        return out or "$"
    if isinstance(node, exp.Literal) and node.is_string:
        try:
            return duckdb_json_path(str(node.this))
        except ExpressionError as e:
            raise validation_error(f"{fn}: {e}") from e
    raise validation_error(f"{fn}: the path must be a string literal")


def _reaches_nothing(path: exp.Literal) -> bool:
    """A path that goes on past a negative array index (``$.a[-1].b``): JSON_VALUE finds nothing there
    in Druid 33; a negative index at the end of the path (``$.a[-1]``) counts from the end, as DuckDB's
    and Druid's JSON_QUERY do."""
    return re.search(r"\[-\d+\].", str(path.this)) is not None


def _lit(text: str) -> exp.Literal:
    return exp.Literal.string(text)


def _text(expr: exp.Expression) -> exp.Expression:
    return exp.cast(expr, exp.DataType.build("VARCHAR"))


def _case(cond: exp.Expression, then: exp.Expression) -> exp.Expression:
    return exp.Case(ifs=[exp.If(this=cond, true=then)])


def _array_value(doc: exp.Expression, path: exp.Expression, returning: exp.DataType) -> exp.Expression:
    """``JSON_VALUE(… RETURNING <type> ARRAY)``: the array at ``path`` (NULL for anything else), its
    elements converted as an ARRAY column stores them; a BOOLEAN array's elements are BOOLEAN (``UNNEST``
    and ``ARRAY_OFFSET`` answer true/false, the whole array is written 1/0), as in Druid."""
    inner = returning.expressions[0] if returning.expressions else exp.DataType.build("VARCHAR")
    if inner.is_type(*exp.DataType.INTEGER_TYPES, exp.DataType.Type.BOOLEAN):
        element = "array<long>"
    elif inner.is_type(*exp.DataType.REAL_TYPES):
        element = "array<double>"
    else:
        element = "array<string>"
    converted = sql_around(lambda slot: array_sql(f"CAST({slot} AS VARCHAR)", "string", element),
                           call("JSON_EXTRACT", doc.copy(), path.copy()))
    if inner.is_type(exp.DataType.Type.BOOLEAN):  # BOOLEAN elements (the answer writes the array as 1/0)
        converted = exp.cast(converted, exp.DataType.build("BOOLEAN[]", dialect="duckdb"))
    is_array = exp.EQ(this=call("JSON_TYPE", doc, path), expression=_lit("ARRAY"))
    # an array holding an array or an object is no array of that scalar type: NULL, as in Druid 33
    element = exp.to_identifier("__j")
    nested = call("LIST_FILTER", exp.FromJson(this=call("JSON_EXTRACT", doc.copy(), path.copy()),
                                              expression=_lit('["JSON"]')),
                  exp.Lambda(this=exp.In(this=call("JSON_TYPE", exp.column(element)),
                                         expressions=[_lit("ARRAY"), _lit("OBJECT")]), expressions=[element]))
    flat = exp.EQ(this=call("LEN", nested), expression=exp.Literal.number(0))
    return _case(exp.and_(is_array, flat), converted)


def _in_scan_answer(node: exp.Expression) -> bool:
    """Whether ``node`` is a column of the answer of a plain scan (a block whose rows are the answer, no grouping)."""
    child, parent = node, node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        if not isinstance(parent, exp.Alias):
            return False
        child, parent = parent, parent.parent
    if parent is None or not answers_the_query(parent) or child.arg_key != "expressions":
        return False
    return not aggregates(parent) and not parent.args.get("distinct")


def _scalars_as_values(doc: exp.Expression, path: str) -> exp.Expression:
    """``JSON_VALUE`` (no ``RETURNING``) at an array of scalars: Druid's multi-value string of them, as an
    answer writes one (``["2","1"]``; one value as itself; ``[]`` when empty) — NULL when an element is an
    object or an array."""
    each = exp.to_identifier("__json_e")
    elements = call("JSON_EXTRACT", doc.copy(), _lit(path + "[*]"))
    nested = call("LIST_BOOL_OR", call("LIST_TRANSFORM", elements, exp.Lambda(
        this=exp.In(this=call("JSON_TYPE", exp.column(each)), expressions=[_lit("OBJECT"), _lit("ARRAY")]),
        expressions=[each])))
    texts = call("JSON_EXTRACT_STRING", doc.copy(), _lit(path + "[*]"))
    size = call("LEN", texts.copy())
    return exp.Case(ifs=[exp.If(this=call("COALESCE", nested, exp.false()), true=exp.Null()),
                         exp.If(this=exp.EQ(this=size, expression=exp.Literal.number(0)), true=_lit("[]")),
                         exp.If(this=exp.EQ(this=size.copy(), expression=exp.Literal.number(1)),
                                true=call("LIST_EXTRACT", texts.copy(), exp.Literal.number(1)))],
                    default=_text(call("TO_JSON", texts.copy())))


def _json_member(value: exp.Expression) -> exp.Expression:
    """A ``JSON_OBJECT`` value as Druid writes it: a BOOLEAN as 1/0, a TIMESTAMP as epoch millis."""
    if isinstance(value.type, exp.DataType) and value.type.is_type(exp.DataType.Type.BOOLEAN):
        return exp.cast(value, "BIGINT")
    return to_millis(value) if is_timestamp(value) else value


def _document(doc: exp.Expression) -> exp.Expression:
    """The JSON a JSON function reads: a ``COMPLEX<json>`` value as it is; a string or a number is that
    JSON scalar, as Druid reads a plain column (its text is not parsed: ``PARSE_JSON`` does that)."""
    t = getattr(doc, "type", None)
    if t is None or t.is_type(exp.DataType.Type.JSON, exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL):
        return doc
    return call("TO_JSON", _json_member(doc))  # __time is its millis, a BOOLEAN 1/0, as Druid reads them


def json_functions(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if isinstance(node, exp.JSONValue):
        path = _lit(_path_text(node.args.get("path"), "JSON_VALUE"))
        returning = node.args.get("returning")
        if _reaches_nothing(path):
            return exp.cast(exp.null(), returning if isinstance(returning, exp.DataType) else "VARCHAR")
        doc = _document(node.this)
        kind = call("JSON_TYPE", doc, path)
        text = call("JSON_EXTRACT_STRING", doc, path)
        # a JSON boolean is the long 1/0 Druid stores for it ("1", 1, 1.0 or true as RETURNING asks)
        boolean = exp.Case(ifs=[exp.If(this=exp.EQ(this=text.copy(), expression=_lit("true")), true=_lit("1"))],
                           default=_lit("0"))
        # an answer's column of a scan shows the array's scalars as Druid's multi-value string; grouped,
        # filtered or computed on, the array is NULL (Druid 33 groups every such row under NULL)
        textual = (not isinstance(returning, exp.DataType) or returning.is_type(exp.DataType.Type.VARCHAR)) \
            and _in_scan_answer(node)
        value = exp.Case(ifs=[exp.If(this=exp.EQ(this=kind, expression=_lit("OBJECT")), true=exp.Null()),
                              exp.If(this=exp.EQ(this=kind.copy(), expression=_lit("ARRAY")),
                                     true=_scalars_as_values(doc, str(path.this)) if textual else exp.Null()),
                              exp.If(this=exp.EQ(this=kind.copy(), expression=_lit("BOOLEAN")), true=boolean)],
                         default=text)
        if isinstance(returning, exp.DataType) and returning.is_type(exp.DataType.Type.ARRAY):
            return _array_value(doc, path, returning)
        if isinstance(returning, exp.DataType) and not returning.is_type(exp.DataType.Type.VARCHAR):
            return exp.TryCast(this=value, to=returning)
        return value
    if isinstance(node, exp.JSONKeys):
        path_node = node.args.get("expression")
        path = _lit("$" if path_node is None else _path_text(path_node, "JSON_KEYS"))
        node.set("this", _document(node.this))  # a string or a number is a JSON scalar: no keys (NULL)
        kind = call("JSON_TYPE", node.this, path)
        index = exp.to_identifier("__i")  # an array's keys are its positions, as text (Druid 33)
        size = exp.cast(call("JSON_ARRAY_LENGTH", node.this.copy(), path.copy()), "BIGINT")
        positions = call("LIST_TRANSFORM", call("RANGE", size),
                         exp.Lambda(this=exp.cast(exp.column(index), "VARCHAR"), expressions=[index]))
        return exp.Case(ifs=[exp.If(this=exp.EQ(this=kind, expression=_lit("OBJECT")),
                                    true=call("JSON_KEYS", node.this.copy(), path.copy())),
                             exp.If(this=exp.EQ(this=kind.copy(), expression=_lit("ARRAY")), true=positions)])
    if isinstance(node, exp.ParseJSON):
        return call("JSON", _text(node.this))
    if isinstance(node, exp.JSONObject):
        args: list[exp.Expression] = []
        for kv in node.expressions:
            if not isinstance(kv, exp.JSONKeyValue):
                raise validation_error("JSON_OBJECT takes KEY k VALUE v pairs")
            args += [_text(kv.this), _json_member(kv.expression)]
        return call("JSON_OBJECT", *args)
    name = anonymous_name(node)
    if name is None:
        return node
    args = list(node.expressions)
    if name == "JSON_QUERY":
        if len(args) != 2:
            raise validation_error("JSON_QUERY takes 2 arguments: JSON_QUERY(expr, path)")
        path = _lit(_path_text(args[1], name))  # a negative index counts from the end here (Druid 33)
        # a JSON null there is SQL NULL, as in Druid 33 (JSON_QUERY(c, '$.a_null') IS NULL)
        return exp.Nullif(this=call("JSON_EXTRACT", _document(args[0]), path),
                          expression=exp.cast(_lit("null"), "JSON"))
    if name == "JSON_QUERY_ARRAY":  # the array at path as an array of JSON; a scalar wrapped in one; an
        # object, a missing value or a JSON null is NULL (as Druid 33 answers: the differential corpus)
        if len(args) != 2:
            raise validation_error("JSON_QUERY_ARRAY takes 2 arguments: JSON_QUERY_ARRAY(expr, path)")
        value = call("JSON_EXTRACT", args[0], _lit(_path_text(args[1], name)))
        is_array = exp.EQ(this=call("JSON_TYPE", value.copy()), expression=_lit("ARRAY"))
        listed = exp.FromJson(this=value.copy(), expression=_lit('["JSON"]'))
        is_json_null = exp.EQ(this=call("JSON_TYPE", value.copy()), expression=_lit("NULL"))  # {"k": null}: NULL
        is_object = exp.EQ(this=call("JSON_TYPE", value.copy()), expression=_lit("OBJECT"))
        return exp.Case(ifs=[exp.If(this=exp.Is(this=value.copy(), expression=exp.Null()), true=exp.Null()),
                             exp.If(this=is_json_null, true=exp.Null()),
                             exp.If(this=is_object, true=exp.Null()),
                             exp.If(this=is_array, true=listed)],
                        default=exp.Array(expressions=[value]))
    if name == "JSON_PATHS":
        if len(args) != 1:
            raise validation_error("JSON_PATHS takes 1 argument")
        t = getattr(args[0], "type", None)
        if isinstance(t, exp.DataType) and not t.is_type(exp.DataType.Type.JSON, exp.DataType.Type.UNKNOWN):
            # a value that is not JSON (a string, a number, a TIMESTAMP, even NULL) is one literal at "$"
            return exp.cast(exp.Array(expressions=[_lit("$")]), exp.DataType.build("VARCHAR[]", dialect="duckdb"))
        ctx.udfs.add("DRUID_JSON_PATHS")
        return call("DRUID_JSON_PATHS", _text(args[0]))
    if name == "TRY_PARSE_JSON":
        if len(args) != 1:
            raise validation_error("TRY_PARSE_JSON takes 1 argument")
        text = _text(args[0])
        return _case(call("JSON_VALID", text), call("JSON", text.copy()))
    if name == "TO_JSON_STRING":
        if len(args) != 1:
            raise validation_error("TO_JSON_STRING takes 1 argument")
        # a JSON null (JSON_QUERY of a null member) is SQL NULL in Druid, not the text 'null'
        value = _json_member(args[0])
        json_null = exp.EQ(this=call("JSON_TYPE", call("TO_JSON", value.copy())), expression=exp.Literal.string("NULL"))
        return exp.Case(ifs=[exp.If(this=json_null, true=exp.null())], default=_text(call("TO_JSON", value)))
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = json_functions
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (exp.JSONKeys, exp.JSONObject, exp.JSONValue, exp.ParseJSON, exp.JSONPath)
ACCEPTS = frozenset({"JSON_QUERY", "JSON_QUERY_ARRAY", "JSON_PATHS", "TRY_PARSE_JSON", "TO_JSON_STRING"})
EMITS = frozenset({"JSON", "JSON_ARRAY_LENGTH", "LIST_TRANSFORM", "LIST_FILTER", "LIST_BOOL_OR", "LIST_EXTRACT", "LEN", "RANGE", "JSON_EXTRACT", "JSON_EXTRACT_STRING", "JSON_KEYS", "JSON_OBJECT", "JSON_TYPE", "JSON_VALID", "TO_JSON"})
# JSON_VALUE(… RETURNING … ARRAY): radstack.value_sql.array_sql's element-wise conversion
EMITS_CLASSES = (exp.FromJson, exp.Transform, exp.RegexpFullMatch, exp.Trunc, exp.JSONType, exp.JSONExtractScalar)
