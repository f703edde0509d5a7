"""Numbers as Druid (Java) writes them: ``Double.toString`` and ``Float.toString``."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np


def _java_from_digits(text: str, negative_zero: bool = False) -> str:
    d = Decimal(text)
    if d.is_zero():
        return "-0.0" if negative_zero else "0.0"
    sign, digits, exponent = d.as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    e10 = int(exponent) + len(digits) - 1  # exponent of the first digit
    neg = "-" if sign else ""
    if -3 <= e10 < 7:
        if e10 >= 0:
            whole = ds[: e10 + 1].ljust(e10 + 1, "0")
            frac = ds[e10 + 1:] or "0"
        else:
            whole, frac = "0", "0" * (-e10 - 1) + ds
        return f"{neg}{whole}.{frac}"
    mant = ds[0] + "." + (ds[1:] or "0")
    return f"{neg}{mant}E{e10}"


def java_double(x: float) -> str:
    """``Double.toString``: shortest digits, plain between 1e-3 and 1e7, else ``d.dddE±n``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return _java_from_digits(repr(float(x)), negative_zero=math.copysign(1.0, x) < 0)


def java_float(x: float) -> str:
    """``Float.toString`` for a FLOAT column value (shortest float32 digits)."""
    if math.isnan(x) or math.isinf(x):
        return java_double(x)
    return _java_from_digits(str(np.float32(x)), negative_zero=math.copysign(1.0, x) < 0)
