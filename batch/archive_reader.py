"""Reading the raw archive (:mod:`realtime.archiver`) for an interval, from any deep storage.

The archiver writes ``raw/{topic}/dt=YYYY-MM-DD/hour=HH/*.parquet`` partitioned by **event** hour, so an
interval's events are in the hour folders it overlaps. :func:`archive_paths` lists the folders that
exist (through the deep-storage interface: local, WebHDFS, S3) and returns what Spark reads —
``file://``, ``hdfs://`` or ``s3a://`` URIs; :func:`read_archive` reads them with the archive's schema
(no inference, temp files ignored: they start with ``.``) and keeps the rows whose event time is in the
asked range, in the column layout of Spark's Kafka source (``key, value, topic, partition, offset,
timestamp, timestampType``) plus ``event_time``, so the shared pipeline reads both the same way.

:func:`storage_spark_conf` is the Spark configuration the deep storage needs (``s3a`` endpoint and
``hadoop-aws`` jars for S3, ``fs.defaultFS`` for HDFS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from batch.storage_conf import storage_spark_conf
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.raw_archive import (
    HOUR_MS,
    PARSED_COLUMN,
    PARSED_KINDS,
    hour_dir,
    parse_data_name,
    parsed_column,
    topic_prefix,
)
from radstack.time.granularity import Granularity
from radstack.time.intervals import Interval

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "HOUR_MS",
    "archive_hours",
    "archive_paths",
    "archive_hour_files",
    "archived_records_at_most",
    "spark_archive_schema",
    "read_archive",
    "parsed_archive_columns",
    "storage_spark_conf",
    "KAFKA_LAYOUT",
]

_HOUR = Granularity.parse("hour")

#: archive column → the Kafka source's column name (what the shared pipeline reads)
KAFKA_LAYOUT: dict[str, str] = {
    "key": "key",
    "value": "value",
    "topic": "topic",
    "partition": "partition",
    "offset": "offset",
    "kafka_timestamp": "timestamp",
    "timestamp_type": "timestampType",
    "event_time": "event_time",
}


def archive_hours(interval: Interval) -> list[int]:
    """Start millis of the event hours ``interval`` overlaps."""
    return [h.start for h in _HOUR.iterate(interval)]


def archive_hour_files(deep_storage: DeepStorage, topic: str, interval: Interval) -> dict[str, list[str]]:
    """The existing hour folders of ``topic`` that hold events of ``interval`` (deep-storage keys, in
    order), each with the keys of the files in it (none listed: the folder is left out)."""
    wanted = {hour_dir(topic, h) for h in archive_hours(interval)}
    days = sorted({w.rsplit("/", 1)[0] for w in wanted})
    present_days = {d.rstrip("/") for d in deep_storage.list_dirs(topic_prefix(topic))}
    out: dict[str, list[str]] = {}
    for day in days:
        if day not in present_days:
            continue
        for hour in deep_storage.list_dirs(day + "/"):
            hour = hour.rstrip("/")
            if hour in wanted and (files := deep_storage.list(hour + "/")):
                out[hour] = files
    return dict(sorted(out.items()))


def archive_paths(deep_storage: DeepStorage, topic: str, interval: Interval) -> list[str]:
    """URIs of the existing hour folders of ``topic`` that hold events of ``interval``."""
    return [deep_storage.uri(hour) for hour in archive_hour_files(deep_storage, topic, interval)]


def archived_records_at_most(deep_storage: DeepStorage, topics: Mapping[str, Interval]) -> int:
    """An upper bound of the records archived for each topic's interval, from the file names alone (each
    names its flush's offset range; a flush spread over several event hours names its whole range in
    each hour's file): what the rebuild may read, known before Spark starts."""
    total = 0
    for topic, interval in topics.items():
        for files in archive_hour_files(deep_storage, topic, interval).values():
            for key in files:
                flush = parse_data_name(key)
                if flush is not None:
                    total += flush.last - flush.first + 1
    return total


def spark_archive_schema() -> Any:
    """The Spark schema of :data:`realtime.archiver.records.SCHEMA`."""
    from pyspark.sql.types import (  # lazy: only Spark code paths load pyspark
        ArrayType,
        BinaryType,
        BooleanType,
        ByteType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampNTZType,
    )

    return StructType(
        [
            StructField("topic", StringType(), False),
            StructField("partition", IntegerType(), False),
            StructField("offset", LongType(), False),
            StructField("kafka_timestamp", TimestampNTZType(), True),
            StructField("timestamp_type", ByteType(), False),
            StructField("key", BinaryType(), True),
            StructField("value", BinaryType(), True),
            StructField(
                "headers",
                ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
                True,
            ),
            StructField("event_time", TimestampNTZType(), False),
            StructField("event_time_from_kafka", BooleanType(), False),
            StructField("valid_json", BooleanType(), False),
        ]
    )


def read_archive(
    spark: SparkSession,
    deep_storage: DeepStorage,
    ranges: Mapping[str, Interval],
    fields: Sequence[str] = (),
) -> DataFrame:
    """Raw records of each ``topic`` whose event time is in ``ranges[topic]``, as one DataFrame in the
    Kafka source's layout (``timestamp`` = the Kafka timestamp, UTC) plus ``event_time``. With
    ``fields``: also the parsed archive's ``parsed`` flag and every kind's column of each field
    (null where a file has none: an older archive reads as not parsed)."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark
    from pyspark.sql.types import StructField, StructType  # lazy: as above

    schema = spark_archive_schema()
    parsed = parsed_archive_columns(fields)
    if parsed:
        schema = StructType([*schema.fields, *[StructField(name, _spark_type(t), True) for name, t in parsed]])
    frames = []
    for topic, iv in sorted(ranges.items()):
        paths = archive_paths(deep_storage, topic, iv)
        if not paths:
            continue
        df = spark.read.schema(schema).parquet(*paths)
        lo = F.lit(iv.start).cast("long")
        hi = F.lit(iv.end).cast("long")
        millis = F.unix_millis(F.to_timestamp(F.col("event_time")))
        frames.append(df.where((F.col("topic") == topic) & (millis >= lo) & (millis < hi)))
    if not frames:
        df = spark.createDataFrame([], schema)
    else:
        df = frames[0]
        for f in frames[1:]:
            df = df.unionByName(f)
    return df.select(
        *[
            (F.col(src).cast("timestamp") if src in ("kafka_timestamp", "event_time") else F.col(src)).alias(dst)
            for src, dst in KAFKA_LAYOUT.items()
        ],
        *[F.col(f"`{name}`") for name, _ in parsed],
    )


def parsed_archive_columns(fields: Sequence[str]) -> list[tuple[str, str]]:
    """(archive column, Spark SQL type) of the parsed archive for ``fields``: ``parsed``, then each
    field's column of every kind (:data:`radstack.storage.raw_archive.PARSED_KINDS`)."""
    if not fields:
        return []
    return [(PARSED_COLUMN, "boolean"),
            *[(parsed_column(kind, f), t) for f in dict.fromkeys(fields) for kind, t in PARSED_KINDS.items()]]


def _spark_type(name: str) -> Any:
    """The Spark type of a parsed column's SQL type name, built here: parsing the name would be a call
    to the server on a Spark Connect session, one per column."""
    from pyspark.sql import types as T  # lazy: only Spark code paths load pyspark

    return {"string": T.StringType(), "bigint": T.LongType(), "double": T.DoubleType(),
            "boolean": T.BooleanType()}[name]  # fmt: skip
