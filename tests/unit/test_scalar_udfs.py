"""Druid's scalar functions that run as UDFs (serving/broker/sql/rules/scalar_udfs.py), through SQL on
the real broker. Expected values from Druid's own tests (``HUMAN_READABLE_*``: rounded half up, as Druid 33
answers in the differential corpus — its docs' "1.04 MB" for 1048576 is not what it answers) and Java."""

from __future__ import annotations

from typing import Any

import pytest

from serving.errors import DruidError
from tests.unit.test_sql_execution import run


def one(env: Any, expr: str) -> Any:
    return run(env, f"SELECT {expr} FROM wiki LIMIT 1")[1][0][0]


@pytest.mark.parametrize(("expr", "value"), [
    ("HUMAN_READABLE_BINARY_BYTE_FORMAT(1048576)", "1.00 MiB"),
    ("HUMAN_READABLE_DECIMAL_BYTE_FORMAT(1048576)", "1.05 MB"),
    ("HUMAN_READABLE_DECIMAL_FORMAT(1048576)", "1.05 M"),
    ("HUMAN_READABLE_BINARY_BYTE_FORMAT(45000, 0)", "44 KiB"),
    ("HUMAN_READABLE_BINARY_BYTE_FORMAT(45000, 1)", "43.9 KiB"),
    ("HUMAN_READABLE_BINARY_BYTE_FORMAT(45000)", "43.95 KiB"),
    ("HUMAN_READABLE_BINARY_BYTE_FORMAT(45000, 3)", "43.945 KiB"),
    ("HUMAN_READABLE_DECIMAL_BYTE_FORMAT(45678, 0)", "46 KB"),
    ("HUMAN_READABLE_DECIMAL_BYTE_FORMAT(45678, 1)", "45.7 KB"),
    ("HUMAN_READABLE_DECIMAL_BYTE_FORMAT(1024)", "1.02 KB"),
    ("HUMAN_READABLE_BINARY_BYTE_FORMAT(9223372036854775807)", "8.00 EiB"),
    ("HUMAN_READABLE_BINARY_BYTE_FORMAT(1023)", "1023 B"),
    ("HUMAN_READABLE_DECIMAL_FORMAT(-1500, 1)", "-1.5 K"),
    ("IPV4_PARSE('10.0.0.1')", 167772161),
    ("IPV4_PARSE('not an address')", None),
    ("IPV4_STRINGIFY(167772161)", "10.0.0.1"),
    ("IPV4_MATCH('192.168.0.5', '192.168.0.0/28')", True),
    ("IPV4_MATCH(3232235525, '192.168.0.0/28')", True),
    ("IPV4_MATCH('192.168.1.5', '192.168.0.0/28')", False),
    ("IPV6_MATCH('2001:db8::5', '2001:db8::/120')", True),
    ("IPV6_MATCH('10.0.0.1', '2001:db8::/120')", False),
    ("BITWISE_CONVERT_DOUBLE_TO_LONG_BITS(1.0)", 4607182418800017408),
    ("BITWISE_CONVERT_LONG_BITS_TO_DOUBLE(4607182418800017408)", 1.0),
    ("STRING_FORMAT('%s/%d/%.2f/%5s|', 'a', 7, 1.5, 'b')", "a/7/1.50/    b|"),
    ("STRING_FORMAT('%s %s', 'x', NULL)", "x null"),
    ("PARSE_LONG('ff', 16)", 255),
    ("PARSE_LONG('zz', 10)", None),
    ("SCALAR_IN_ARRAY('b', ARRAY['a', 'b'])", True),
    # Druid 33's answers (the differential corpus's calcite_cases): Java's Formatter, non-strict
    ("STRING_FORMAT('%d', 2.5)", "%d; 2.5"),  # %d of a double: the pattern and its arguments
    ("STRING_FORMAT('%s %s', 'x')", "%s %s; x"),  # a missing argument
    ("STRING_FORMAT('100%%')", "100%%"),  # no argument: the pattern as it is
    ("STRING_FORMAT('%d|%s', 5 > 3, 5 < 3)", "1|0"),  # a boolean is a long
    ("STRING_FORMAT('%x|%X|%o|%08d|%+d|%(d', -1, 255, 8, 42, 5, -7)", "ffffffffffffffff|FF|10|00000042|+5|(7)"),
    ("STRING_FORMAT('%2$s-%1$s|%s-%<s', 'a', 'b')", "b-a|a-a"),
    ("STRING_FORMAT('%,.2f|%.0f|%f', 1234567.891, 2.5, 1e20)", "1,234,567.89|3|100000000000000000000.000000"),
    ("STRING_FORMAT('%e|%g|%10.2e', 12345.678, 0.00012345, 1.5)", "1.234568e+04|0.000123450|  1.50e+00"),
    ("STRING_FORMAT('%c', 65)", "%c; 65"),  # a long is no char to Java
    ("STRING_FORMAT('%s', TIMESTAMP '2026-01-01 00:00:00')", "1767225600000"),  # __time is a long
    ("IPV4_PARSE(167772161)", 167772161),
    ("IPV4_PARSE(4294967296)", None),
    ("IPV4_STRINGIFY('167772161')", None),  # text of digits is no address
    ("IPV4_MATCH('167772161', '10.0.0.0/8')", False),
    # Druid's parser (inet.ipaddr): leading zeros, and a segment range (its lowest address)
    ("IPV4_PARSE('010.0.0.1')", 167772161),
    ("IPV4_PARSE('10.0.0.-15')", 167772160),
    ("IPV4_PARSE('10.0.0.375')", None),
    ("IPV4_STRINGIFY('10.0.0.-15')", "10.0.0.-15"),
    ("IPV4_MATCH('10.0.0.-15', '10.0.0.0/24')", True),
    ("PARSE_LONG(' 12')", None),
    ("PARSE_LONG('+12')", 12),
    ("PARSE_LONG('1.5')", None),
    ("PARSE_LONG('1_000')", None),
    ("PARSE_LONG('-0x1A', 16)", None),
    ("PARSE_LONG('0X1a', 16)", 26),
    ("POSITION('a' IN 'banana' FROM -3)", 2),
    ("POSITION('a' IN 'banana' FROM 0)", 2),
    ("POSITION('a' IN 'banana' FROM 10)", 0),
    ("POSITION('' IN 'banana' FROM 9)", 7),
    ("MV_TO_STRING(ARRAY_TO_MV(ARRAY[1, 2]), '|')", "1|2"),
])
def test_scalar_functions(wiki: Any, expr: str, value: Any) -> None:
    assert one(wiki, expr) == value


@pytest.mark.parametrize(("expr", "message"), [
    ("IPV4_MATCH('10.0.0.1', '10.0.0.0/33')", "Function[ipv4_match] subnet arg has an invalid format: 10.0.0.0/33"),
    ("IPV4_MATCH('10.0.0.1', '10.0.0.0')", "Function[ipv4_match] subnet arg has an invalid format: 10.0.0.0"),
    ("IPV4_MATCH('10.0.0.1', NULL)", "Function[ipv4_match] subnet arg has an invalid format: null"),
    ("IPV4_MATCH('10.0.0.1', channel)", "Function[ipv4_match] subnet argument must be a literal"),
])
def test_refused_as_druid_refuses(wiki: Any, expr: str, message: str) -> None:
    """Druid 33 refuses these (with a 500, its bug); radstack with the same message as a 400."""
    with pytest.raises(DruidError) as caught:
        one(wiki, expr)
    assert caught.value.status == 400 and caught.value.message == message
