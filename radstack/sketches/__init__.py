"""Apache DataSketches metrics: HLL, theta and quantiles sketches built at ingestion, merged on rollup,
compaction and query, in the binary formats Druid's ``druid-datasketches`` extension stores.

The same library (the ``datasketches`` package: the C++ DataSketches, binary-compatible with the Java
one Druid uses, same MurmurHash3 seed) builds every sketch, so for the same input strings, ``lgK`` and
type an HLL or theta estimate equals Druid's.

========================= ====================== ===========================================
metric type               family                 parameters (Druid's defaults)
========================= ====================== ===========================================
``HLLSketchBuild``        ``HLLSketch``          ``lgK`` (12, 4–21), ``tgtHllType`` (HLL_4)
``HLLSketchMerge``        ``HLLSketch``          the same; the input is HLL sketches
``thetaSketch``           ``thetaSketch``        ``size`` (16384, a power of 2), ``isInputThetaSketch``
``quantilesDoublesSketch`` ``quantilesDoublesSketch`` ``k`` (128, a power of 2, 2–32768)
========================= ====================== ===========================================

Input values: strings (numbers as their text — Druid hashes a numeric column's value as a number, so
estimates over numeric inputs can differ from Druid's) for HLL and theta, numbers for quantiles; NULLs
are skipped; a row without values holds an empty sketch, as in Druid.

Hashing strings as Druid does: theta sketches hash a string's UTF-8 bytes; HLL sketches hash its
UTF-16LE code units by default (Druid's ``stringEncoding: utf16le``; ``utf8`` is the alternative). The
Python binding hashes only UTF-8 strings, so an ASCII string is handed over as the ASCII text of its
UTF-16LE bytes — the same bytes, the same hash as Druid's. A string with other characters cannot be
expressed that way and is hashed as UTF-8: counted consistently here, but not bit-for-bit Druid's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import datasketches as ds

# The vectorised merges (hll_merge.py, theta_merge.py) need numpy and pyarrow, which the Airflow
# environment (it imports this package through the specs) does not have: import them from their modules.

__all__ = [
    "SKETCH_METRICS",
    "SketchParams",
    "SketchParamError",
    "aggregate",
    "count",
    "estimate",
    "family_of",
    "parse_params",
    "quantile",
    "registers_only",
    "theta_set_operation",
]

#: metric type → the sketch family Druid names its complex column after
SKETCH_METRICS: dict[str, str] = {
    "HLLSketchBuild": "HLLSketch",
    "HLLSketchMerge": "HLLSketch",
    "thetaSketch": "thetaSketch",
    "quantilesDoublesSketch": "quantilesDoublesSketch",
}
HLL_TYPES = ("HLL_4", "HLL_6", "HLL_8")


class SketchParamError(ValueError):
    """A bad sketch parameter: ``field`` and what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class SketchParams:
    """A sketch metric's family and sizes."""

    family: str  # HLLSketch | thetaSketch | quantilesDoublesSketch
    lg_k: int = 12  # HLL: log2 of the registers; theta: log2 of size
    tgt_hll_type: str = "HLL_4"
    k: int = 128  # quantiles
    string_encoding: str = "utf16le"  # HLL: how strings are hashed (Druid's stringEncoding)

    def to_json(self) -> dict[str, Any]:
        """The parameters in Druid's field names (what the metric's JSON carries)."""
        if self.family == "HLLSketch":
            out: dict[str, Any] = {"lgK": self.lg_k, "tgtHllType": self.tgt_hll_type}
            if self.string_encoding != "utf16le":
                out["stringEncoding"] = self.string_encoding
            return out
        if self.family == "thetaSketch":
            return {"size": 1 << self.lg_k}
        return {"k": self.k}


def _int(raw: Mapping[str, Any], key: str, default: int, lo: int, hi: int, power_of_two: bool = False) -> int:
    v = raw.get(key, default)
    if v is None:
        v = default
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi or (power_of_two and v & (v - 1)):
        kind = "a power of 2 " if power_of_two else "an integer "
        raise SketchParamError(key, f"expected {kind}from {lo} to {hi}, got {v!r}")
    return v


def parse_params(metric_type: str, raw: Mapping[str, Any]) -> SketchParams:
    """The sketch parameters of a metric's JSON (Druid's field names and defaults)."""
    family = SKETCH_METRICS[metric_type]
    if family == "HLLSketch":
        tgt = str(raw.get("tgtHllType") or "HLL_4").upper()
        if tgt not in HLL_TYPES:
            raise SketchParamError("tgtHllType", f"one of {', '.join(HLL_TYPES)}, got {raw.get('tgtHllType')!r}")
        enc = str(raw.get("stringEncoding") or "utf16le").lower()
        if enc not in ("utf16le", "utf8"):
            raise SketchParamError("stringEncoding", f"utf16le or utf8, got {raw.get('stringEncoding')!r}")
        return SketchParams(family, lg_k=_int(raw, "lgK", 12, 4, 21), tgt_hll_type=tgt, string_encoding=enc)
    if family == "thetaSketch":
        size = _int(raw, "size", 16384, 16, 1 << 26, power_of_two=True)
        return SketchParams(family, lg_k=size.bit_length() - 1)
    return SketchParams(family, k=_int(raw, "k", 128, 2, 32768, power_of_two=True))


