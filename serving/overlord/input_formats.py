"""Druid ``ioConfig.inputFormat`` types: parsing one input stream into Arrow record batches.

- ``json``: newline-delimited, one JSON object per line (blank lines skipped). A line that is not
  valid JSON or not an object is *unparseable*: counted, kept as a sample, and skipped.
- ``csv`` / ``tsv``: ``columns``, ``findColumnsFromHeader``, ``skipHeaderRows``, ``delimiter``
  (tsv; default tab), ``listDelimiter`` (accepted; values are kept whole — radstack segments have
  no multi-value dimensions). Every value is a string, empty → null, as Druid reads them; as in
  Druid, values past the last column are ignored (a trailing delimiter) and missing ones are null.
- ``parquet``: pyarrow, batch by batch; ``binaryAsString`` casts binary columns to strings.

Files ending in ``.gz``, ``.bz2`` or ``.xz`` are decompressed on the fly. ``processedBytes`` counts
bytes after decompression and before parsing (Druid's ``ingest/input/bytes``).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import lzma
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any, BinaryIO

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from radstack.storage.ingest_stats import IngestStats
from serving.overlord.input_sources import InputEntity, InputSpecError

FORMAT_TYPES = ("json", "csv", "tsv", "parquet")
BATCH_ROWS = 8192


def validate_input_format(spec: Any, path: str = "spec.ioConfig.inputFormat") -> None:
    if not isinstance(spec, Mapping):
        raise InputSpecError(f"{path}: required (an object with a 'type')")
    typ = spec.get("type")
    if typ not in FORMAT_TYPES:
        raise InputSpecError(f"{path}.type: unknown input format {typ!r}; supported: {', '.join(FORMAT_TYPES)}")
    if typ in ("csv", "tsv"):
        cols = spec.get("columns")
        header = bool(spec.get("findColumnsFromHeader", False))
        if cols is not None and (not isinstance(cols, list) or not all(isinstance(c, str) for c in cols)):
            raise InputSpecError(f"{path}.columns: expected a list of column names")
        if not cols and not header:
            raise InputSpecError(f"{path}.columns: required when findColumnsFromHeader is false")
        if cols and header:
            raise InputSpecError(f"{path}.columns: cannot be combined with findColumnsFromHeader=true")
        skip = spec.get("skipHeaderRows", 0)
        if not isinstance(skip, int) or isinstance(skip, bool) or skip < 0:
            raise InputSpecError(f"{path}.skipHeaderRows: expected a non-negative integer")
        delim = spec.get("delimiter")
        if delim is not None and (not isinstance(delim, str) or len(delim) != 1):
            raise InputSpecError(f"{path}.delimiter: expected a single character")


class ReadCancelled(Exception):
    """``should_stop`` said stop while reading."""


class _CountingReader(io.RawIOBase):
    def __init__(self, raw: BinaryIO, stats: IngestStats, should_stop: Callable[[], bool] | None) -> None:
        self._raw = raw
        self._stats = stats
        self._should_stop = should_stop

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._should_stop is not None and self._should_stop():
            raise ReadCancelled()
        # read1: return what is available now (a slow stream must not block until a buffer fills)
        read1 = getattr(self._raw, "read1", None)
        data = read1(len(b)) if read1 is not None else self._raw.read(len(b))
        if not data:
            return 0
        b[: len(data)] = data
        self._stats.add_bytes(len(data))
        return len(data)

    def close(self) -> None:
        self._raw.close()
        super().close()


def _decompressed(entity: InputEntity, raw: BinaryIO) -> BinaryIO:
    name = entity.name.lower()
    if name.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    if name.endswith(".bz2"):
        return bz2.BZ2File(raw)  # type: ignore[return-value]
    if name.endswith(".xz"):
        return lzma.LZMAFile(raw)  # type: ignore[return-value]
    return raw


def read_batches(
    entity: InputEntity,
    fmt: Mapping[str, Any],
    stats: IngestStats,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Parse one entity into record batches, counting bytes and unparseable rows in ``stats``.
    ``should_stop`` is polled on every read; when it returns True, :class:`ReadCancelled` is raised."""
    typ = fmt["type"]
    raw = entity.open()
    try:
        if typ == "parquet":
            yield from _parquet(entity, raw, fmt, stats)
            return
        stream = io.BufferedReader(_CountingReader(_decompressed(entity, raw), stats, should_stop), 1 << 16)
        if typ == "json":
            yield from _json(stream, stats)
        else:
            yield from _delimited(stream, fmt, stats)
    finally:
        raw.close()


