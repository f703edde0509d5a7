"""Lookups: key → value tables applied at query time (Druid's ``lookups`` and their coordinator config).

The cluster-wide configuration has Druid's shape, one entry per tier and lookup::

    {"__default": {"country": {"version": "v1",
                               "lookupExtractorFactory": {"type": "map", "map": {"FR": "France"}}}}}

Two kinds of ``lookupExtractorFactory`` are understood:

* ``map``: the pairs inline (``map``), optionally ``injective``;
* ``cachedNamespace`` with an ``extractionNamespace`` of type ``uri``: a file (``uri``, or the newest
  file under ``uriPrefix`` whose name matches ``fileRegex``) parsed with a ``namespaceParseSpec`` of
  format ``csv``, ``tsv``, ``customJson`` or ``simpleJson``, re-read every ``pollPeriod``;
* ``ipRange`` (a radstack extension, not in Druid): IPv4 ranges → value, answered by range search (the
  narrowest range holding the address wins), from inline ``ranges`` or a ``uri`` file (CSV with a
  header, or JSON lines) whose rows have ``cidr`` or ``start``/``end`` (``start_ip``/``end_ip``) and
  the ``valueColumn``. It is how an IP → AS table is applied at query time.

This module holds the spec and the parsing of file contents; reading the files (and refusing places a
client may not name) is the server's (:mod:`serving.lookups`).
"""

from __future__ import annotations

import csv
import io
import ipaddress
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from radstack.time.intervals import Period

__all__ = [
    "DEFAULT_TIER",
    "LookupDefinition",
    "LookupSpecError",
    "check_name",
    "ip_range",
    "ip_to_long",
    "parse_ranges",
    "ParseSpec",
    "parse_config",
    "parse_container",
    "parse_rows",
    "replaces",
]

DEFAULT_TIER = "__default"
"""The tier a lookup belongs to unless a process is configured for another (as in Druid)."""

_NAME_RE = re.compile(r"^[^\x00-\x1f/]{1,255}$")
_FORMATS = ("csv", "tsv", "customJson", "simpleJson")


