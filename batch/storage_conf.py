"""Spark settings a deep storage needs (each backend's ``spark_conf``: ``s3a`` endpoint, credentials chain
and the ``hadoop-aws`` jars for S3; ``fs.defaultFS`` and the user for HDFS; nothing for a local
directory). Light on imports: the Airflow DAGs (their own venv, no pyarrow, boto3 or hdfs) use it to build
spark-submit arguments."""

from __future__ import annotations

from pathlib import Path

from radstack.config import DeepStorageSettings
from radstack.storage.deep_storage.backends import backend_named

__all__ = ["storage_spark_conf"]


def storage_spark_conf(deep_storage: DeepStorageSettings, jvm_dir: Path | None = None) -> dict[str, str]:
    """Spark settings to read (and write) the deep storage ``deep_storage`` names (its backend's)."""
    return backend_named(deep_storage.type).spark_conf(deep_storage, jvm_dir)
