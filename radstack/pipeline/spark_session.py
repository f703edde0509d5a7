"""One place that builds the SparkSession every radstack Spark job uses.

The settings that matter on a small machine (see /work/shared/docs/environment.md): few shuffle
partitions (they are frozen into a streaming checkpoint), Python worker reuse, Spark bound to
127.0.0.1 with the UI off, ``TIMESTAMP_MICROS`` Parquet, UTC session time zone, and the Kafka
connector jars from the JVM manifest on ``spark.jars``. Spark's and Java's logs go to a file under
``$RADSTACK_HOME/logs`` (a log4j2 configuration written there), never to the terminal.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radstack.config import Settings, SparkSettings
from radstack.jvm import class_sharing_options, jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["build_spark_session", "session_conf", "is_connect", "jvm_options", "driver_jvm_options", "write_log4j2_config", "arrow_batch_conf", "DEFAULT_SHUFFLE_PARTITIONS"]

DEFAULT_SHUFFLE_PARTITIONS = 4

ARROW_COLUMN_BYTES = 2**31 - 1
"""The most bytes one column of one Arrow batch can hold (32-bit offsets) — Spark's "no byte limit"."""
KAFKA_MESSAGE_MAX_BYTES = 1_048_588
"""Kafka's default ``message.max.bytes``: no event read from Kafka is larger (unless a broker raises it)."""
ARROW_BATCH_ROWS = 10_000
"""Spark's default ``spark.sql.execution.arrow.maxRecordsPerBatch``."""


