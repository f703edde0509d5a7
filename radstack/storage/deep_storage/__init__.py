"""Deep storage: where segments (``segments/…``) and the raw archive (``raw/…``) live.

Three backends share one interface, :class:`DeepStorage`: a local directory
(:class:`~radstack.storage.deep_storage.local.LocalDeepStorage`), S3 through boto3
(:class:`~radstack.storage.deep_storage.s3.S3DeepStorage`) and HDFS through WebHDFS
(:class:`~radstack.storage.deep_storage.hdfs.HdfsDeepStorage`). :func:`open_deep_storage` builds the one the
``deep_storage`` settings name.

Keys are relative POSIX paths (``segments/ds/…/data.parquet``). No key component may start with
``.``: that namespace holds in-flight temp files (Hadoop's hidden-file rule, so Spark ignores them too),
which ``list`` never returns. ``put_file``/``put_bytes`` are atomic — a reader sees either no object or
the whole one under the key. See ``docs/deep-storage.md`` for the guarantees per backend.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from radstack.config import DeepStorageSettings, Settings
from radstack.storage.deep_storage.base import (
    DeepStorage,
    DeepStorageError,
    is_hidden,
    join_key,
    normalize_key,
    temp_name,
)
from radstack.storage.deep_storage.hdfs import HdfsDeepStorage
from radstack.storage.deep_storage.local import LocalDeepStorage, atomic_copy
from radstack.storage.deep_storage.s3 import S3DeepStorage

__all__ = [
    "DeepStorage",
    "DeepStorageError",
    "deep_storage_settings",
    "fetch_load_spec",
    "is_hidden",
    "join_key",
    "normalize_key",
    "open_deep_storage",
    "temp_name",
]


def deep_storage_settings(source: Settings | DeepStorageSettings | Mapping[str, Any]) -> DeepStorageSettings:
    """The ``deep_storage`` section of ``source``: the :class:`Settings`, the section itself, the
    section as a plain mapping (how Spark executors receive it) or a whole settings mapping."""
    if isinstance(source, Settings):
        return source.deep_storage
    if isinstance(source, DeepStorageSettings):
        return source
    section = source["deep_storage"] if isinstance(source.get("deep_storage"), Mapping) else source
    try:
        return DeepStorageSettings.model_validate(dict(section))
    except ValidationError as e:
        raise DeepStorageError(f"deep_storage: {e.errors()[0]['loc'][0]}: {e.errors()[0]['msg']}") from None


def open_deep_storage(settings: Settings | DeepStorageSettings | Mapping[str, Any]) -> DeepStorage:
    """The backend the ``deep_storage`` settings name (``type``: ``local`` | ``s3`` | ``hdfs``)."""
    cfg = deep_storage_settings(settings)
    if cfg.type == "local":
        if not cfg.path:
            raise DeepStorageError("deep_storage.path is required for type local")
        return LocalDeepStorage(Path(cfg.path).expanduser())
    if cfg.type == "s3":
        if not cfg.bucket:
            raise DeepStorageError("deep_storage.bucket is required for type s3")
        return S3DeepStorage(bucket=cfg.bucket, prefix=cfg.path, endpoint_url=cfg.endpoint_url or None,
                             region=cfg.region or "us-east-1")
    if not cfg.namenode_url:
        raise DeepStorageError("deep_storage.namenode_url (WebHDFS, http://host:port) is required for type hdfs")
    return HdfsDeepStorage(namenode_url=cfg.namenode_url, base_path=cfg.path or "/radstack",
                           fs_url=cfg.hdfs_fs_url or None, user=cfg.user or None)


def fetch_load_spec(
    load_spec: Mapping[str, Any], local_path: Path, settings: Settings | DeepStorageSettings | Mapping[str, Any]
) -> None:
    """Copy what a segment's ``loadSpec`` points at to ``local_path``.

    A file lands at ``local_path``; a folder (e.g. a segment directory) is copied into the folder
    ``local_path`` keeping relative paths. The load spec's own type decides the backend (a ``local``
    spec is read from its absolute path; ``s3`` from its bucket with the configured endpoint; ``hdfs``
    through the configured WebHDFS address), so segments written under another configuration still load.
    """
    typ = str(load_spec.get("type", ""))
    local_path = Path(local_path)
    cfg = deep_storage_settings(settings)
    storage: DeepStorage
    if typ == "local":
        src = Path(str(load_spec["path"]))
        if src.is_dir():
            _copy_local_tree(src, local_path)
            return
        if not src.is_file():
            raise FileNotFoundError(str(src))

        atomic_copy(src, local_path)
        return
    if typ in ("s3", "s3_zip"):

        storage = S3DeepStorage(
            bucket=str(load_spec["bucket"]),
            prefix="",
            endpoint_url=cfg.endpoint_url or None,
            region=cfg.region or "us-east-1",
        )
    elif typ == "hdfs":

        if not cfg.namenode_url:
            raise DeepStorageError("an hdfs loadSpec needs deep_storage.namenode_url (WebHDFS)")
        storage = HdfsDeepStorage(namenode_url=cfg.namenode_url, base_path="/", fs_url=cfg.hdfs_fs_url or None,
                                  user=cfg.user or None)
    else:
        raise DeepStorageError(f"cannot load a segment with loadSpec type {typ!r}")
    key = storage.key_for_load_spec(load_spec)
    if storage.exists(key):
        storage.download(key, local_path)
        return
    keys = storage.list(key)
    if not keys:
        raise FileNotFoundError(storage.uri(key))
    for k in keys:
        storage.download(k, local_path / posixpath.relpath(k, key))


def _copy_local_tree(src: Path, dst: Path) -> None:

    for f in sorted(src.rglob("*")):
        rel = f.relative_to(src)
        if f.is_file() and not is_hidden(rel.as_posix()):
            atomic_copy(f, dst / rel)
