"""Python UDFs for the Druid functions DuckDB has no exact equivalent for (period floors with origins
or odd periods, zoned shifts, Joda formatting and parsing, JSON_PATHS, IP addresses, human-readable
sizes, double ↔ long bits). Registered once per database."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
import struct
import threading
from collections.abc import Callable, Iterator
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache, partial
from typing import Any

import duckdb
import pyarrow as pa

from radstack.java_format import non_strict_format
from radstack.java_numbers import java_double, java_float
from radstack.sketches import (
    SketchParams,
    aggregate,
    count,
    estimate,
    quantile,
    theta_set_operation,
)
from radstack.sketches.hll_merge import merge_hll_lists
from radstack.sketches.theta_merge import merge_theta_lists
from radstack.time.granularity import Granularity
from radstack.time.intervals import datetime_to_ms, ms_to_datetime
from radstack.time.joda import format_millis, parse_to_millis, zone

_lock = threading.Lock()
_registered: set[tuple[object, str]] = set()


@lru_cache(maxsize=512)
def _granularity(period: str, origin: int | None, tz: str | None) -> Granularity:
    spec: dict[str, Any] = {"type": "period", "period": period, "timeZone": tz or "UTC"}
    if origin is not None:
        spec["origin"] = origin
    return Granularity.parse(spec)


def time_floor(ms: int | None, period: str, origin: int | None, tz: str | None) -> int | None:
    if ms is None:
        return None
    return _granularity(period, origin, tz).bucket_start(ms)


def time_ceil(ms: int | None, period: str, origin: int | None, tz: str | None) -> int | None:
    if ms is None:
        return None
    g = _granularity(period, origin, tz)
    start = g.bucket_start(ms)
    return ms if start == ms else g.next_start(start)


def time_shift(ms: int | None, period: str, step: int | None, tz: str | None) -> int | None:
    if ms is None or step is None:
        return None
    g = _granularity(period, None, tz)
    assert g.period is not None
    dt = ms_to_datetime(ms).astimezone(zone(tz))
    return datetime_to_ms(g.period.add_to(dt, int(step)))


def time_format(ms: int | None, pattern: str | None, tz: str | None) -> str | None:
    return None if ms is None else format_millis(ms, pattern, tz or "UTC")


def time_parse(text: str | None, pattern: str | None, tz: str | None) -> int | None:
    if text is None:
        return None
    try:
        return parse_to_millis(text, pattern, tz or "UTC")
    except (ValueError, OverflowError):
        return None


_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _paths(value: Any, prefix: str) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            key = f".{k}" if _SIMPLE_KEY.match(k) else "['" + k.replace("'", "\\'") + "']"
            yield from _paths(v, prefix + key)
    elif isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        for i, v in enumerate(value):
            yield from _paths(v, f"{prefix}[{i}]")
    else:
        yield prefix


def json_paths(text: str | None) -> list[str]:
    """Druid's JSON_PATHS: the JSONPath of every literal (or array of literals) in a JSON document; a
    NULL, or anything that is not an object or array, is one literal at ``$`` (Druid 33)."""
    if text is None:
        return ["$"]
    try:
        doc = json.loads(text)
    except ValueError:
        return ["$"]
    return list(_paths(doc, "$"))


def hll_build(values: list[Any] | None, lg_k: int | None, tgt: str | None) -> bytes:
    params = SketchParams("HLLSketch", lg_k=int(lg_k or 12), tgt_hll_type=tgt or "HLL_4")
    return aggregate(params, values or (), sketches=False)


def _per_setting(lists: pa.Array, singles: pa.Array | None, settings: list[tuple[Any, ...]],
                 merge: Callable[[pa.Array, pa.Array | None, tuple[Any, ...]], list[bytes | None]]) -> pa.Array:
    """``merge`` over the rows of a batch that share one setting (the UDF's literal arguments: in
    practice one per query), answers put back in row order."""
    out: list[bytes | None] = [None] * len(lists)
    for setting in set(settings):
        rows = [i for i, s in enumerate(settings) if s == setting]
        if len(rows) == len(lists):
            part, part_singles = lists, singles
        else:
            taken = pa.array(rows)
            part, part_singles = lists.take(taken), None if singles is None else singles.take(taken)
        for i, merged in zip(rows, merge(part, part_singles, setting), strict=True):
            out[i] = merged
    return pa.array(out, pa.binary())


def _hll_merge(lists: pa.Array, singles: pa.Array | None, lg_k: pa.Array, tgt: pa.Array) -> pa.Array:
    def merge(part: pa.Array, part_singles: pa.Array | None, setting: tuple[Any, ...]) -> list[bytes | None]:
        params = SketchParams("HLLSketch", lg_k=setting[0], tgt_hll_type=setting[1])
        return merge_hll_lists(part, params.lg_k, params.tgt_hll_type, partial(aggregate, params, sketches=True),
                               part_singles)
    settings = [(int(k or 12), str(t or "HLL_4")) for k, t in zip(lg_k.to_pylist(), tgt.to_pylist(), strict=True)]
    return _per_setting(lists, singles, settings, merge)


def _theta_merge(lists: pa.Array, singles: pa.Array | None, size: pa.Array) -> pa.Array:
    def merge(part: pa.Array, part_singles: pa.Array | None, setting: tuple[Any, ...]) -> list[bytes | None]:
        params = SketchParams("thetaSketch", lg_k=setting[0])
        return merge_theta_lists(part, params.lg_k, partial(aggregate, params, sketches=True), part_singles)
    return _per_setting(lists, singles, [(int(v or 16384).bit_length() - 1,) for v in size.to_pylist()], merge)


def hll_merge_batch(lists: pa.Array, lg_k: pa.Array, tgt: pa.Array) -> pa.Array:
    """DRUID_HLL_MERGE over a whole batch of groups at once (radstack/sketches/hll_merge.py)."""
    return _hll_merge(lists, None, lg_k, tgt)


def hll_merge_singles_batch(lists: pa.Array, singles: pa.Array, lg_k: pa.Array, tgt: pa.Array) -> pa.Array:
    """DRUID_HLL_MERGE_SINGLES: the same, each group's one-coupon sketches given as their coupons
    (rules/sketch_singles.py)."""
    return _hll_merge(lists, singles, lg_k, tgt)


def theta_merge_batch(lists: pa.Array, size: pa.Array) -> pa.Array:
    """DRUID_THETA_MERGE over a whole batch of groups at once (radstack/sketches/theta_merge.py)."""
    return _theta_merge(lists, None, size)


def theta_merge_singles_batch(lists: pa.Array, singles: pa.Array, size: pa.Array) -> pa.Array:
    """DRUID_THETA_MERGE_SINGLES: the same, each group's single-hash sketches given as their hashes."""
    return _theta_merge(lists, singles, size)