# -- json ----------------------------------------------------------------------------------------


def _json(stream: BinaryIO, stats: IngestStats) -> Iterator[pa.RecordBatch]:
    rows: list[dict[str, Any]] = []
    for line in stream:
        text = line.strip()
        if not text:
            continue
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError as e:
            stats.add_unparseable(text.decode("utf-8", "replace"), f"Unable to parse row [{_short(text)}]: {e}")
            continue
        if not isinstance(obj, dict):
            stats.add_unparseable(text.decode("utf-8", "replace"),
                                  f"Unable to parse row [{_short(text)}]: not a JSON object")
            continue
        rows.append(obj)
        if len(rows) >= BATCH_ROWS:
            yield rows_to_batch(rows)
            rows = []
    if rows:
        yield rows_to_batch(rows)


def _short(b: bytes) -> str:
    s = b.decode("utf-8", "replace")
    return s if len(s) <= 200 else s[:200] + "…"


def _scalar(v: Any) -> Any:
    # Nested objects and arrays become JSON text: segments have no nested or multi-value columns.
    if isinstance(v, dict | list):
        return orjson.dumps(v).decode()
    return v


def rows_to_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    """Rows (dicts) → one batch; a column whose values mix types becomes strings."""
    names: dict[str, None] = {}
    for r in rows:
        for k in r:
            names.setdefault(k, None)
    arrays: list[pa.Array] = []
    for name in names:
        values = [_scalar(r.get(name)) for r in rows]
        try:
            arr = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            arr = pa.array([None if v is None else (v if isinstance(v, str) else orjson.dumps(v).decode())
                            for v in values], type=pa.string())
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, names=list(names))


# -- csv / tsv -----------------------------------------------------------------------------------


def _delimited(stream: BinaryIO, fmt: Mapping[str, Any], stats: IngestStats) -> Iterator[pa.RecordBatch]:
    typ = fmt["type"]
    delimiter = fmt.get("delimiter") or ("\t" if typ == "tsv" else ",")
    text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="")
    if typ == "tsv":
        reader = csv.reader(text, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    else:
        reader = csv.reader(text, delimiter=delimiter)
    for _ in range(int(fmt.get("skipHeaderRows", 0) or 0)):
        if next(reader, None) is None:
            return
    columns: list[str] | None = list(fmt.get("columns") or []) or None
    if fmt.get("findColumnsFromHeader"):
        header = next(reader, None)
        if header is None:
            return
        columns = [h.strip() for h in header]
    assert columns is not None
    width = len(columns)
    buf: list[list[str | None]] = [[] for _ in columns]
    n = 0
    for row in reader:
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        # as Druid zips columns and values (Utils.zipMapPartial): extra values (a trailing delimiter,
        # as TPC-H's .tbl files end every line) are ignored, missing ones are null
        for i in range(width):
            v = row[i] if i < len(row) else None
            buf[i].append(v if v != "" else None)
        n += 1
        if n >= BATCH_ROWS:
            yield _columns_batch(columns, buf)
            buf = [[] for _ in columns]
            n = 0
    if n:
        yield _columns_batch(columns, buf)


def _columns_batch(columns: list[str], buf: list[list[str | None]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(col, type=pa.string()) for col in buf], names=columns)


# -- parquet -------------------------------------------------------------------------------------


def _parquet(entity: InputEntity, raw: BinaryIO, fmt: Mapping[str, Any], stats: IngestStats) -> Iterator[pa.RecordBatch]:
    src: Any = raw
    spooled = None
    if not (hasattr(raw, "seekable") and raw.seekable()):
        spooled = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
        shutil.copyfileobj(raw, spooled, 1 << 20)
        spooled.seek(0)
        src = spooled
    try:
        pf = pq.ParquetFile(src)
        stats.add_bytes(entity.size if entity.size is not None else pf.metadata.serialized_size)
        as_string = bool(fmt.get("binaryAsString", False))
        for batch in pf.iter_batches(batch_size=BATCH_ROWS):
            if as_string:
                batch = _binary_as_string(batch)
            yield batch
    finally:
        if spooled is not None:
            spooled.close()


def _binary_as_string(batch: pa.RecordBatch) -> pa.RecordBatch:
    arrays = []
    for col in batch.columns:
        if pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type):
            col = col.cast(pa.string())
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)
