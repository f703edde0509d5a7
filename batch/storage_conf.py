"""Spark settings a deep storage needs: ``s3a`` endpoint, credentials chain and the ``hadoop-aws`` jars
for S3; ``fs.defaultFS`` and the user for HDFS; nothing for a local directory. Light on imports: the
Airflow DAGs (their own venv, no pyarrow) use it to build spark-submit arguments."""

from __future__ import annotations

from pathlib import Path

from radstack.config import DeepStorageSettings
from radstack.jvm import jars

__all__ = ["storage_spark_conf"]


def storage_spark_conf(deep_storage: DeepStorageSettings, jvm_dir: Path | None = None) -> dict[str, str]:
    """Spark settings to read (and write) the deep storage ``deep_storage`` names."""
    typ = deep_storage.type
    conf: dict[str, str] = {}
    if typ == "s3":
        conf["spark.jars"] = ",".join(str(p) for p in jars("hadoop-aws", Path(jvm_dir) if jvm_dir else None))
        endpoint = deep_storage.endpoint_url
        pre = "spark.hadoop.fs.s3a."
        conf[pre + "impl"] = "org.apache.hadoop.fs.s3a.S3AFileSystem"
        conf[pre + "endpoint.region"] = deep_storage.region or "us-east-1"
        if endpoint:
            conf[pre + "endpoint"] = endpoint
            conf[pre + "path.style.access"] = "true"
            conf[pre + "connection.ssl.enabled"] = "true" if endpoint.startswith("https") else "false"
        conf[pre + "aws.credentials.provider"] = (
            "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider,"
            "software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider,"
            "org.apache.hadoop.fs.s3a.auth.IAMInstanceCredentialsProvider"
        )
        # no directory-marker/committer magic needed: the job only reads raw files through s3a
        conf[pre + "change.detection.mode"] = "none"
    elif typ == "hdfs":
        fs = deep_storage.hdfs_fs_url
        if fs:
            conf["spark.hadoop.fs.defaultFS"] = fs
        user = deep_storage.user
        if user:
            conf["spark.hadoop.hadoop.user.name"] = user
    return conf
