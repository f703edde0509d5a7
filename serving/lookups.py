"""Lookups on the server: the cluster configuration in the metadata store, and the pairs each lookup
holds, read from its definition (inline map, or a file) for the broker to serve as a DuckDB table.

The configuration is stored as Druid stores it (the ``lookupsConfig`` entry of ``druid_config``) and
changed through the coordinator's lookup API (:mod:`serving.lookups_api`). The broker serves the
lookups of one tier (``__default``) and re-checks the configuration on every metadata poll.

Where a ``uri`` lookup may read (a client names the place, the server reads it with its own rights):

- ``file://`` paths under ``ingestion.local.allowed_dirs`` (default ``{home}/data``, the checkout's
  ``examples/``, a local deep storage), checked after symlinks and ``..``;
- the deep storage's own URIs (``s3://``/``s3a://`` bucket and prefix, ``hdfs://`` base path).

Anything else is refused, and that lookup keeps the pairs it had (or has none), as a Druid node keeps
serving the old version of a lookup that fails to load.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from radstack.config import Settings
from radstack.lookups import DEFAULT_TIER, LookupDefinition, parse_container, parse_ranges, parse_rows
from radstack.sql_text import quote_identifier
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore
from radstack.time.clock import now_millis
from serving.input_policy import InputForbidden, check_local_file

log = logging.getLogger(__name__)

CONFIG_KEY = "lookupsConfig"
"""The ``druid_config`` entry holding ``{tier: {name: container}}`` (Druid's own key)."""

TABLE_PREFIX = "__lookup__"
RANGES_PREFIX = "__lookup_ranges__"
MAX_FILE_BYTES = 512 * 1024 * 1024


class LookupSourceError(RuntimeError):
    """A lookup's file cannot be read (refused place, missing file, bad contents)."""


@dataclass(frozen=True)
class LoadedLookup:
    """A lookup the broker serves: its definition's version and the DuckDB table of its pairs."""

    name: str
    version: str
    injective: bool
    rows: int
    source: str | None = None  # the file read, for uri lookups
    source_ms: int = 0  # that file's modification time
    loaded_ms: int = 0
    ranges: bool = False  # an ipRange lookup: answered by range search in :attr:`ranges_table`

    @property
    def table(self) -> str:
        return table_name(self.name)

    @property
    def ranges_table(self) -> str:
        """The DuckDB table of an ipRange lookup's ranges (``lo``, ``hi``, ``v``), unquoted."""
        return RANGES_PREFIX + self.name

    @property
    def tables(self) -> tuple[str, ...]:
        """Every DuckDB table a statement reading this lookup may read (serving/broker/queries/relations.py)."""
        return (self.table, self.ranges_table) if self.ranges else (self.table,)


def table_name(name: str) -> str:
    """The DuckDB table holding lookup ``name`` (columns ``k``, ``v``), unquoted."""
    return TABLE_PREFIX + name


@dataclass(frozen=True)
class LookupData:
    """A lookup's contents: its ``k → v`` pairs and, for an ipRange lookup, its ranges."""

    pairs: dict[str, str]
    ranges: tuple[tuple[int, int, str], ...] = ()


def _range_data(ranges: list[tuple[int, int, str]] | tuple[tuple[int, int, str], ...]) -> LookupData:
    """An ipRange lookup's ranges, with ``k`` the range as text (CIDR when it is one, else first-last)."""
    pairs = {}
    for lo, hi, v in ranges:
        size = hi - lo + 1
        first = str(ipaddress.IPv4Address(lo))
        if size & (size - 1) == 0 and lo % size == 0:
            pairs[f"{first}/{32 - size.bit_length() + 1}"] = v
        else:
            pairs[f"{first}-{ipaddress.IPv4Address(hi)}"] = v
    return LookupData(pairs, tuple(ranges))


_IPV4_RE = r"'^[0-9]{1,3}(\.[0-9]{1,3}){3}$'"


def ip_number_sql(text_sql: str) -> str:
    """DuckDB SQL turning a dotted IPv4 address (VARCHAR) into its number; NULL for anything else."""
    parts = [f"TRY_CAST(SPLIT_PART({text_sql}, '.', {i}) AS BIGINT)" for i in (1, 2, 3, 4)]
    number = f"{parts[0]} * 16777216 + {parts[1]} * 65536 + {parts[2]} * 256 + {parts[3]}"
    return f"CASE WHEN REGEXP_MATCHES({text_sql}, {_IPV4_RE}) THEN {number} END"


def value_sql(lookup: LoadedLookup, key_sql: str) -> str:
    """DuckDB SQL for the value lookup gives the VARCHAR ``key_sql``, NULL when it has none: a correlated
    scalar subquery (DuckDB plans it as a join); the narrowest range for an ipRange lookup."""
    if lookup.ranges:
        ip = ip_number_sql(key_sql)
        return (f"(SELECT ARG_MIN(__lookup.v, __lookup.hi - __lookup.lo) FROM "
                f"{quote_identifier(lookup.ranges_table)} AS __lookup WHERE {ip} BETWEEN __lookup.lo AND __lookup.hi)")
    return f"(SELECT __lookup.v FROM {quote_identifier(lookup.table)} AS __lookup WHERE __lookup.k = {key_sql})"


@dataclass
class LookupChanges:
    """What a sync found: lookups (re)loaded with their contents, and lookups no longer configured."""

    loaded: dict[str, tuple[LoadedLookup, LookupData]] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.loaded or self.removed)


