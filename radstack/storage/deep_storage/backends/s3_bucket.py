"""An S3 bucket (AWS, MinIO, moto) under a key prefix: ``deep_storage.type: s3``, ``loadSpec`` types
``s3`` and ``s3_zip``; Spark reads it through ``s3a`` with the ``hadoop-aws`` jars."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from radstack.config import DeepStorageSettings
from radstack.jvm import jars
from radstack.storage.deep_storage.backends.base import Backend
from radstack.storage.deep_storage.base import DeepStorage, DeepStorageError

_S3A = "spark.hadoop.fs.s3a."


def _open(bucket: str, prefix: str, cfg: DeepStorageSettings) -> DeepStorage:
    # imported here: boto3 is not in the Airflow venv, which builds Spark settings from this module
    from radstack.storage.deep_storage.s3 import S3DeepStorage

    return S3DeepStorage(bucket=bucket, prefix=prefix, endpoint_url=cfg.endpoint_url or None,
                         region=cfg.region or "us-east-1")


class S3Bucket(Backend):
    type = "s3"
    load_spec_types = ("s3", "s3_zip")

    def from_settings(self, cfg: DeepStorageSettings) -> DeepStorage:
        if not cfg.bucket:
            raise DeepStorageError("deep_storage.bucket is required for type s3")
        return _open(cfg.bucket, cfg.path, cfg)

    def from_load_spec(self, load_spec: Mapping[str, Any], cfg: DeepStorageSettings) -> tuple[DeepStorage, str]:
        storage = _open(str(load_spec["bucket"]), "", cfg)
        return storage, storage.key_for_load_spec(load_spec)

    def spark_conf(self, cfg: DeepStorageSettings, jvm_dir: Path | None = None) -> dict[str, str]:
        conf = {"spark.jars": ",".join(str(p) for p in jars("hadoop-aws", Path(jvm_dir) if jvm_dir else None)),
                _S3A + "impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
                _S3A + "endpoint.region": cfg.region or "us-east-1"}
        if cfg.endpoint_url:
            conf[_S3A + "endpoint"] = cfg.endpoint_url
            conf[_S3A + "path.style.access"] = "true"
            conf[_S3A + "connection.ssl.enabled"] = "true" if cfg.endpoint_url.startswith("https") else "false"
        conf[_S3A + "aws.credentials.provider"] = (
            "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider,"
            "software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider,"
            "org.apache.hadoop.fs.s3a.auth.IAMInstanceCredentialsProvider"
        )
        # no directory-marker/committer magic needed: the job only reads raw files through s3a
        conf[_S3A + "change.detection.mode"] = "none"
        return conf

    def druid_location(self, load_spec: Mapping[str, Any], cfg: DeepStorageSettings) -> str:
        return f"s3://{load_spec['bucket']}/{str(load_spec['key']).lstrip('/')}"

    def druid_input_source(self, locations: Sequence[str]) -> dict[str, Any]:
        return {"type": "s3", "uris": list(locations)}


BACKEND = S3Bucket()
