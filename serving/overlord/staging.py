"""Spill parsed input batches to local Parquet, then stream them back with one schema.

Inputs are read file by file and batch by batch, so a task never holds its whole input in memory.
Batches of different files (or of JSON rows whose columns drift) can have different schemas; DuckDB
reads the staged files back with ``union_by_name`` (missing columns → null, types widened), so the
indexer sees one stream of record batches with a single schema.

Numeric columns the spec needs (metric ``fieldName``s and ``long``/``float``/``double`` dimensions)
arrive as strings from CSV/TSV; they are cast with ``TRY_CAST`` here (a value that does not parse
becomes null, as Druid's numeric parsing turns it into a default).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from radstack.duckdb_sandbox import sandboxed_connection
from radstack.sql_text import quote_identifier

_SQL_TYPES = {"long": "BIGINT", "float": "FLOAT", "double": "DOUBLE"}


class StagedInput:
    """A temp directory of Parquet files holding a task's parsed input."""

    def __init__(self, parent: Path | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="radstack-task-", dir=parent))
        self.rows = 0
        self._files: list[Path] = []
        self._writer: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        batch = _no_null_types(batch)
        if self._writer is None or not batch.schema.equals(self._schema):
            self._close_writer()
            path = self.dir / f"part-{len(self._files):05d}.parquet"
            self._writer = pq.ParquetWriter(path, batch.schema, compression="zstd")
            self._schema = batch.schema
            self._files.append(path)
        self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def batches(self, casts: Mapping[str, str] | None = None, batch_rows: int = 65536) -> Iterator[pa.RecordBatch]:
        """Stream the staged rows back as record batches with one schema.

        ``casts`` maps column → ``long``/``float``/``double``; such columns stored as strings are
        cast (``TRY_CAST``)."""
        self._close_writer()
        if not self._files:
            return
        con = sandboxed_connection(allowed_dirs=[self.dir])  # its own staged files only (casts come from a spec)
        try:
            files = ", ".join("'" + str(f).replace("'", "''") + "'" for f in self._files)
            rel = f"read_parquet([{files}], union_by_name=true)"
            cols = con.sql(f"DESCRIBE SELECT * FROM {rel}").fetchall()
            select = []
            for name, typ, *_ in cols:
                q = quote_identifier(name)
                target = _SQL_TYPES.get((casts or {}).get(name, ""))
                if target and typ.upper() in ("VARCHAR", "BOOLEAN"):
                    select.append(f"TRY_CAST({q} AS {target}) AS {q}")
                else:
                    select.append(q)
            reader = con.sql(f"SELECT {', '.join(select)} FROM {rel}").to_arrow_reader(batch_rows)
            yield from reader
        finally:
            con.close()

    def close(self) -> None:
        self._close_writer()
        shutil.rmtree(self.dir, ignore_errors=True)


def _no_null_types(batch: pa.RecordBatch) -> pa.RecordBatch:
    """All-null JSON columns infer Arrow's ``null`` type; store them as nullable strings."""
    if not any(pa.types.is_null(f.type) for f in batch.schema):
        return batch
    arrays = [c.cast(pa.string()) if pa.types.is_null(c.type) else c for c in batch.columns]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)