def read_config(metadata: MetadataStore) -> dict[str, Any] | None:
    """The stored configuration ``{tier: {name: container}}``; None until it was initialized."""
    raw = metadata.get_config(CONFIG_KEY)
    return None if raw is None else dict(raw)


# ---- reading a uri lookup's file ----------------------------------------------------------------


def _deep_storage_key(uri: str, deep_storage: DeepStorage | None) -> str | None:
    """The deep-storage key ``uri`` names, or None when it is not inside the deep storage."""
    if deep_storage is None:
        return None
    base = deep_storage.uri("").rstrip("/") + "/"
    candidates = [uri]
    if uri.startswith("s3://"):
        candidates.append("s3a://" + uri[len("s3://"):])
    for c in candidates:
        if c.startswith(base):
            rel = unquote(c[len(base):])
            if ".." in rel.split("/"):
                return None
            return rel
    return None


class SourceReader:
    """Reads the file a ``uri`` lookup names, only from the places this server allows."""

    def __init__(self, settings: Settings | None, deep_storage: DeepStorage | None) -> None:
        self.settings = settings or Settings()
        self.deep_storage = deep_storage

    def newest(self, d: LookupDefinition) -> tuple[str, int]:
        """The file the lookup reads now and its modification time (ms): ``uri``, or the newest file
        under ``uriPrefix`` whose name matches ``fileRegex``."""
        if d.uri is not None:
            return d.uri, self._modified(d.uri)
        prefix = str(d.uri_prefix)
        pattern = re.compile(d.file_regex)
        files = [(ms, u) for u, ms in self._listing(prefix) if pattern.fullmatch(u.rsplit("/", 1)[-1])]
        if not files:
            raise LookupSourceError(f"lookup [{d.name}]: no file under {prefix!r} matches {d.file_regex!r}")
        ms, uri = max(files)
        return uri, ms

    def read(self, uri: str) -> bytes:
        key = _deep_storage_key(uri, self.deep_storage)
        if key is not None:
            data = self.deep_storage.get_bytes(key)  # type: ignore[union-attr]
        else:
            path = self._local(uri)
            if path.stat().st_size > MAX_FILE_BYTES:
                raise LookupSourceError(f"{uri!r} is larger than {MAX_FILE_BYTES} bytes")
            data = path.read_bytes()
        if len(data) > MAX_FILE_BYTES:
            raise LookupSourceError(f"{uri!r} is larger than {MAX_FILE_BYTES} bytes")
        return data

    def _local(self, uri: str) -> Path:
        parsed = urlparse(uri)
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            raise LookupSourceError(
                f"{uri!r} is neither a file:// path nor inside the deep storage; lookups read only "
                "ingestion.local.allowed_dirs and the deep storage")
        try:
            return check_local_file(unquote(parsed.path), self.settings)
        except InputForbidden as e:
            raise LookupSourceError(str(e).replace("local input source", "lookup")) from None

    def _modified(self, uri: str) -> int:
        key = _deep_storage_key(uri, self.deep_storage)
        if key is not None:
            return int(self.deep_storage.modified_ms(key))  # type: ignore[union-attr]
        return int(self._local(uri).stat().st_mtime * 1000)

    def _listing(self, prefix: str) -> list[tuple[str, int]]:
        key = _deep_storage_key(prefix, self.deep_storage)
        if key is not None:
            ds = self.deep_storage
            base = prefix.rstrip("/") + "/"
            rels = [k[len(key):].lstrip("/") if key else k for k in ds.list(key)]  # type: ignore[union-attr]
            return [(base + r, int(ds.modified_ms(key.rstrip("/") + "/" + r if key else r)))  # type: ignore[union-attr]
                    for r in rels if r and "/" not in r]
        folder = self._local(prefix)
        if not folder.is_dir():
            raise LookupSourceError(f"uriPrefix {prefix!r} is not a directory")
        out = []
        for p in folder.iterdir():
            if p.is_file():
                real = self._local(p.as_uri())  # a symlink out of the allowed places is refused
                out.append((p.as_uri(), int(real.stat().st_mtime * 1000)))
        return out


