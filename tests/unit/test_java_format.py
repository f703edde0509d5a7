"""radstack/java_format.py against Druid 33's STRING_FORMAT answers (each asked of a local Druid 33 through
the differential corpus's probes) and Java's Formatter."""

from __future__ import annotations

from typing import Any

import pytest

from radstack.java_format import IllegalFormat, java_format, non_strict_format


@pytest.mark.parametrize(("pattern", "args", "out"), [
    ("%s:%d:%.2f", ["BR", 5, None], "BR:5:nu"),  # a NULL is "null", cut to the precision
    ("%s:%d:%.2f", ["DE", 3, 2.25], "DE:3:2.25"),
    ("%b|%c|%e|%%|%5.1f", [1, 65, None, None], "%b|%c|%e|%%|%5.1f; 1; 65; null; null"),  # %c of a long
    ("%d", [2.5], "%d; 2.5"),
    ("%s %s", ["x"], "%s %s; x"),
    ("100%%", [], "100%%"),  # no argument: the pattern itself
    ("%d|%s", [True, False], "1|0"),  # booleans are longs in Druid
    ("%x|%X|%o|%08d|%+d|%(d", [-1, 255, 8, 42, 5, -7], "ffffffffffffffff|FF|10|00000042|+5|(7)"),
    ("%2$s-%1$s|%s-%<s", ["a", "b"], "b-a|a-a"),
    ("%,.2f|%.0f|%f", [1234567.891, 2.5, 1e20], "1,234,567.89|3|100000000000000000000.000000"),
    ("%e|%g|%10.2e", [12345.678, 0.00012345, 1.5], "1.234568e+04|0.000123450|  1.50e+00"),
    ("%08.3f|%,d|%s", [2.25, 1234567, "x"], "0002.250|1,234,567|x"),
    ("%-6s|%6.2s|", ["DE", "DE"], "DE    |    DE|"),
    ("%s", [1e7], "1.0E7"),  # Double.toString
])
def test_as_druid_formats(pattern: str, args: list[Any], out: str) -> None:
    assert non_strict_format(pattern, args) == out


@pytest.mark.parametrize(("pattern", "args"), [
    ("%d", [1.5]), ("%f", [1]), ("%c", [65]), ("%s %s", ["a"]), ("%q", [1]), ("%-d", [1]), ("%.2d", [1]),
    ("%-05d", [1]), ("%+ d", [1]), ("%#s", ["a"]), ("%tY", [0]), ("50%", [1]),
])
def test_refused_where_java_refuses(pattern: str, args: list[Any]) -> None:
    with pytest.raises(IllegalFormat):
        java_format(pattern, args)
