"""Dead letters: invalid events go to ``<topic>.dlq`` (or ``processing.deadLetterTopic``) with the
original bytes as the value and the reason and source coordinates as headers
(``radstack.reason``, ``radstack.topic``, ``radstack.partition``, ``radstack.offset``).

Written with Spark's Kafka batch writer from inside foreachBatch. Delivery is at least once: a batch
replayed after a crash between the dead-letter write and the publish writes its dead letters again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from radstack.pipeline.parse import OFFSET_COLUMN, PARTITION_COLUMN, RAW_COLUMN, REASON_COLUMN, TOPIC_COLUMN
from radstack.spec import DatasourceSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["dlq_topic", "dlq_topics", "write_dead_letters"]


def dlq_topic(spec: DatasourceSpec, topic: str) -> str:
    return spec.processing.dead_letter_topic or f"{topic}.dlq"


def dlq_topics(spec: DatasourceSpec, topics: list[str]) -> list[str]:
    return sorted({dlq_topic(spec, t) for t in topics})


def write_dead_letters(dead: DataFrame, spec: DatasourceSpec, bootstrap_servers: str) -> None:
    """Produce the rows of :func:`radstack.pipeline.parse.dead_letters` to their dead-letter topics."""
    from pyspark.sql import functions as F

    fixed = spec.processing.dead_letter_topic
    topic = F.lit(fixed) if fixed else F.concat(F.coalesce(F.col(TOPIC_COLUMN), F.lit("events")), F.lit(".dlq"))
    headers = F.array(
        F.struct(F.lit("radstack.reason").alias("key"), F.col(REASON_COLUMN).cast("binary").alias("value")),
        F.struct(F.lit("radstack.topic").alias("key"), F.col(TOPIC_COLUMN).cast("binary").alias("value")),
        F.struct(F.lit("radstack.partition").alias("key"), F.col(PARTITION_COLUMN).cast("string").cast("binary").alias("value")),
        F.struct(F.lit("radstack.offset").alias("key"), F.col(OFFSET_COLUMN).cast("string").cast("binary").alias("value")),
    )
    (
        dead.select(
            topic.alias("topic"),
            F.coalesce(F.col(RAW_COLUMN), F.lit(b"").cast("binary")).alias("value"),
            headers.alias("headers"),
        )
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("kafka.acks", "all")
        .option("includeHeaders", "true")
        .save()
    )
