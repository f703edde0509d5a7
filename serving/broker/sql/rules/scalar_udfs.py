"""Druid's scalar functions that run as Python UDFs (serving/broker/store/udfs.py), one line each:

| Druid | UDF |
| --- | --- |
| ``IPV4_MATCH(address, subnet)`` | ``DRUID_IPV4_MATCH`` (an address as dotted text or a LONG, never text of digits; false when not one; the subnet a CIDR literal) |
| ``IPV4_PARSE(address)`` / ``IPV4_STRINGIFY(address)`` | ``DRUID_IPV4_PARSE`` / ``DRUID_IPV4_STRINGIFY`` (dotted text or a LONG in range; NULL when not an address) |
| ``IPV6_MATCH(address, subnet)`` | ``DRUID_IPV6_MATCH`` |
| ``HUMAN_READABLE_BINARY_BYTE_FORMAT`` / ``…_DECIMAL_BYTE_FORMAT`` / ``…_DECIMAL_FORMAT(value[, precision])`` | ``DRUID_HUMAN_READABLE`` |
| ``BITWISE_CONVERT_DOUBLE_TO_LONG_BITS(x)`` / ``BITWISE_CONVERT_LONG_BITS_TO_DOUBLE(x)`` | ``DRUID_DOUBLE_TO_LONG_BITS`` / ``DRUID_LONG_BITS_TO_DOUBLE`` |
| ``STRING_FORMAT(pattern, args…)`` | ``DRUID_STRING_FORMAT`` (Druid's non-strict String.format, radstack/java_format.py; arguments passed as a JSON array, a timestamp as its millis) |
| ``DECODE_BASE64_UTF8(s)`` | ``DRUID_DECODE_BASE64_UTF8`` (Java's Base64 decoder: padding optional; bytes that are not UTF-8 become U+FFFD) |
| ``PARSE_LONG(s, radix)`` | ``DRUID_PARSE_LONG`` (Java's Long.parseLong; base 10 is a strict ``TRY_CAST``, rules/strings.py) |
"""

from __future__ import annotations

import re

from sqlglot import exp

from radstack.expressions.functions import ipv4_subnet
from radstack.sql_text import ExpressionError
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name, call_args
from serving.broker.sql.timeexpr import call, to_millis
from serving.broker.sql.translation_context import TranslationContext
from serving.broker.sql.type_rules import is_integer, is_text, is_timestamp

#: Druid name → (UDF, argument counts, how each argument is passed)
_SIMPLE = {
    "IPV6_MATCH": ("DRUID_IPV6_MATCH", (2,), ("VARCHAR", "VARCHAR")),
    "BITWISE_CONVERT_DOUBLE_TO_LONG_BITS": ("DRUID_DOUBLE_TO_LONG_BITS", (1,), ("DOUBLE",)),
    "BITWISE_CONVERT_LONG_BITS_TO_DOUBLE": ("DRUID_LONG_BITS_TO_DOUBLE", (1,), ("BIGINT",)),
    "DECODE_BASE64_UTF8": ("DRUID_DECODE_BASE64_UTF8", (1,), ("VARCHAR",)),
}
_PLAIN_PATTERN = re.compile(r"(?:[^%]|%s|%%)*")
#: Druid name → its UDF (the address is typed by the rule: _ipv4)
_IPV4 = {"IPV4_MATCH": "DRUID_IPV4_MATCH", "IPV4_PARSE": "DRUID_IPV4_PARSE", "IPV4_STRINGIFY": "DRUID_IPV4_STRINGIFY"}
_MAX_IPV4 = 4294967295
_HUMAN = {"HUMAN_READABLE_BINARY_BYTE_FORMAT": "binary", "HUMAN_READABLE_DECIMAL_BYTE_FORMAT": "decimal_byte",
          "HUMAN_READABLE_DECIMAL_FORMAT": "decimal"}