def arrow_batch_conf(max_event_bytes: int = 0) -> dict[str, str]:
    """How rows cross between the JVM and Spark's Python workers (``mapInArrow``, Arrow UDFs): batches
    bounded by rows only.

    Spark's byte bound (``spark.sql.execution.arrow.maxBytesPerBatch``, 256 MB by default) is checked
    by sizing every Arrow vector after every row — about 9 % of a batch rebuild (docs/benchmarks.md);
    the value :data:`ARROW_COLUMN_BYTES` turns that check off. The row bound then keeps each column
    under Arrow's 2 GB: a value comes from one event, and no event is larger than
    ``max(max_event_bytes, Kafka's message.max.bytes)``, so that many rows fit whatever the events."""
    per_row = max(int(max_event_bytes), KAFKA_MESSAGE_MAX_BYTES)
    rows = max(1, min(ARROW_BATCH_ROWS, ARROW_COLUMN_BYTES // per_row))
    return {"spark.sql.execution.arrow.maxBytesPerBatch": str(ARROW_COLUMN_BYTES),
            "spark.sql.execution.arrow.maxRecordsPerBatch": str(rows)}  # fmt: skip

_LOG4J2 = """\
status = error
name = radstack
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss.SSS}} %p %c{{1}}: %m%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
logger.kafka.name = org.apache.kafka
logger.kafka.level = warn
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
"""


def write_log4j2_config(log_dir: Path, name: str = "spark", level: str = "warn") -> Path:
    """A log4j2 properties file sending every JVM log line to ``log_dir/<name>.log``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    conf = log_dir / f"log4j2-{name}.properties"
    conf.write_text(_LOG4J2.format(path=log_dir / f"{name}.log", level=level))
    return conf


def jvm_options(log_conf: Path, extra: str = "") -> str:
    """The driver's and executors' JVM options: radstack's log4j2 configuration, then ``extra``."""
    opts = f"-Dlog4j2.configurationFile=file:{log_conf} -Dlog4j.configurationFile=file:{log_conf}"
    return f"{opts} {extra.strip()}" if extra.strip() else opts


def driver_jvm_options(log_conf: Path, extra: str = "", jvm_dir: Path | None = None, *, class_sharing: bool = True) -> str:
    """:func:`jvm_options` for the driver (in ``local[*]`` also the executors): with ``class_sharing``,
    the class-data sharing archive's options first when it was built (:mod:`radstack.jvm`), unless
    ``extra`` dumps one (a dump cannot start from another dynamic archive)."""
    if not class_sharing or "ArchiveClassesAtExit" in extra:
        return jvm_options(log_conf, extra)
    return jvm_options(log_conf, f"{class_sharing_options(jvm_dir)} {extra}")


def session_conf(
    settings: Settings | None = None,
    *,
    shuffle_partitions: int | None = None,
    kafka: bool = True,
    log_name: str = "spark",
    extra_conf: dict[str, str] | None = None,
    java_options: str = "",
    class_sharing: bool | None = None,
) -> dict[str, str]:
    """Every Spark setting of a radstack session but its master and name (:func:`build_spark_session`;
    the warm Spark Connect server of :mod:`radstack.pipeline.spark_connect` starts with the same);
    ``class_sharing``: the driver maps the class-data sharing archive (default: ``jvm.class_sharing``)."""
    driver_address = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
    spark_settings = settings.spark if settings is not None else SparkSettings()
    if settings is not None:
        log_dir = Path(settings.logs_dir)
    else:
        log_dir = Path(os.environ.get("RADSTACK_HOME", Path.home() / ".radstack")).expanduser() / "logs"
    log_conf = write_log4j2_config(log_dir, log_name)
    java_opts = jvm_options(log_conf, java_options)
    jvm_dir = Path(settings.jvm_dir) if settings is not None else None
    if class_sharing is None:
        class_sharing = settings.jvm.class_sharing if settings is not None else True
    driver_opts = driver_jvm_options(log_conf, java_options, jvm_dir, class_sharing=class_sharing)
    parts = int(shuffle_partitions or spark_settings.shuffle_partitions or DEFAULT_SHUFFLE_PARTITIONS)
    conf = {
        "spark.driver.memory": spark_settings.driver_memory or "2g",
        "spark.driver.bindAddress": driver_address,
        "spark.driver.host": driver_address,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(parts),
        "spark.default.parallelism": str(parts),
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.python.worker.reuse": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # the exact state row count costs a read before every write (~15 % of a dedup batch here)
        "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "false",
        "spark.sql.streaming.noDataMicroBatches.enabled": "true",
        "spark.driver.extraJavaOptions": driver_opts,
        "spark.executor.extraJavaOptions": java_opts,
        **arrow_batch_conf(settings.receiver.max_event_bytes if settings is not None else 0),
    }  # fmt: skip
    if kafka:
        conf["spark.jars"] = ",".join(str(p) for p in jars("spark-kafka", jvm_dir))
    conf.update({str(k): str(v) for k, v in spark_settings.conf.items()})
    conf.update(extra_conf or {})
    return conf


def build_spark_session(
    settings: Settings | None = None,
    *,
    app_name: str = "radstack",
    master: str | None = None,
    shuffle_partitions: int | None = None,
    kafka: bool = True,
    log_name: str = "spark",
    extra_conf: dict[str, str] | None = None,
    java_options: str = "",
) -> SparkSession:
    """Get or create the session. ``settings`` (radstack Settings) supplies ``spark.master``,
    ``spark.shuffle_partitions``, ``spark.driver_memory``, ``spark.conf`` and the log directory;
    ``kafka`` adds Spark's Kafka connector jars; ``java_options`` go to the driver's and executors' JVMs
    after radstack's own. The driver maps the class-data sharing archive when one was built for this
    JDK and PySpark (:func:`radstack.jvm.class_sharing_options`, ``jvm.class_sharing``). An already
    running session is returned as is (its jars cannot change any more)."""
    # the driver's address: loopback, unless this machine's address for Spark is set (a driver on one
    # host of a cluster whose executors run on others: `radctl cluster exec` sets it)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    from pyspark.sql import SparkSession  # lazy: only Spark code paths load pyspark

    spark_settings = settings.spark if settings is not None else SparkSettings()
    b = SparkSession.builder.appName(app_name).master(master or spark_settings.master or "local[*]")
    for k, v in session_conf(settings, shuffle_partitions=shuffle_partitions, kafka=kafka, log_name=log_name,
                             extra_conf=extra_conf, java_options=java_options).items():  # fmt: skip
        b = b.config(k, v)
    _launch_quiet_gateway(b._options)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM in this process: no ``_jvm``, no RDDs)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


JVM_NOISE = (b"WARNING: Using incubator modules",)
"""Lines the driver JVM prints on every start that tell a user nothing: Spark's launcher always adds
``--add-modules=jdk.incubator.vector`` and the JVM has no switch to silence its warning about it."""


def _launch_quiet_gateway(options: dict[str, str]) -> None:
    """Start the driver JVM ourselves (when none runs yet) with its stderr piped through a filter that
    drops :data:`JVM_NOISE` and passes everything else on, byte for byte."""
    from pyspark import SparkConf, SparkContext  # lazy: only Spark code paths load pyspark
    from pyspark.java_gateway import launch_gateway  # lazy: as above

    if SparkContext._gateway is not None:  # type: ignore[attr-defined]
        return
    conf = SparkConf()
    for k, v in options.items():
        conf.set(k, v)
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.stderr is not None:
        threading.Thread(target=_pump, args=(proc.stderr,), name="spark-jvm-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)  # type: ignore[attr-defined]


def _pump(stream: Any) -> None:
    out = sys.stderr.buffer if hasattr(sys.stderr, "buffer") else None
    for line in iter(stream.readline, b""):
        if out is not None and not line.startswith(JVM_NOISE):
            with contextlib.suppress(OSError, ValueError):
                out.write(line)
                out.flush()


def _python() -> str:

    return sys.executable