# ---- the registry the broker polls ---------------------------------------------------------------


class LookupRegistry:
    """Decides, on each broker poll, which lookups of the tier to (re)load and which to drop."""

    def __init__(self, settings: Settings | None, metadata: MetadataStore | None,
                 deep_storage: DeepStorage | None, tier: str = DEFAULT_TIER) -> None:
        self.metadata = metadata
        self.tier = tier
        self.reader = SourceReader(settings, deep_storage)
        self.errors: dict[str, str] = {}  # lookup → why its last load failed
        self._next_poll: dict[str, int] = {}
        self._parsed: dict[str, tuple[Any, LookupDefinition]] = {}  # name → (stored spec, its parse)

    def definitions(self) -> dict[str, LookupDefinition]:
        """The tier's lookups as configured now (a stored entry that no longer parses is skipped)."""
        if self.metadata is None:
            return {}
        raw = read_config(self.metadata) or {}
        out: dict[str, LookupDefinition] = {}
        parsed: dict[str, tuple[Any, LookupDefinition]] = {}
        for name, spec in dict(raw.get(self.tier) or {}).items():
            cached = self._parsed.get(name)
            if cached is not None and cached[0] == spec:  # unchanged since the last poll: not parsed again
                out[name], parsed[name] = cached[1], cached
                continue
            try:
                out[name] = parse_container(name, spec, f"lookups.{self.tier}.{name}")
            except ValueError as e:
                self.errors[name] = str(e)
                continue
            parsed[name] = (spec, out[name])
        self._parsed = parsed
        return out

    def changes(self, current: Mapping[str, LoadedLookup], now_ms: int | None = None) -> LookupChanges:
        now = now_millis() if now_ms is None else now_ms
        defs = self.definitions()
        out = LookupChanges(removed={n for n in current if n not in defs})
        for name in out.removed:
            self._next_poll.pop(name, None)
            self.errors.pop(name, None)
        for name, d in defs.items():
            cur = current.get(name)
            same = cur is not None and cur.version == d.version
            if same and (not d.poll_ms or now < self._next_poll.get(name, 0)):
                continue
            try:
                loaded = self._load(d, cur if same else None, now)
            except (LookupSourceError, OSError, ValueError, RuntimeError) as e:
                self.errors[name] = str(e)
                log.warning("lookup %s (version %s) not loaded: %s", name, d.version, e)
                if d.poll_ms:
                    self._next_poll[name] = now + d.poll_ms
                continue
            self.errors.pop(name, None)
            if d.poll_ms:
                self._next_poll[name] = now + d.poll_ms
            if loaded is not None:
                out.loaded[name] = loaded
        return out

    def _load(self, d: LookupDefinition, cur: LoadedLookup | None,
              now: int) -> tuple[LoadedLookup, LookupData] | None:
        is_range = d.kind == "ipRange"
        if d.kind == "map" or (is_range and d.uri is None and d.uri_prefix is None):
            data = _range_data(d.ranges) if is_range else LookupData(dict(d.pairs))
            return LoadedLookup(d.name, d.version, d.injective, len(data.pairs), loaded_ms=now, ranges=is_range), data
        uri, ms = self.reader.newest(d)
        if cur is not None and cur.source == uri and cur.source_ms == ms:
            return None  # polled, unchanged
        raw = self.reader.read(uri)
        if is_range:
            data = _range_data(parse_ranges(raw, d.value_column))
        else:
            assert d.parse_spec is not None
            data = LookupData(parse_rows(raw, d.parse_spec))
        return LoadedLookup(d.name, d.version, d.injective, len(data.pairs), uri, ms, now, is_range), data