def scalar_udfs(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    name = anonymous_name(node)
    if name in _IPV4:
        return _ipv4(name, node, ctx)
    if name in _SIMPLE:
        udf, counts, types = _SIMPLE[name]
        args = call_args(node, counts, name)
        ctx.udfs.add(udf)
        return call(udf, *(exp.cast(a, t) for a, t in zip(args, types, strict=False)))
    if name == "STRING_FORMAT":
        args = list(node.expressions)
        if not args:
            raise validation_error("STRING_FORMAT takes a pattern and its arguments")
        pattern = args[0]
        if len(args) == 1:  # no argument: Druid answers the pattern unformatted ('100%%' stays)
            return exp.cast(pattern, "VARCHAR")
        args = [to_millis(a) if is_timestamp(a) else a for a in args]  # __time is a long in Druid
        text = str(pattern.this) if isinstance(pattern, exp.Literal) and pattern.is_string else None
        if (text is not None and _PLAIN_PATTERN.fullmatch(text) and text.replace("%%", "").count("%s") == len(args) - 1
                and all(is_text(a) or is_integer(a) for a in args[1:])):
            # only %s over text and integers: DuckDB's printf writes them as Java does, in native code
            texts = [exp.Coalesce(this=exp.cast(a, "VARCHAR"), expressions=[exp.Literal.string("null")])
                     for a in args[1:]]
            return call("PRINTF", pattern, *texts)
        ctx.udfs.add("DRUID_STRING_FORMAT")
        values = call("JSON_ARRAY", *args[1:]) if len(args) > 1 else exp.Literal.string("[]")
        return call("DRUID_STRING_FORMAT", exp.cast(args[0], "VARCHAR"), exp.cast(values, "VARCHAR"))
    if name == "PARSE_LONG":
        args = call_args(node, (1, 2), name)
        if len(args) == 2:
            ctx.udfs.add("DRUID_PARSE_LONG")
            return call("DRUID_PARSE_LONG", exp.cast(args[0], "VARCHAR"), exp.cast(args[1], "INTEGER"))
        return node  # base 10: rules/strings.py
    if name in _HUMAN:
        args = call_args(node, (1, 2), name)
        ctx.udfs.add("DRUID_HUMAN_READABLE")
        precision = exp.cast(args[1], "INTEGER") if len(args) > 1 else exp.Literal.number(2)
        value = exp.TryCast(this=args[0], to=exp.DataType.build("BIGINT"))
        return call("DRUID_HUMAN_READABLE", value, precision, exp.Literal.string(_HUMAN[name]))
    return node


def _ipv4(name: str, node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    """Druid reads an address as dotted text or as a LONG (0 … 2^32-1); text of digits is no address."""
    args = call_args(node, (2,) if name == "IPV4_MATCH" else (1,), name)
    address = args[0]
    if is_integer(address):
        in_range = exp.Between(this=address.copy(), low=exp.Literal.number(0), high=exp.Literal.number(_MAX_IPV4))
        if name == "IPV4_PARSE":
            return exp.Case(ifs=[exp.If(this=in_range, true=exp.cast(address, "BIGINT"))])
        text = exp.Case(ifs=[exp.If(this=in_range, true=exp.cast(address, "VARCHAR"))])
    else:
        text = exp.cast(address, "VARCHAR")
        digits = call("REGEXP_FULL_MATCH", text.copy(), exp.Literal.string("[0-9]+"))
        text = exp.Case(ifs=[exp.If(this=digits, true=exp.cast(exp.null(), "VARCHAR"))], default=text)
    udf = _IPV4[name]
    ctx.udfs.add(udf)
    if name != "IPV4_MATCH":
        return call(udf, text)
    subnet = args[1]
    if not (isinstance(subnet, exp.Literal) and subnet.is_string) and not isinstance(subnet, exp.Null):
        raise validation_error("Function[ipv4_match] subnet argument must be a literal")
    try:
        ipv4_subnet(None if isinstance(subnet, exp.Null) else str(subnet.this))
    except ExpressionError as e:
        raise validation_error(str(e)) from e
    return call(udf, text, subnet)


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = scalar_udfs
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = ()
#: anonymous calls it also reads though another rule translates them
READS = frozenset({'PARSE_LONG'})
ACCEPTS = frozenset(_SIMPLE) | frozenset(_IPV4) | frozenset(_HUMAN) | {"STRING_FORMAT"}
EMITS = frozenset({udf for udf, _, _ in _SIMPLE.values()} | set(_IPV4.values())
                  | {"DRUID_HUMAN_READABLE", "DRUID_PARSE_LONG", "DRUID_STRING_FORMAT", "JSON_ARRAY", "PRINTF",
                     "REGEXP_FULL_MATCH", "EPOCH_MS"})
