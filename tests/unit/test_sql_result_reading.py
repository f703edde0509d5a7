"""Reading a SQL answer's batches (serving/broker/sql/engine.py): DuckDB's Arrow stream reports its
errors as Arrow's OSError; the pool running out on a later batch is Druid's 429, never a 500 (the attack
suite's sql-string-agg-size victim got a 500 when the read-ahead found the pool full)."""

from __future__ import annotations

import itertools
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from serving.broker.sql.engine import SqlResult, next_batch
from serving.errors import DruidError

_OOM = "Out of Memory Error: failed to allocate data of size 32.0 KiB (705.9 MiB/512.0 MiB used)"


class _Reader:
    """An Arrow reader whose batches after ``good`` fail as DuckDB's stream fails."""

    def __init__(self, good: int, message: str = _OOM) -> None:
        self.good, self.message, self.read = good, message, 0
        self.schema = pa.schema([("n", pa.int64())])

    def read_next_batch(self) -> pa.RecordBatch:
        self.read += 1
        if self.read > self.good:
            raise OSError(self.message)
        return pa.record_batch([pa.array([self.read])], schema=self.schema)


def _result(reader: Any) -> SqlResult:
    return SqlResult(columns=[], first=next_batch(reader), reader=reader, translation=None)  # type: ignore[arg-type]


def test_the_stream_running_out_of_memory_is_duckdbs_out_of_memory_and_an_interrupt_its_interrupt() -> None:
    with pytest.raises(duckdb.OutOfMemoryException):
        next_batch(_Reader(0))
    with pytest.raises(duckdb.InterruptException):
        next_batch(_Reader(0, "INTERRUPT Error: Interrupted!"))
    with pytest.raises(OSError, match="disk"):  # anything else stays what it was
        next_batch(_Reader(0, "IO Error: disk"))


@pytest.mark.parametrize("good", [1, 3])
def test_a_full_pool_on_a_later_batch_answers_429(good: int) -> None:
    res = _result(_Reader(good))
    if good == 1:  # the read-ahead (before any answer): whole() raises Druid's capacity error
        with pytest.raises(DruidError) as ei:
            res.whole()
    else:  # a streamed answer: cut off with the same error
        assert res.whole() is False
        with pytest.raises(DruidError) as ei:
            list(res.batches())
    assert ei.value.status == 429 and "memory" in ei.value.message


def test_the_read_ahead_happens_once() -> None:
    reader = _Reader(10)
    res = _result(reader)
    assert res.whole() is False and res.whole() is False and reader.read == 2
    assert [b.column(0)[0].as_py() for b in itertools.islice(res.batches(), 3)] == [1, 2, 3]