class LookupSpecError(ValueError):
    """An invalid lookup configuration: ``path`` in the JSON and what is wrong."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True)
class ParseSpec:
    """How a ``uri`` lookup's file turns into pairs (Druid's ``namespaceParseSpec``)."""

    format: str
    columns: tuple[str, ...] = ()
    key_column: str | None = None
    value_column: str | None = None
    delimiter: str = ","
    has_header_row: bool = False
    skip_header_rows: int = 0
    key_field: str = ""
    value_field: str = ""


@dataclass(frozen=True)
class LookupDefinition:
    """One configured lookup: its name, version and where its pairs come from."""

    name: str
    version: str
    factory: dict[str, Any] = field(hash=False, compare=False)
    kind: str = "map"  # "map" | "uri" | "ipRange"
    injective: bool = False
    pairs: tuple[tuple[str, str], ...] = ()  # map lookups
    ranges: tuple[tuple[int, int, str], ...] = ()  # inline ipRange lookups: (first, last address, value)
    value_column: str | None = None  # ipRange files
    uri: str | None = None
    uri_prefix: str | None = None
    file_regex: str = ".*"
    parse_spec: ParseSpec | None = None
    poll_ms: int = 0  # 0: read once

    def to_json(self) -> dict[str, Any]:
        """The container as the coordinator API shows it."""
        return {"version": self.version, "lookupExtractorFactory": self.factory}


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise LookupSpecError(path, f"expected a JSON object, got {type(value).__name__}")
    return value


def _string(value: Any, path: str, *, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise LookupSpecError(path, "expected a non-empty string")
    return value


def _bool(value: Any, path: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise LookupSpecError(path, "expected true or false")
    return value


def check_name(name: Any, path: str) -> str:
    """A tier or lookup name: 1–255 characters, no control characters and no ``/``."""
    if not isinstance(name, str) or not _NAME_RE.match(name) or name.strip() != name:
        raise LookupSpecError(path, f"invalid name {name!r} (1-255 characters, no '/', no control characters)")
    return name


def _poll_ms(value: Any, path: str) -> int:
    if value is None or value == 0:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str):
        try:
            period = Period.parse(value)
        except ValueError as e:
            raise LookupSpecError(path, f"invalid period {value!r}: {e}") from None
        if period.is_calendar:
            raise LookupSpecError(path, f"{value!r}: a poll period cannot be months or years")
        return period.fixed_millis
    raise LookupSpecError(path, "expected an ISO-8601 period (PT5M) or milliseconds")


def _parse_spec(raw: Any, path: str) -> ParseSpec:
    m = _mapping(raw, path)
    fmt = m.get("format")
    if fmt not in _FORMATS:
        raise LookupSpecError(f"{path}.format", f"unknown format {fmt!r} (one of {', '.join(_FORMATS)})")
    if fmt in ("csv", "tsv"):
        cols = m.get("columns") or []
        if not isinstance(cols, list) or not all(isinstance(c, str) for c in cols):
            raise LookupSpecError(f"{path}.columns", "expected a list of column names")
        header = _bool(m.get("hasHeaderRow"), f"{path}.hasHeaderRow")
        if not cols and not header and (m.get("keyColumn") or m.get("valueColumn")):
            raise LookupSpecError(f"{path}.columns", "keyColumn/valueColumn need columns or hasHeaderRow")
        if fmt == "tsv" and not cols and not header:
            raise LookupSpecError(f"{path}.columns", "a tsv parse spec needs columns or hasHeaderRow")
        skip = m.get("skipHeaderRows", 0)
        if not isinstance(skip, int) or isinstance(skip, bool) or skip < 0:
            raise LookupSpecError(f"{path}.skipHeaderRows", "expected a non-negative integer")
        delim = m.get("delimiter") if fmt == "tsv" else ","
        if fmt == "tsv" and delim is None:
            delim = "\t"
        if not isinstance(delim, str) or len(delim) != 1:
            raise LookupSpecError(f"{path}.delimiter", "expected one character")
        return ParseSpec(fmt, tuple(cols), m.get("keyColumn"), m.get("valueColumn"), delim, header, skip)
    if fmt == "customJson":
        return ParseSpec(fmt, key_field=str(_string(m.get("keyFieldName"), f"{path}.keyFieldName")),
                         value_field=str(_string(m.get("valueFieldName"), f"{path}.valueFieldName")))
    return ParseSpec(fmt)


def parse_container(name: str, raw: Any, path: str = "lookup") -> LookupDefinition:
    """``{"version": …, "lookupExtractorFactory": {…}}`` → :class:`LookupDefinition`."""
    check_name(name, path)
    m = _mapping(raw, path)
    version = str(_string(m.get("version"), f"{path}.version"))
    factory = dict(_mapping(m.get("lookupExtractorFactory"), f"{path}.lookupExtractorFactory"))
    fp = f"{path}.lookupExtractorFactory"
    typ = factory.get("type")
    injective = _bool(factory.get("injective"), f"{fp}.injective")
    if typ == "map":
        mp = _mapping(factory.get("map", {}), f"{fp}.map")
        pairs = []
        for k, v in mp.items():
            if v is None:
                continue
            if not isinstance(v, str | int | float | bool):
                raise LookupSpecError(f"{fp}.map.{k}", "values must be strings")
            pairs.append((str(k), v if isinstance(v, str) else json.dumps(v)))
        return LookupDefinition(name, version, factory, "map", injective, tuple(pairs))
    if typ == "cachedNamespace":
        np_ = f"{fp}.extractionNamespace"
        ns = _mapping(factory.get("extractionNamespace"), np_)
        if ns.get("type") != "uri":
            raise LookupSpecError(f"{np_}.type", f"namespace type {ns.get('type')!r} is not supported here "
                                                 "(only 'uri'; see docs/lookups.md)")
        uri = _string(ns.get("uri"), f"{np_}.uri", required=False)
        prefix = _string(ns.get("uriPrefix"), f"{np_}.uriPrefix", required=False)
        if (uri is None) == (prefix is None):
            raise LookupSpecError(np_, "exactly one of 'uri' and 'uriPrefix' must be set")
        regex = ns.get("fileRegex", ".*") or ".*"
        try:
            re.compile(str(regex))
        except re.error as e:
            raise LookupSpecError(f"{np_}.fileRegex", f"invalid regular expression: {e}") from None
        spec = _parse_spec(ns.get("namespaceParseSpec"), f"{np_}.namespaceParseSpec")
        return LookupDefinition(name, version, factory, "uri", injective, uri=uri, uri_prefix=prefix,
                                file_regex=str(regex), parse_spec=spec,
                                poll_ms=_poll_ms(ns.get("pollPeriod"), f"{np_}.pollPeriod"))
    if typ == "ipRange":
        uri = _string(factory.get("uri"), f"{fp}.uri", required=False)
        prefix = _string(factory.get("uriPrefix"), f"{fp}.uriPrefix", required=False)
        raw_ranges = factory.get("ranges")
        if sum(x is not None for x in (uri, prefix, raw_ranges)) != 1:
            raise LookupSpecError(fp, "exactly one of 'ranges', 'uri' and 'uriPrefix' must be set")
        value_column = _string(factory.get("valueColumn"), f"{fp}.valueColumn", required=False)
        ranges: list[tuple[int, int, str]] = []
        if raw_ranges is not None:
            if not isinstance(raw_ranges, list):
                raise LookupSpecError(f"{fp}.ranges", "expected a list of {cidr | start, end, value}")
            ranges = [ip_range(r, value_column, f"{fp}.ranges[{i}]") for i, r in enumerate(raw_ranges)]
        regex = str(factory.get("fileRegex", ".*") or ".*")
        return LookupDefinition(name, version, factory, "ipRange", False, ranges=tuple(ranges), uri=uri,
                                uri_prefix=prefix, file_regex=regex, value_column=value_column,
                                poll_ms=_poll_ms(factory.get("pollPeriod"), f"{fp}.pollPeriod"))
    raise LookupSpecError(f"{fp}.type", f"unknown lookup type {typ!r} (map, cachedNamespace, ipRange)")


def parse_config(raw: Any, path: str = "lookups") -> dict[str, dict[str, LookupDefinition]]:
    """A bulk configuration ``{tier: {name: container}}``, every entry checked."""
    out: dict[str, dict[str, LookupDefinition]] = {}
    for tier, lookups in _mapping(raw, path).items():
        check_name(tier, f"{path}.{tier}")
        out[tier] = {name: parse_container(name, spec, f"{path}.{tier}.{name}")
                     for name, spec in _mapping(lookups, f"{path}.{tier}").items()}
    return out


def replaces(new_version: str, old_version: str) -> bool:
    """Whether an update with ``new_version`` may replace ``old_version``: Druid requires a
    lexicographically higher version."""
    return new_version > old_version


# ---- file contents ----------------------------------------------------------------------------


def _csv_pairs(text: str, spec: ParseSpec) -> Iterator[tuple[str, Any]]:
    rows = csv.reader(io.StringIO(text), delimiter=spec.delimiter)
    for _ in range(spec.skip_header_rows):
        next(rows, None)
    columns = list(spec.columns)
    if spec.has_header_row:
        header = next(rows, None)
        if header is not None and not columns:
            columns = [h.strip() for h in header]
    key_i, value_i = 0, 1
    if columns:
        try:
            key_i = columns.index(spec.key_column) if spec.key_column else 0
            value_i = columns.index(spec.value_column) if spec.value_column else 1
        except ValueError as e:
            raise LookupSpecError("namespaceParseSpec", f"key/value column not among the columns {columns}") from e
    for row in rows:
        if len(row) > max(key_i, value_i):
            yield row[key_i], row[value_i]


def _json_lines(text: str) -> Iterator[Mapping[str, Any]]:
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise LookupSpecError(f"line {n}", f"not JSON: {e}") from None
        if not isinstance(obj, Mapping):
            raise LookupSpecError(f"line {n}", "expected a JSON object per line")
        yield obj


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


def parse_rows(data: bytes, spec: ParseSpec) -> dict[str, str]:
    """The pairs of one lookup file (later lines win on a repeated key; null values are skipped)."""
    text = data.decode("utf-8-sig")
    out: dict[str, str] = {}
    if spec.format in ("csv", "tsv"):
        pairs: Iterator[tuple[str, Any]] = _csv_pairs(text, spec)
    elif spec.format == "customJson":
        pairs = ((o.get(spec.key_field), o.get(spec.value_field)) for o in _json_lines(text))
    else:
        pairs = (kv for o in _json_lines(text) for kv in o.items())
    for k, v in pairs:
        key, value = _text(k), _text(v)
        if key is not None and value is not None:
            out[key] = value
    return out


# ---- IPv4 ranges (ipRange lookups, and the pipeline's ip_range enrichment) -----------------------------


def ip_to_long(value: Any) -> int:
    """An IPv4 address (dotted, or already a number) as an integer."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(ipaddress.IPv4Address(str(value).strip()))


