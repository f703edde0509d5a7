"""HDFS through WebHDFS under a base path: ``deep_storage.type: hdfs``, ``loadSpec`` type ``hdfs``; Spark
reads it at ``deep_storage.hdfs_fs_url`` (``fs.defaultFS``) as ``deep_storage.user``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from radstack.config import DeepStorageSettings
from radstack.storage.deep_storage.backends.base import Backend
from radstack.storage.deep_storage.base import DeepStorage, DeepStorageError


def _open(base_path: str, cfg: DeepStorageSettings) -> DeepStorage:
    # imported here: the hdfs package is not in the Airflow venv, which builds Spark settings from this module
    from radstack.storage.deep_storage.hdfs import HdfsDeepStorage

    return HdfsDeepStorage(namenode_url=cfg.namenode_url, base_path=base_path, fs_url=cfg.hdfs_fs_url or None,
                           user=cfg.user or None)


class HdfsWebHdfs(Backend):
    type = "hdfs"
    load_spec_types = ("hdfs",)

    def from_settings(self, cfg: DeepStorageSettings) -> DeepStorage:
        if not cfg.namenode_url:
            raise DeepStorageError("deep_storage.namenode_url (WebHDFS, http://host:port) is required for type hdfs")
        return _open(cfg.path or "/radstack", cfg)

    def from_load_spec(self, load_spec: Mapping[str, Any], cfg: DeepStorageSettings) -> tuple[DeepStorage, str]:
        if not cfg.namenode_url:
            raise DeepStorageError("an hdfs loadSpec needs deep_storage.namenode_url (WebHDFS)")
        storage = _open("/", cfg)
        return storage, storage.key_for_load_spec(load_spec)

    def spark_conf(self, cfg: DeepStorageSettings, jvm_dir: Path | None = None) -> dict[str, str]:
        conf: dict[str, str] = {}
        if cfg.hdfs_fs_url:
            conf["spark.hadoop.fs.defaultFS"] = cfg.hdfs_fs_url
        if cfg.user:
            conf["spark.hadoop.hadoop.user.name"] = cfg.user
        return conf

    def druid_location(self, load_spec: Mapping[str, Any], cfg: DeepStorageSettings) -> str:
        path = str(load_spec["path"])
        if urlparse(path).scheme == "hdfs":
            return path
        fs = cfg.hdfs_fs_url.rstrip("/")
        if not fs:
            raise DeepStorageError(f"hdfs loadSpec {path!r} has no hdfs:// scheme and deep_storage.hdfs_fs_url is empty")
        return fs + "/" + urlparse(path).path.lstrip("/")

    def druid_input_source(self, locations: Sequence[str]) -> dict[str, Any]:
        return {"type": "hdfs", "paths": list(locations)}


BACKEND = HdfsWebHdfs()