def _sized(family: str, merge: bool) -> Callable[..., bytes]:
    def sketch(values: list[Any] | None, size: int | None) -> bytes:
        if family == "thetaSketch":
            params = SketchParams(family, lg_k=int(size or 16384).bit_length() - 1)
        else:
            params = SketchParams(family, k=int(size or 128))
        return aggregate(params, values or (), sketches=merge)
    return sketch


def theta_set_op(op: str | None, sketches: list[bytes | None] | None, size: int | None) -> bytes:
    """THETA_SKETCH_UNION / INTERSECT / NOT of serialized theta sketches."""
    return theta_set_operation(str(op), sketches or [], int(size or 16384).bit_length() - 1)


def quantiles(data: bytes | None, fractions: list[float] | None) -> list[float | None] | None:
    return None if data is None else [quantile(data, f) for f in fractions or []]


_IPV6_RANGE = re.compile(r"([0-9a-fA-F]{0,4})-([0-9a-fA-F]{1,4})")
_IPV4_SEGMENT = re.compile(r"([0-9]{1,3})|([0-9]{0,3})-([0-9]{1,3})|\*")


@lru_cache(maxsize=65536)  # a column's addresses repeat: each is parsed once
def _ipv4_span(text: str | None) -> tuple[int, int] | None:
    """The addresses ``text`` names as Druid's IPv4 parser (inet.ipaddr) reads it: its integer form
    (digits: how a LONG argument arrives), or four dotted segments, each a number (leading zeros allowed),
    a range ``a-b`` (``-15`` is ``0-15``) or ``*``; (lowest, highest), or None when it names none."""
    if text is None:
        return None
    t = text.strip()
    if t.isdigit():
        n = int(t)
        return (n, n) if n < 2**32 else None
    parts = t.split(".")
    if len(parts) != 4:
        return None
    lo = hi = 0
    for part in parts:
        m = _IPV4_SEGMENT.fullmatch(part)
        if m is None:
            return None
        if part == "*":
            a, b = 0, 255
        elif m.group(1) is not None:
            a = b = int(m.group(1))
        else:
            a, b = sorted((int(m.group(2) or 0), int(m.group(3))))
        if b > 255:
            return None
        lo, hi = lo * 256 + a, hi * 256 + b
    return lo, hi