def ip_range(row: Any, value_column: str | None = None, path: str = "range") -> tuple[int, int, str]:
    """One range row → ``(first, last, value)``: a mapping with ``cidr`` or ``start``/``end``
    (``start_ip``/``end_ip``) and the value in ``value_column`` (else ``value``, ``as``, ``asn``), or a
    ``[start, end, value]`` sequence."""
    try:
        if isinstance(row, Mapping):
            if row.get("cidr"):
                net = ipaddress.IPv4Network(str(row["cidr"]).strip(), strict=False)
                lo, hi = int(net.network_address), int(net.broadcast_address)
            else:
                lo = ip_to_long(row.get("start", row.get("start_ip")))
                hi = ip_to_long(row.get("end", row.get("end_ip")))
            value = row.get(value_column) if value_column else row.get("value", row.get("as", row.get("asn")))
        elif isinstance(row, Sequence) and not isinstance(row, str) and len(row) == 3:
            lo, hi, value = ip_to_long(row[0]), ip_to_long(row[1]), row[2]
        else:
            raise LookupSpecError(path, "expected {cidr | start, end, value} or [start, end, value]")
    except ValueError as e:
        if isinstance(e, LookupSpecError):
            raise
        raise LookupSpecError(path, f"not an IPv4 range: {e}") from None
    if value is None:
        raise LookupSpecError(path, f"no value (column {value_column or 'value'!r})")
    if lo > hi:
        raise LookupSpecError(path, "the range ends before it starts")
    return lo, hi, str(value)


def parse_ranges(data: bytes, value_column: str | None) -> list[tuple[int, int, str]]:
    """The ranges of an ``ipRange`` file: CSV with a header row, a JSON array, or JSON lines."""
    text = data.decode("utf-8-sig")
    head = text.lstrip()[:1]
    if head == "[":
        rows: list[Any] = json.loads(text)
    elif head == "{":
        rows = list(_json_lines(text))
    else:
        rows = list(csv.DictReader(io.StringIO(text)))
    return sorted(ip_range(r, value_column, f"row {i + 1}") for i, r in enumerate(rows))
