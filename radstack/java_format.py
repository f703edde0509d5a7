"""Java's ``String.format`` as Druid's ``STRING_FORMAT`` runs it (``StringUtils.nonStrictFormat``).

Druid's expression values are longs, doubles, strings and NULL (a boolean is the long 1 or 0), and Java's
``Formatter`` checks each conversion against its argument's class: ``%d``/``%x``/``%o`` take a long, not a
double; ``%f``/``%e``/``%g`` a double, not a long; ``%c`` no long at all. When the pattern is refused
(a conversion that does not fit its argument, a missing argument, an unknown conversion, flags that do not
go together), Druid answers the pattern followed by each argument after ``"; "`` instead of failing; with
no argument at all the pattern comes back as it is, unformatted.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal

from radstack.java_numbers import java_double

Value = int | float | str | None

_SPEC = re.compile(r"%(?:(\d+)\$)?([-#+ 0,(<]*)(\d+)?(?:\.(\d+))?([tT]?[a-zA-Z%])")
_INTEGRAL = "doxX"
_FLOATING = "eEfgGaA"


class IllegalFormat(ValueError):
    """Java's ``IllegalFormatException``: the pattern does not fit its arguments."""


def java_string(value: Value) -> str:
    """``String.valueOf`` of a Druid expression value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return java_double(value)
    return str(value)


def non_strict_format(pattern: str, args: Sequence[Value]) -> str:
    """``StringUtils.nonStrictFormat``: ``String.format(Locale.ENGLISH, …)``, or, when Java refuses the
    pattern, the pattern and its arguments joined by ``"; "``."""
    if not args:
        return pattern
    values = [int(a) if isinstance(a, bool) else a for a in args]
    try:
        return java_format(pattern, values)
    except IllegalFormat:
        return "".join([pattern, *("; " + java_string(a) for a in values)])


def java_format(pattern: str, args: Sequence[Value]) -> str:
    """``String.format`` of longs, doubles, strings and NULLs; raises :class:`IllegalFormat` where Java
    throws ``IllegalFormatException``."""
    out: list[str] = []
    at, ordinary, last = 0, 0, -1
    for m in _SPEC.finditer(pattern):
        out.append(_literal(pattern[at:m.start()]))
        at = m.end()
        index, flags, width, precision, conversion = m.groups()
        if conversion in ("%", "n"):
            if precision is not None or index is not None:
                raise IllegalFormat(conversion)
            text = "%" if conversion == "%" else "\n"
            out.append(_pad(text, flags, width) if conversion == "%" else text)
            continue
        if "<" in flags:
            position = last
        elif index is not None:
            position = int(index) - 1
        else:
            position = ordinary
            ordinary += 1
        if not 0 <= position < len(args):
            raise IllegalFormat(f"missing argument for %{conversion}")
        last = position
        out.append(_convert(args[position], flags.replace("<", ""), width, precision, conversion))
    out.append(_literal(pattern[at:]))
    return "".join(out)


def _literal(text: str) -> str:
    if "%" in text:  # a '%' that starts no conversion Java knows
        raise IllegalFormat(text)
    return text


def _check_flags(flags: str, width: str | None, allowed: str) -> None:
    if any(f not in allowed for f in flags) or len(set(flags)) != len(flags):
        raise IllegalFormat(flags)
    if ("-" in flags or "0" in flags) and width is None:
        raise IllegalFormat("missing width")
    if ("-" in flags and "0" in flags) or ("+" in flags and " " in flags):
        raise IllegalFormat(flags)


def _pad(text: str, flags: str, width: str | None) -> str:
    if width is None:
        return text
    return text.ljust(int(width)) if "-" in flags else text.rjust(int(width))


def _convert(value: Value, flags: str, width: str | None, precision: str | None, conversion: str) -> str:
    c = conversion.lower()
    upper = conversion[0].isupper()
    if c.startswith("t"):
        raise IllegalFormat("date/time conversions are not supported")
    if c in "bsh":
        _check_flags(flags, width, "-")
        if c == "b":
            text = "false" if value is None else "true"
        elif c == "h":
            text = "null" if value is None else format(_java_hash(value), "x")
        else:
            text = java_string(value)
        if precision is not None:
            text = text[: int(precision)]
        text = _pad(text, flags, width)
        return text.upper() if upper else text
    if c == "c":
        _check_flags(flags, width, "-")
        if precision is not None:
            raise IllegalFormat("precision")
        if value is not None:
            raise IllegalFormat("%c takes a character")  # a long is not a char in Java's Formatter
        return _pad("NULL" if upper else "null", flags, width)
    if value is None:  # "null", cut to the precision (which an integral conversion never takes)
        _check_flags(flags, width, "-#+ 0,(")
        if precision is not None and c in "dox":
            raise IllegalFormat("precision")
        text = "null" if precision is None else "null"[: int(precision)]
        return _pad(text.upper() if upper else text, flags, width)
    if c in "dox" and conversion in _INTEGRAL:
        if not isinstance(value, int):
            raise IllegalFormat(f"%{conversion} takes an integer")
        return _integral(value, flags, width, precision, conversion)
    if conversion in _FLOATING:
        if not isinstance(value, float):
            raise IllegalFormat(f"%{conversion} takes a floating-point number")
        return _floating(value, flags, width, precision, conversion)
    raise IllegalFormat(f"unknown conversion %{conversion}")


def _java_hash(value: int | float | str) -> int:
    if isinstance(value, str):
        data, h = value.encode("utf-16-le"), 0
        for i in range(0, len(data), 2):  # String.hashCode over UTF-16 code units
            h = (31 * h + int.from_bytes(data[i:i + 2], "little")) & 0xFFFFFFFF
        return h
    if isinstance(value, float):
        bits = struct.unpack("<q", struct.pack("<d", value))[0] & 0xFFFFFFFFFFFFFFFF
    else:
        bits = value & 0xFFFFFFFFFFFFFFFF
    return (bits ^ (bits >> 32)) & 0xFFFFFFFF


def _integral(value: int, flags: str, width: str | None, precision: str | None, conversion: str) -> str:
    if precision is not None:
        raise IllegalFormat("precision")
    if conversion == "d":
        _check_flags(flags, width, "-+ 0,(")
        digits = f"{abs(value):,}" if "," in flags else str(abs(value))
        return _signed(digits, value < 0, flags, width)
    _check_flags(flags, width, "-#0")
    unsigned = value & 0xFFFFFFFFFFFFFFFF
    digits = format(unsigned, "o" if conversion == "o" else "x")
    if "#" in flags:
        digits = ("0" if conversion == "o" else "0x") + digits
    if conversion == "X":
        digits = digits.upper()
    if "0" in flags and width is not None:
        digits = digits.rjust(int(width), "0")
    return _pad(digits, flags, width)


def _signed(digits: str, negative: bool, flags: str, width: str | None) -> str:
    if negative:
        prefix, suffix = ("(", ")") if "(" in flags else ("-", "")
    else:
        prefix, suffix = ("+" if "+" in flags else " " if " " in flags else ""), ""
    if "0" in flags and width is not None:
        digits = digits.rjust(int(width) - len(prefix) - len(suffix), "0")
    return _pad(prefix + digits + suffix, flags, width)


def _floating(value: float, flags: str, width: str | None, precision: str | None, conversion: str) -> str:
    c = conversion.lower()
    _check_flags(flags, width, "-#+ 0,(" if c in "fg" else "-#+ 0(")
    if math.isnan(value) or math.isinf(value):
        text = "NaN" if math.isnan(value) else ("-Infinity" if value < 0 else ("+" if "+" in flags else "") + "Infinity")
        return _pad(text.upper() if conversion.isupper() else text, flags, width)
    if c == "a":
        mantissa, exponent = float.hex(abs(value)).split("p")  # Double.toHexString: 0x1.8p1
        head, _, tail = mantissa.partition(".")
        text = f"{head}.{tail.rstrip('0') or '0'}p{int(exponent)}"
        return _signed(text, math.copysign(1.0, value) < 0, flags, width)
    digits = 6 if precision is None else int(precision)
    magnitude = Decimal(repr(abs(value)))  # Java formats the shortest decimal that reads as the double
    if c == "f":
        text = _fixed(magnitude, digits, "," in flags)
    elif c == "e":
        text = _scientific(magnitude, digits)
    else:  # %g: scientific outside 10^-4 <= x < 10^precision (after rounding), fixed inside
        digits = max(digits, 1)
        rounded = _round_significant(magnitude, digits)
        if rounded != 0 and (rounded < Decimal("0.0001") or rounded >= Decimal(10) ** digits):
            text = _scientific(magnitude, digits - 1)
        else:
            exponent = rounded.adjusted() if rounded != 0 else 0
            text = _fixed(magnitude, max(digits - 1 - exponent, 0), "," in flags)
    if conversion.isupper():
        text = text.upper()
    return _signed(text, math.copysign(1.0, value) < 0, flags, width)


def _fixed(magnitude: Decimal, digits: int, grouped: bool) -> str:
    q = magnitude.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{q:,f}" if grouped else f"{q:f}"


def _round_significant(magnitude: Decimal, digits: int) -> Decimal:
    if magnitude == 0:
        return magnitude
    return magnitude.quantize(Decimal(1).scaleb(magnitude.adjusted() - digits + 1), rounding=ROUND_HALF_UP)


def _scientific(magnitude: Decimal, digits: int) -> str:
    if magnitude == 0:
        mantissa, exponent = Decimal(0).quantize(Decimal(1).scaleb(-digits)), 0
    else:
        exponent = magnitude.adjusted()
        mantissa = (magnitude.scaleb(-exponent)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
        if mantissa >= 10:
            exponent += 1
            mantissa = (magnitude.scaleb(-exponent)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{mantissa:f}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