def ipv4_parse(text: str | None) -> int | None:
    """IPV4_PARSE of text: the (lowest) address it names; NULL when it names none (a LONG argument is
    answered in SQL: rules/scalar_udfs.py)."""
    span = None if text is None or text.strip().isdigit() else _ipv4_span(text)
    return None if span is None else span[0]


def ipv4_stringify(text: str | None) -> str | None:
    """IPV4_STRINGIFY: a LONG (as digits) as dotted-decimal; text that names an address as it is (Druid
    returns a valid address string unchanged); NULL otherwise."""
    span = _ipv4_span(text)
    if span is None or text is None:
        return None
    return str(ipaddress.IPv4Address(span[0])) if text.strip().isdigit() else text


@lru_cache(maxsize=256)
def _network(subnet: str, v6: bool) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.IPv6Network(subnet, strict=False) if v6 else ipaddress.IPv4Network(subnet, strict=False)
    except ValueError:
        return None


def ipv4_match(text: str | None, subnet: str | None) -> bool | None:
    """IPV4_MATCH: whether the address (text or integer) is in the CIDR subnet; false when it is not one
    (NULL included, as Druid 33 answers)."""
    if text is None or subnet is None:
        return False
    net, span = _network(subnet, False), _ipv4_span(text)
    if net is None or span is None:
        return False
    return int(net.network_address) <= span[0] and span[1] <= int(net.broadcast_address)


def ipv6_match(text: str | None, subnet: str | None) -> bool | None:
    """IPV6_MATCH: whether the IPv6 address is in the CIDR subnet; false when it is not one."""
    if text is None or subnet is None:
        return None
    return _ipv6_in(text, subnet)


@lru_cache(maxsize=65536)  # a column's addresses repeat: each (address, subnet) is worked out once
def _ipv6_in(text: str, subnet: str) -> bool:
    net = _network(subnet, True)
    if net is None:
        return False
    if "-" not in text:
        try:
            return ipaddress.IPv6Address(text.strip()) in net
        except ValueError:
            return False
    # a segment range (``::-15`` is ``::0-15``, as Druid's parser reads it) matches when all of it is inside
    ends: list[str] = []
    for pick in (0, 1):
        out = []
        for seg in text.strip().split(":"):
            m = _IPV6_RANGE.fullmatch(seg)
            out.append(sorted((m.group(1) or "0", m.group(2)), key=lambda h: int(h, 16))[pick] if m else seg)
        ends.append(":".join(out))
    try:
        return all(ipaddress.IPv6Address(e) in net for e in ends)
    except ValueError:
        return False


