"""Dynamic parameters: ``[{"type": "VARCHAR", "value": "bar"}, …]`` bound to ``?`` in order, as typed
SQL literals in the tree (never spliced into SQL text)."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from radstack.time.intervals import TimeParseError, parse_instant
from serving.broker.sql.errors import validation_error
from serving.broker.sql.timeexpr import ts_literal

_INTEGER = {"TINYINT", "SMALLINT", "INTEGER", "INT", "BIGINT"}
_FLOAT = {"FLOAT", "REAL", "DOUBLE", "DECIMAL", "NUMERIC"}
_STRING = {"VARCHAR", "CHAR", "STRING"}


def literal(param: dict[str, Any], position: int) -> exp.Expression:
    """One parameter as a SQL literal of its declared type."""
    if not isinstance(param, dict) or "type" not in param:
        raise validation_error(f"Parameter at position [{position}] needs a 'type' and a 'value'")
    typ = str(param["type"]).upper()
    value = param.get("value")
    if value is None:
        sql_type = {"VARCHAR": "VARCHAR", "CHAR": "VARCHAR"}.get(typ, typ if typ in _INTEGER | _FLOAT else "VARCHAR")
        return exp.cast(exp.Null(), exp.DataType.build(sql_type))
    try:
        if typ in _INTEGER:
            return exp.Literal.number(int(value))
        if typ in _FLOAT:
            return exp.cast(exp.Literal.number(repr(float(value))), exp.DataType.build("DOUBLE"))
        if typ == "BOOLEAN":
            return exp.Boolean(this=value if isinstance(value, bool) else str(value).lower() == "true")
        if typ in ("TIMESTAMP", "DATE"):
            ms = int(value) if isinstance(value, int | float) else parse_instant(str(value).replace(" ", "T"))
            lit = ts_literal(ms)
            return exp.cast(lit, exp.DataType.build("DATE")) if typ == "DATE" else lit
        if typ in _STRING:
            return exp.Literal.string(str(value))
        if typ == "ARRAY" and isinstance(value, list):  # ARRAY['a', 'b'], elements typed by their JSON
            return exp.Array(expressions=[_element(v, position) for v in value])
    except (TypeError, ValueError, TimeParseError) as e:
        raise validation_error(f"Cannot bind parameter at position [{position}]: {value!r} is not a {typ}") from e
    raise validation_error(f"Unsupported parameter type [{typ}] at position [{position}]")


def _element(value: Any, position: int) -> exp.Expression:
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        return exp.Literal.number(value)
    if isinstance(value, float):
        return exp.cast(exp.Literal.number(repr(value)), exp.DataType.build("DOUBLE"))
    if isinstance(value, str):
        return exp.Literal.string(value)
    raise validation_error(f"Cannot bind parameter at position [{position}]: an ARRAY holds scalars, not {value!r}")


def _in_text_order(tree: exp.Expression) -> list[exp.Placeholder]:
    """The ``?`` placeholders in the order they appear in the statement (the tree's walk order is not
    that order: breadth-first, and a WITH clause is attached after the SELECT it precedes). Each is
    found by a marker in the SQL the tree writes, which follows the text."""
    found = [p for p in tree.walk() if isinstance(p, exp.Placeholder)]
    if len(found) < 2:
        return found
    copy = tree.copy()
    for i, p in enumerate([p for p in copy.walk() if isinstance(p, exp.Placeholder)]):
        p.replace(exp.Literal.string(f"__radstack_parameter_{i}__"))
    text = copy.sql()
    position = {i: text.index(f"'__radstack_parameter_{i}__'") for i in range(len(found))}
    return [found[i] for i in sorted(position, key=position.__getitem__)]


def bind_parameters(tree: exp.Expression, parameters: list[dict[str, Any]]) -> exp.Expression:
    placeholders = _in_text_order(tree)
    if len(placeholders) > len(parameters):
        raise validation_error(f"No value bound for parameter (position [{len(parameters) + 1}])")
    for i, ph in enumerate(placeholders):
        new = literal(parameters[i], i + 1)
        if ph is tree:
            return new
        ph.replace(new)
    return tree