def _hll_type(params: SketchParams) -> Any:
    return getattr(ds.tgt_hll_type, params.tgt_hll_type)


def _text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def hll_key(v: Any, string_encoding: str) -> str:
    """The string handed to the HLL sketch so that it hashes Druid's bytes (see the module notes)."""
    text = _text(v)
    if string_encoding == "utf16le" and text.isascii():
        return text.encode("utf-16-le").decode("ascii")
    return text


# HLL preamble: byte 5 holds the flags, the low two bits of byte 7 the mode (0 list, 1 set, 2 HLL)
_HLL_FLAGS, _HLL_MODE, _HLL_MODE_HLL, _OUT_OF_ORDER = 5, 7, 2, 16


def registers_only(data: bytes) -> bytes:
    """An HLL-mode sketch marked out of order, so that its estimate comes from its registers alone.

    A sketch fed in one stream also carries the HIP estimate, which depends on the order the values
    (or the small list/set-mode sketches of a merge) arrived in. Rows reach an aggregate in whatever
    order DuckDB's threads or Spark's tasks deliver them, so that estimate would change from run to run
    and between SQL and native queries. The registers are the same in any order. Druid's estimate of a
    merge of HLL-mode sketches is this composite estimate too (a union marks its result out of order).
    List/set-mode sketches count their coupons exactly and need no mark.
    """
    if len(data) <= _HLL_MODE or data[_HLL_MODE] & 3 != _HLL_MODE_HLL:
        return data
    marked = bytearray(data)
    marked[_HLL_FLAGS] |= _OUT_OF_ORDER
    return bytes(marked)


def aggregate(params: SketchParams, values: Iterable[Any], *, sketches: bool) -> bytes:
    """One sketch from ``values``: raw input values, or (``sketches``) serialized sketches to merge."""
    items = [v for v in values if v is not None]
    if params.family == "HLLSketch":
        if sketches:
            union = ds.hll_union(params.lg_k)
            for b in items:
                union.update(ds.hll_sketch.deserialize(bytes(b)))
            return registers_only(bytes(union.get_result(_hll_type(params)).serialize_compact()))
        hll = ds.hll_sketch(params.lg_k, _hll_type(params))
        for v in items:
            hll.update(hll_key(v, params.string_encoding))
        return registers_only(bytes(hll.serialize_compact()))
    if params.family == "thetaSketch":
        if sketches:
            theta_union = ds.theta_union(params.lg_k)
            for b in items:
                theta_union.update(ds.compact_theta_sketch.deserialize(bytes(b)))
            return bytes(theta_union.get_result().serialize())
        theta = ds.update_theta_sketch(params.lg_k)
        for v in items:
            theta.update(_text(v))
        return bytes(theta.compact().serialize())
    q = ds.quantiles_doubles_sketch(params.k)
    for v in items:
        if sketches:
            q.merge(ds.quantiles_doubles_sketch.deserialize(bytes(v)))
        else:
            try:
                q.update(float(v))
            except (TypeError, ValueError):
                continue
    return bytes(q.serialize())


def family_of(data: bytes) -> str:
    """Which family a serialized sketch belongs to (from its preamble's family id)."""
    fam = data[2] if len(data) > 2 else -1
    if fam == 7:
        return "HLLSketch"
    if fam == 8:
        return "quantilesDoublesSketch"
    return "thetaSketch"


def estimate(data: bytes | None) -> float | None:
    """The distinct-count estimate of a serialized HLL or theta sketch."""
    if data is None:
        return None
    b = bytes(data)
    if family_of(b) == "HLLSketch":
        return float(ds.hll_sketch.deserialize(b).get_estimate())
    return float(ds.compact_theta_sketch.deserialize(b).get_estimate())


def count(data: bytes | None) -> int | None:
    """How many values a serialized quantiles sketch has seen (Druid finalizes the aggregator to it)."""
    if data is None:
        return None
    return int(ds.quantiles_doubles_sketch.deserialize(bytes(data)).n)


def quantile(data: bytes | None, fraction: float) -> float | None:
    """The value at ``fraction`` (0–1) of a serialized quantiles sketch (NaN when it saw no value, as in
    Druid; NULL without a sketch)."""
    if data is None:
        return None
    sk = ds.quantiles_doubles_sketch.deserialize(bytes(data))
    if sk.is_empty():
        return math.nan
    return float(sk.get_quantile(fraction))


def theta_set_operation(op: str, sketches: Iterable[bytes | None], lg_k: int) -> bytes:
    """``UNION``, ``INTERSECT`` or ``NOT`` (the first minus the others) of serialized theta sketches."""
    items = [ds.compact_theta_sketch.deserialize(bytes(b)) for b in sketches if b is not None]
    if op == "UNION" or not items:
        union = ds.theta_union(lg_k)
        for s in items:
            union.update(s)
        return bytes(union.get_result().serialize())
    if op == "INTERSECT":
        inter = ds.theta_intersection()
        for s in items:
            inter.update(s)
        return bytes(inter.get_result().serialize())
    result = items[0]
    a_not_b = ds.theta_a_not_b()
    for s in items[1:]:
        result = a_not_b.compute(result, s)
    return bytes(result.serialize())