_HUMAN_UNITS = {"binary": (1024, ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"], "B"),
                "decimal_byte": (1000, ["", "K", "M", "G", "T", "P", "E"], "B"),
                "decimal": (1000, ["", "K", "M", "G", "T", "P", "E"], "")}


def human_readable(value: int | None, precision: int | None, kind: str | None) -> str | None:
    """HUMAN_READABLE_*_FORMAT: Druid's HumanReadableBytes — below one unit the number as it is, else
    the value in the largest unit it reaches with ``precision`` (0–3, default 2) decimals, rounded half
    up as Druid's own tests and Druid 33 answer (``HUMAN_READABLE_BINARY_BYTE_FORMAT(45000, 0)`` is
    ``44 KiB``, ``(45000, 2)`` ``43.95 KiB``; Druid's docs' ``1.04 MB`` for 1048576 is not what it answers)."""
    if value is None:
        return None
    digits = 2 if precision is None else int(precision)
    if not 0 <= digits <= 3:
        raise ValueError(f"precision [{digits}] must be in the range of [0,3]")
    base, units, suffix = _HUMAN_UNITS[str(kind)]
    if -base < value < base:
        return f"{value} {suffix}".strip()
    magnitude, exp_unit = abs(value), 0
    while magnitude >= base and exp_unit < len(units) - 1:
        magnitude //= base
        exp_unit += 1
    exact = Decimal(abs(value)) / Decimal(base ** exp_unit)
    number = f"{exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP):f}"
    return f"{'-' if value < 0 else ''}{number} {units[exp_unit]}{suffix}".strip()


def double_to_long_bits(x: float | None) -> int | None:
    return None if x is None else struct.unpack("<q", struct.pack("<d", x))[0]


def long_bits_to_double(n: int | None) -> float | None:
    return None if n is None else struct.unpack("<d", struct.pack("<q", n))[0]


_JAVA_LONG = re.compile(r"[+-]?[0-9a-zA-Z]+")


def parse_long(text: str | None, radix: int | None) -> int | None:
    """PARSE_LONG(s, radix): Java's ``Long.parseLong`` (a sign and digits of the radix, nothing else: no
    space, no underscore), a leading ``0x`` dropped in radix 16 as Druid drops it; NULL when it does not
    parse (or is out of range)."""
    if text is None or radix is None or not 2 <= radix <= 36:
        return None
    if radix == 16 and text[:2] in ("0x", "0X"):
        text = text[2:]
    if not _JAVA_LONG.fullmatch(text) or any(int(ch, 36) >= radix for ch in text.lstrip("+-")):
        return None  # each a digit of the radix (Python's int() would also read '0x1A' in base 16)
    n = int(text, int(radix))
    return n if -(2**63) <= n < 2**63 else None


def string_format(pattern: str | None, args_json: str | None) -> str | None:
    """STRING_FORMAT(pattern, args…): Druid's non-strict ``String.format`` (radstack/java_format.py)."""
    if pattern is None:
        return None
    return non_strict_format(pattern, json.loads(args_json) if args_json else [])


def decode_base64_utf8(text: str | None) -> str | None:
    """DECODE_BASE64_UTF8: Java's basic Base64 decoder (padding optional, any other character refused) and
    ``new String(bytes, UTF_8)`` (a byte sequence that is not UTF-8 becomes U+FFFD)."""
    if text is None:
        return None
    if len(text) % 4 == 1:
        raise ValueError("Last unit does not have enough valid bits")
    try:
        data = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except binascii.Error as e:
        raise ValueError(f"Illegal base64 input: {e}") from None
    return data.decode("utf-8", errors="replace")


def double_text(x: float | None) -> str | None:
    """CAST(double AS VARCHAR) as Java writes a double (``2.434E8``, ``1.0``)."""
    return None if x is None else java_double(x)


def float_text(x: float | None) -> str | None:
    return None if x is None else java_float(x)


def chop_bytes(text: str | None, max_bytes: int | None) -> str | None:
    """Druid's ``StringUtils.chop``: the longest prefix of ``text`` whose UTF-8 form fits in ``max_bytes``
    (``EARLIEST``/``LATEST``'s ``maxBytes``), never splitting a character."""
    if text is None or max_bytes is None:
        return text
    return text.encode("utf-8")[: max(0, int(max_bytes))].decode("utf-8", "ignore")


B, V = "BIGINT", "VARCHAR"
#: the UDFs that take whole Arrow batches (the others are called once per row)
ARROW_UDFS = frozenset({"DRUID_HLL_MERGE", "DRUID_THETA_MERGE", "DRUID_HLL_MERGE_SINGLES",
                        "DRUID_THETA_MERGE_SINGLES"})
UDFS: dict[str, tuple[Callable[..., Any], list[str], str]] = {
    "DRUID_TIME_FLOOR": (time_floor, [B, V, B, V], B),
    "DRUID_TIME_CEIL": (time_ceil, [B, V, B, V], B),
    "DRUID_TIME_SHIFT": (time_shift, [B, V, B, V], B),
    "DRUID_TIME_FORMAT": (time_format, [B, V, V], V),
    "DRUID_TIME_PARSE": (time_parse, [V, V, V], B),
    "DRUID_JSON_PATHS": (json_paths, [V], "VARCHAR[]"),
    "DRUID_CHOP_BYTES": (chop_bytes, [V, B], V),
    "DRUID_IPV4_PARSE": (ipv4_parse, [V], B),
    "DRUID_IPV4_STRINGIFY": (ipv4_stringify, [V], V),
    "DRUID_IPV4_MATCH": (ipv4_match, [V, V], "BOOLEAN"),
    "DRUID_IPV6_MATCH": (ipv6_match, [V, V], "BOOLEAN"),
    "DRUID_HUMAN_READABLE": (human_readable, [B, "INTEGER", V], V),
    "DRUID_PARSE_LONG": (parse_long, [V, "INTEGER"], B),
    "DRUID_DOUBLE_TEXT": (double_text, ["DOUBLE"], V),
    "DRUID_DECODE_BASE64_UTF8": (decode_base64_utf8, [V], V),
    "DRUID_FLOAT_TEXT": (float_text, ["FLOAT"], V),
    "DRUID_STRING_FORMAT": (string_format, [V, V], V),
    "DRUID_DOUBLE_TO_LONG_BITS": (double_to_long_bits, ["DOUBLE"], B),
    "DRUID_LONG_BITS_TO_DOUBLE": (long_bits_to_double, [B], "DOUBLE"),
    # DataSketches (rules/sketches.py): LIST(values) of a group → one sketch; estimates and quantiles
    "DRUID_HLL_BUILD": (hll_build, ["VARCHAR[]", "INTEGER", V], "BLOB"),
    "DRUID_HLL_MERGE": (hll_merge_batch, ["BLOB[]", "INTEGER", V], "BLOB"),
    "DRUID_THETA_BUILD": (_sized("thetaSketch", False), ["VARCHAR[]", "INTEGER"], "BLOB"),
    "DRUID_THETA_MERGE": (theta_merge_batch, ["BLOB[]", "INTEGER"], "BLOB"),
    "DRUID_HLL_MERGE_SINGLES": (hll_merge_singles_batch, ["BLOB[]", "BIGINT[]", "INTEGER", V], "BLOB"),
    "DRUID_THETA_MERGE_SINGLES": (theta_merge_singles_batch, ["BLOB[]", "BIGINT[]", "INTEGER"], "BLOB"),
    "DRUID_QUANTILES_BUILD": (_sized("quantilesDoublesSketch", False), ["DOUBLE[]", "INTEGER"], "BLOB"),
    "DRUID_QUANTILES_MERGE": (_sized("quantilesDoublesSketch", True), ["BLOB[]", "INTEGER"], "BLOB"),
    "DRUID_SKETCH_ESTIMATE": (estimate, ["BLOB"], "DOUBLE"),
    "DRUID_QUANTILE": (quantile, ["BLOB", "DOUBLE"], "DOUBLE"),
    "DRUID_QUANTILES": (quantiles, ["BLOB", "DOUBLE[]"], "DOUBLE[]"),
    "DRUID_QUANTILES_N": (count, ["BLOB"], "BIGINT"),
    "DRUID_THETA_SET": (theta_set_op, [V, "BLOB[]", "INTEGER"], "BLOB"),
}


def register(con: duckdb.DuckDBPyConnection, names: set[str], db_key: object = None) -> None:
    """Create the named UDFs in ``con``'s database unless they already exist there; ``db_key`` names
    that database (an object that lives as long as it: an ``id`` can be reused after it is gone)."""
    key = id(con) if db_key is None else db_key
    with _lock:
        for name in sorted(names):
            if (key, name) in _registered:
                continue
            fn, params, ret = UDFS[name]
            kind = "arrow" if name in ARROW_UDFS else "native"
            try:
                con.create_function(name, fn, params, ret, type=kind, null_handling="special",
                                    exception_handling="return_null", side_effects=False)
            except duckdb.CatalogException as e:
                if "already exists" not in str(e):
                    raise
            _registered.add((key, name))
