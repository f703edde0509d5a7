"""Druid's expression functions, one entry each: ``@function(names, min_args, max_args)`` registers an
implementation in the compiler's table. A new function is one entry here plus its test."""

from __future__ import annotations

import ipaddress
import re

from radstack.expressions.ast import Expr, Literal
from radstack.expressions.compiler import Compiled, Compiler, function, function_type, operator_type
from radstack.sql_text import ExpressionError, int_div, string_type
from radstack.time.floor import time_ceil_sql, time_floor_sql
from radstack.time.intervals import TimeParseError, parse_instant
from radstack.time.sql import time_extract_sql, time_format_sql, time_parse_sql, time_shift_sql


@function("upper lower reverse", 1)
def _unary_str(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    return Compiled(f"{n}({c.string(c.compile(args[0]))})", "STRING")


@function("strlen", 1)
def _strlen(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    return Compiled(f"CAST(length({c.string(c.compile(args[0]))}) AS BIGINT)", "LONG")


@function("substring", 3)
def _substring(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    s = c.string(c.compile(args[0]))
    idx, ln = args[1], args[2]
    i_sql, l_sql = c.millis(idx), c.millis(ln)
    if isinstance(ln, Literal) and ln.type == "LONG":
        body = f"substr({s}, {i_sql} + 1, {l_sql})" if int(ln.value) >= 0 else f"substr({s}, {i_sql} + 1)"  # type: ignore[arg-type]
    else:
        body = f"(CASE WHEN {l_sql} >= 0 THEN substr({s}, {i_sql} + 1, {l_sql}) ELSE substr({s}, {i_sql} + 1) END)"
    # Druid (SQL-compatible mode): null when the index is past the end.
    return Compiled(f"(CASE WHEN {i_sql} < length({s}) THEN {body} END)", "STRING")


@function("left right", 2)
def _left_right(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    return Compiled(f"{n}({c.string(c.compile(args[0]))}, {c.millis(args[1])})", "STRING")


def _text(c: Compiler, e: Expr) -> Compiled:
    """``e`` as a string, keeping its checked size."""
    compiled = c.compile(e)
    return Compiled(c.string(compiled), "STRING", size=compiled.size)


@function("replace", 3)
def _replace(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    s, a, b = (_text(c, x) for x in args)
    value = f"replace({s.sql}, {a.sql}, {b.sql})"
    if isinstance(args[1], Literal) and isinstance(args[2], Literal) and \
            len(str(args[2].value or "").encode()) <= len(str(args[1].value or "").encode()):
        return Compiled(value, "STRING")  # it can only shrink
    # every position may be an occurrence: |s| × (1 + |b|), the bound of s written once
    return c.limited(value, f"({c.size_of(s)}) * (1 + {c.size_of(b)})", "replace")


@function("repeat", 2)
def _repeat(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    s, times = _text(c, args[0]), c.millis(args[1])
    # a count below 1 is NULL in Druid (DuckDB and Spark give '')
    return c.limited(f"(CASE WHEN {times} >= 1 THEN repeat({s.sql}, {times}) END)", f"({c.size_of(s)}) * ({times})",
                     "repeat")


# IPv4 (Druid's ipv4_match / ipv4_parse / ipv4_stringify), in SQL both dialects run
_DOTTED = r"^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$"


def _ipv4_long(c: Compiler, e: Expr) -> str:
    """The address ``e`` as its integer: dotted-decimal text (each part ≤ 255) or a LONG in 0 … 2^32-1;
    NULL when it is neither (text of digits is no address to Druid 33)."""
    compiled = c.compile(e)
    if compiled.type == "LONG":
        return f"(CASE WHEN {compiled.sql} BETWEEN 0 AND 4294967295 THEN {compiled.sql} END)"
    s = c.string(compiled)
    pat = c.lit_str(_DOTTED)
    octets = [f"TRY_CAST(regexp_extract({s}, {pat}, {i}) AS BIGINT)" for i in range(1, 5)]
    valid = " AND ".join([_regex_match(c, s, pat), *(f"{o} <= 255" for o in octets)])
    value = f"({octets[0]} * 16777216 + {octets[1]} * 65536 + {octets[2]} * 256 + {octets[3]})"
    return f"(CASE WHEN {valid} THEN {value} END)"


_CIDR = re.compile(r"(?:[0-9]{1,3}\.){3}[0-9]{1,3}/(?:[0-9]|[12][0-9]|3[0-2])")


def ipv4_subnet(text: str | None) -> ipaddress.IPv4Network:
    """``ipv4_match``'s subnet as Druid reads it, in SQL and native expressions alike: a CIDR literal
    (``10.0.0.0/16``; an address without a prefix is none); otherwise ExpressionError with Druid's
    message."""
    value = "null" if text is None else text
    if not _CIDR.fullmatch(value) or any(int(p) > 255 for p in value.split("/")[0].split(".")):
        raise ExpressionError(f"Function[ipv4_match] subnet arg has an invalid format: {value}")
    return ipaddress.IPv4Network(value, strict=False)


@function("ipv4_match", 2)
def _ipv4_match(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    net = ipv4_subnet(c.const_str(n, args[1], "the subnet"))
    ip = _ipv4_long(c, args[0])
    # an address that is none (NULL included) matches no subnet: false, as in Druid
    return c.pred(f"coalesce({ip} BETWEEN {int(net.network_address)} AND {int(net.broadcast_address)}, false)")


@function("ipv4_parse", 1)
def _ipv4_parse(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    return Compiled(_ipv4_long(c, args[0]), "LONG")


@function("ipv4_stringify", 1)
def _ipv4_stringify(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    ip = _ipv4_long(c, args[0])
    parts = [f"CAST({int_div(ip, str(256 ** k), c.d)} % 256 AS {string_type(c.d)})" for k in (3, 2, 1, 0)]
    dotted = " || '.' || ".join(parts)
    return Compiled(f"(CASE WHEN {ip} IS NOT NULL THEN {dotted} END)", "STRING")


@function("trim ltrim rtrim", 1, 2)
def _trim(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    s = c.string(c.compile(args[0]))
    chars = c.string(c.compile(args[1])) if len(args) > 1 else "' '"
    if c.d == "spark":
        where = {"trim": "BOTH", "ltrim": "LEADING", "rtrim": "TRAILING"}[n]
        return Compiled(f"trim({where} {chars} FROM {s})", "STRING")
    return Compiled(f"{n}({s}, {chars})", "STRING")


@function("lpad rpad", 3)
def _pad(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    s, pad, length = c.string(c.compile(args[0])), c.string(c.compile(args[2])), c.millis(args[1])
    return c.limited(f"{n}({s}, CAST({length} AS INTEGER), {pad})", length, n)


@function("strpos", 2, 3)
def _strpos(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    h, nd = c.string(c.compile(args[0])), c.string(c.compile(args[1]))
    if len(args) == 2:
        if c.d == "spark":
            return Compiled(f"CAST(locate({nd}, {h}) - 1 AS BIGINT)", "LONG")
        return Compiled(f"CAST(strpos({h}, {nd}) - 1 AS BIGINT)", "LONG")
    f = c.millis(args[2])
    if c.d == "spark":
        return Compiled(f"CAST(locate({nd}, {h}, CAST({f} AS INT) + 1) - 1 AS BIGINT)", "LONG")
    pos = f"strpos(substr({h}, {f} + 1), {nd})"
    return Compiled(f"CAST(CASE WHEN {pos} = 0 THEN -1 ELSE {pos} + {f} - 1 END AS BIGINT)", "LONG")


@function("contains_string icontains_string", 2)
def _contains(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    s, sub = c.string(c.compile(args[0])), c.string(c.compile(args[1]))
    if n == "icontains_string":
        s, sub = f"lower({s})", f"lower({sub})"
    if c.d == "spark":
        return c.pred(f"(instr({s}, {sub}) > 0)")
    return c.pred(f"contains({s}, {sub})")


def _regex_match(c: Compiler, s: str, p: str) -> str:
    return f"({s} RLIKE {p})" if c.d == "spark" else f"regexp_matches({s}, {p})"


@function("regexp_like", 2)
def _regexp_like(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    pat = c.const_str(n, args[1], "the pattern")
    s = c.string(c.compile(args[0]))
    return c.pred(_regex_match(c, s, c.lit_str(pat or "")))


@function("regexp_extract", 2, 3)
def _regexp_extract(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    pat = c.lit_str(c.const_str(n, args[1], "the pattern") or "")
    idx = c.const_int(n, args[2], "the group index") if len(args) > 2 else 0
    s = c.string(c.compile(args[0]))
    return Compiled(
        f"(CASE WHEN {_regex_match(c, s, pat)} THEN regexp_extract({s}, {pat}, {idx}) END)", "STRING"
    )


@function("like", 2, 3)
def _like(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    pat = c.const_str(n, args[1], "the pattern") or ""
    esc = c.const_str(n, args[2], "the escape") if len(args) > 2 else None
    s = c.string(c.compile(args[0]))
    tail = f" ESCAPE {c.lit_str(esc)}" if esc else ""
    return c.pred(f"({s} LIKE {c.lit_str(pat)}{tail})")


# null handling + conditionals
@function("nvl", 2)
def _nvl(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    a, b = c.compile(args[0]), c.compile(args[1])
    t = function_type(a.type, b.type)
    return Compiled(f"coalesce({c.coerce(a, t)}, {c.coerce(b, t)})", t)


@function("isnull notnull", 1)
def _isnull(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    a = c.compile(args[0])
    return c.pred(f"({a.sql} IS {'NOT ' if n == 'notnull' else ''}NULL)")


def _case(c: Compiler, whens: list[tuple[str, Expr]], default: Expr | None) -> Compiled:
    outs = [c.compile(v) for _, v in whens]
    dflt = c.compile(default) if default is not None else None
    t: str | None = None
    for o in outs + ([dflt] if dflt else []):
        t = function_type(t, o.type)
    body = " ".join(f"WHEN {w} THEN {c.coerce(o, t)}" for (w, _), o in zip(whens, outs, strict=True))
    tail = f" ELSE {c.coerce(dflt, t)}" if dflt is not None else ""
    return Compiled(f"(CASE {body}{tail} END)", t)


@function("if", 3)
def _if(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    return _case(c, [(c.boolean(c.compile(args[0])), args[1])], args[2])


@function("case_searched", 2, 999)
def _case_searched(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    pairs = [(c.boolean(c.compile(args[i])), args[i + 1]) for i in range(0, len(args) - 1, 2)]
    return _case(c, pairs, args[-1] if len(args) % 2 else None)


@function("case_simple", 3, 999)
def _case_simple(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    subject = c.compile(args[0])
    rest = args[1:]
    pairs = []
    for i in range(0, len(rest) - 1, 2):
        v = c.compile(rest[i])
        t = operator_type(subject.type, v.type)
        if t == "STRING" or subject.type is None or v.type is None:
            cond = f"({subject.sql} = {v.sql})"
        else:
            cond = f"({c.num(subject)} = {c.num(v)})"
        pairs.append((cond, rest[i + 1]))
    return _case(c, pairs, rest[-1] if len(rest) % 2 else None)


@function("cast", 2)
def _cast(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    target = (c.const_str(n, args[1], "the type") or "").upper()
    target = {"FLOAT": "DOUBLE", "BIGINT": "LONG", "VARCHAR": "STRING"}.get(target, target)
    if target not in ("LONG", "DOUBLE", "STRING"):
        raise ExpressionError(f"function 'cast': unsupported type {target!r}")
    a = c.compile(args[0])
    if a.type is None and a.sql != "NULL":
        if target == "STRING":
            return Compiled(f"CAST({a.sql} AS {c.sqltype('STRING')})", "STRING")
        a = Compiled(a.sql, "STRING" if target == "LONG" else "LONG")
        if target == "DOUBLE":
            return Compiled(f"TRY_CAST({a.sql} AS DOUBLE)", "DOUBLE")
    return Compiled(c.coerce(a, target), target)


# math
@function("abs", 1)
def _abs(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    a = c.compile(args[0])
    return Compiled(f"abs({c.num(a)})", "DOUBLE" if a.type in ("STRING", None) else a.type)


@function("ceil floor exp log log10 sqrt", 1)
def _double_fn(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    a = c.compile(args[0])
    x = c.coerce(a, "DOUBLE") if a.type != "DOUBLE" else a.sql
    name = {"log": "ln"}.get(n, n)
    return Compiled(f"{name}({x})", "DOUBLE")


@function("pow", 2)
def _pow(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    a, b = (c.compile(x) for x in args)
    return Compiled(f"power({c.coerce(a, 'DOUBLE')}, {c.coerce(b, 'DOUBLE')})", "DOUBLE")


@function("round", 1, 2)
def _round(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    a = c.compile(args[0])
    scale = c.const_int(n, args[1], "the scale") if len(args) > 1 else 0
    if a.type == "LONG":
        if scale >= 0:
            return a
        return Compiled(f"CAST(round({a.sql}, {scale}) AS BIGINT)", "LONG")
    return Compiled(f"round({c.coerce(a, 'DOUBLE')}, {scale})", "DOUBLE")


@function("greatest least max min", 1, 999)
def _greatest(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    cs = [c.compile(a) for a in args]
    t: str | None = None
    for x in cs:
        t = function_type(t, x.type)
    name = {"max": "greatest", "min": "least"}.get(n, n)
    return Compiled(f"{name}({', '.join(c.coerce(x, t) for x in cs)})", t)


@function("div", 2)
def _div(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    a, b = (c.compile(x) for x in args)
    if a.type == "LONG" and b.type == "LONG":
        return Compiled(int_div(a.sql, f"NULLIF({b.sql}, 0)", c.d), "LONG")
    x, y = c.coerce(a, "DOUBLE"), c.coerce(b, "DOUBLE")
    return Compiled(c.truncate_to_long(f"({x} / NULLIF({y}, 0))"), "LONG")


@function("parse_long", 1)
def _parse_long(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    return Compiled(f"TRY_CAST({c.string(c.compile(args[0]))} AS BIGINT)", "LONG")


# time
def _tz_arg(c: Compiler, fname: str, args: tuple[Expr, ...], i: int) -> str:
    if len(args) <= i:
        return "UTC"
    return c.const_str(fname, args[i], "the time zone") or "UTC"


@function("timestamp timestamp_parse", 1, 3)
def _timestamp_parse(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    s = c.string(c.compile(args[0]))
    pattern = c.const_str(n, args[1], "the format") if len(args) > 1 else None
    return Compiled(time_parse_sql(s, pattern, _tz_arg(c, n, args, 2), c.d), "LONG")


@function("unix_timestamp", 1, 2)
def _unix_timestamp(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    ts = _timestamp_parse(c, n, args)
    return Compiled(int_div(ts.sql, "1000", c.d), "LONG")


@function("timestamp_format", 1, 3)
def _timestamp_format(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    pattern = c.const_str(n, args[1], "the format") if len(args) > 1 else None
    return Compiled(time_format_sql(c.millis(args[0]), pattern, _tz_arg(c, n, args, 2), c.d), "STRING")


def _origin_arg(c: Compiler, n: str, args: tuple[Expr, ...]) -> int | None:
    if len(args) <= 2:
        return None
    o = args[2]
    if isinstance(o, Literal) and o.value is None:
        return None
    if isinstance(o, Literal) and o.type == "LONG":
        return int(o.value)  # type: ignore[arg-type]
    if isinstance(o, Literal) and o.type == "STRING":
        try:
            return parse_instant(str(o.value))
        except TimeParseError as e:
            raise ExpressionError(f"function '{n}': bad origin {o.value!r}") from e
    raise ExpressionError(f"function '{n}': the origin must be a literal")


@function("timestamp_floor timestamp_ceil", 2, 4)
def _timestamp_floor(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    period = c.const_str(n, args[1], "the period") or ""
    f = time_floor_sql if n == "timestamp_floor" else time_ceil_sql
    return Compiled(
        f(c.millis(args[0]), period, _origin_arg(c, n, args), _tz_arg(c, n, args, 3), c.d), "LONG"
    )


@function("timestamp_shift", 3, 4)
def _timestamp_shift(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    period = c.const_str(n, args[1], "the period") or ""
    step = c.millis(args[2])
    return Compiled(time_shift_sql(c.millis(args[0]), period, step, _tz_arg(c, n, args, 3), c.d), "LONG")


@function("timestamp_extract", 2, 3)
def _timestamp_extract(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    unit = (c.const_str(n, args[1], "the unit") or "").upper()
    sql = time_extract_sql(c.millis(args[0]), unit, _tz_arg(c, n, args, 2), c.d)
    return Compiled(sql, "DOUBLE" if unit in ("CENTURY", "MILLENNIUM") else "LONG")
