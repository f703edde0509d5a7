"""Each segment's rows as gzip JSON lines beside its Parquet file, for a Druid cluster without
``druid-parquet-extensions`` (the stock Druid of Maven Central): ``…/{partition}/data.json.gz``.

One JSON object per row of the segment file: ``__time`` in epoch millis, the dimensions as they are
(multi-value and array columns as JSON arrays, nested columns as JSON), the metric columns as they are;
binary columns (the sketches) in base64, which Druid's sketch aggregators read at ingestion. The file lives
in the segment's own folder, so killing the segment deletes it too, and a failed batch job's cleanup of its
version's folders takes it with the rest. DuckDB reads the Parquet file and writes the gzip in native code.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

from radstack.duckdb_sandbox import sandboxed_connection
from radstack.sql_text import quote_identifier, string_literal
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.segments import DataSegment

__all__ = ["JSON_FILE", "json_key", "write_json_lines", "ensure_json_lines"]

JSON_FILE = "data.json.gz"


def json_key(data_key: str) -> str:
    """The JSON-lines key beside a segment's data file key."""
    return data_key.rsplit("/", 1)[0] + "/" + JSON_FILE


def _select(columns: Iterable[tuple[str, str]]) -> str:
    parts = []
    for name, typ in columns:
        col = quote_identifier(name)
        if name == "__time":
            parts.append(f"epoch_ms({col}) AS {col}" if typ.startswith("TIMESTAMP") else col)
        elif typ == "BLOB":
            parts.append(f"base64({col}) AS {col}")
        else:
            parts.append(col)
    return ", ".join(parts)


def _convert(parquet: Path, out: Path) -> None:
    con = sandboxed_connection(allowed_dirs=[parquet.parent], threads=2)
    try:
        src = f"read_parquet({string_literal(str(parquet))})"
        cols = [(str(r[0]), str(r[1])) for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
        con.execute(f"COPY (SELECT {_select(cols)} FROM {src}) TO {string_literal(str(out))} "
                    "(FORMAT JSON, COMPRESSION GZIP)")
    finally:
        con.close()


def write_json_lines(storage: DeepStorage, segments: Iterable[DataSegment]) -> int:
    """Write ``data.json.gz`` beside every data segment's file; the number written."""
    n = 0
    with tempfile.TemporaryDirectory(prefix="radstack-json-lines-") as tmp:
        for seg in segments:
            if seg.is_tombstone:
                continue
            key = storage.key_for_load_spec(seg.load_spec)
            local = Path(tmp) / f"{n}.parquet"
            out = Path(tmp) / f"{n}.json.gz"
            storage.download(key, local)
            _convert(local, out)
            storage.put_file(out, json_key(key))
            local.unlink()
            out.unlink()
            n += 1
    return n


def ensure_json_lines(storage: DeepStorage, segments: Iterable[DataSegment]) -> int:
    """:func:`write_json_lines` for the data segments that have no JSON lines yet (segments compacted in
    radstack, or written before the Druid target was set); the number written."""
    missing = [s for s in segments if not s.is_tombstone
               and not storage.exists(json_key(storage.key_for_load_spec(s.load_spec)))]
    return write_json_lines(storage, missing)
