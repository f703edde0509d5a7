"""The processed topic: every row a micro-batch keeps, after the shared transform (parsed, transformed,
filtered, joined, enriched, deduplicated) and **before rollup**, as one JSON object per event — ``__time``
in epoch millis, the dimensions and the metrics' input fields. It is what a real Apache Druid's Kafka
supervisor reads (``radctl druid specs`` exports that supervisor: ``docs/druid-cluster.md``), so a Druid
cluster serves the same real-time rows radstack's own segments hold.

Written only for datasources whose spec sets ``processing.processedTopic``, from the executor task
that indexed the rows, with the same per-worker idempotent producer as the dead letters. Delivery is
at least once: a micro-batch replayed after a crash between this write and its publish writes its rows
again (Druid then over-counts that batch until the batch layer's rebuild replaces the interval — the
same best-effort contract as every real-time path of the Lambda architecture).
"""

from __future__ import annotations

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from radstack.spec import TIME_COLUMN, DatasourceSpec
from realtime.streaming.dlq import deliver_all

__all__ = ["processed_rows", "produce_processed"]


def processed_rows(table: pa.Table) -> list[bytes]:
    """Each row as JSON, ``__time`` as epoch millis (nulls left out, as Druid's JSON reader sees them)."""
    if TIME_COLUMN in table.column_names and pa.types.is_timestamp(table.schema.field(TIME_COLUMN).type):
        i = table.column_names.index(TIME_COLUMN)
        # truncated to Druid's millisecond __time (micro/nano timestamps carry sub-ms digits)
        millis = pc.cast(pc.cast(table.column(i), pa.timestamp("ms"), safe=False), pa.int64())
        table = table.set_column(i, TIME_COLUMN, millis)
    return [orjson.dumps({k: v for k, v in row.items() if v is not None}) for row in table.to_pylist()]


def produce_processed(rows: pa.Table, spec: DatasourceSpec, bootstrap_servers: str, timeout: float = 60.0) -> int:
    """Produce ``rows`` to ``spec``'s processed topic; returns how many were delivered, raises if any
    was not (the micro-batch then fails and is retried, as for dead letters)."""
    topic = spec.processing.processed_topic
    if not topic or rows.num_rows == 0:
        return 0
    return deliver_all(bootstrap_servers, ((topic, v, None) for v in processed_rows(rows)),
                       f"processed rows for {topic}", timeout)
