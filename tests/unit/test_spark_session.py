"""How rows cross between Spark's JVM and its Python workers (``arrow_batch_conf``)."""

from __future__ import annotations

import pytest

from radstack.pipeline.spark_session import (
    ARROW_BATCH_ROWS,
    ARROW_COLUMN_BYTES,
    KAFKA_MESSAGE_MAX_BYTES,
    arrow_batch_conf,
)

BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"


def test_the_per_row_byte_check_is_off() -> None:
    # Spark skips sizing the vectors after every row only for exactly Int.MaxValue
    assert arrow_batch_conf()[BYTES] == "2147483647" == str(ARROW_COLUMN_BYTES)


@pytest.mark.parametrize("max_event_bytes", [0, 1, 1_000_000, KAFKA_MESSAGE_MAX_BYTES, 4_000_000, 10_000_000, 2**31])
def test_a_batch_of_the_largest_events_fits_one_arrow_column(max_event_bytes: int) -> None:
    rows = int(arrow_batch_conf(max_event_bytes)[ROWS])
    largest = max(max_event_bytes, KAFKA_MESSAGE_MAX_BYTES)
    assert 1 <= rows <= ARROW_BATCH_ROWS
    assert rows * largest <= ARROW_COLUMN_BYTES or rows == 1
    assert (rows + 1) * largest > ARROW_COLUMN_BYTES or rows == ARROW_BATCH_ROWS  # no smaller than it must be


def test_default_events_give_2047_rows_and_larger_events_fewer() -> None:
    assert arrow_batch_conf(1_000_000)[ROWS] == "2047"  # the receiver's default limit, under Kafka's 1 MB
    assert arrow_batch_conf(10_000_000)[ROWS] == "214"
