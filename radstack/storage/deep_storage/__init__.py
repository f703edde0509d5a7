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
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from radstack.config import Settings

__all__ = [
    "DeepStorage",
    "DeepStorageError",
    "fetch_load_spec",
    "normalize_key",
    "open_deep_storage",
]


class DeepStorageError(RuntimeError):
    """A deep-storage operation failed or was given something it cannot use."""


@runtime_checkable
class DeepStorage(Protocol):
    """The operations every backend implements. Missing keys raise :class:`FileNotFoundError`."""

    type: str

    def put_file(self, local_path: Path, key: str) -> dict[str, Any]:
        """Upload atomically; returns :meth:`load_spec` of ``key``."""
        ...

    def put_bytes(self, data: bytes, key: str) -> dict[str, Any]: ...

    def get_bytes(self, key: str) -> bytes: ...

    def download(self, key: str, local_path: Path) -> None:
        """Copy ``key`` to ``local_path`` (temp file + rename, parents created)."""
        ...

    def exists(self, key: str) -> bool: ...

    def list(self, prefix: str = "") -> list[str]:
        """All keys under the folder ``prefix`` (recursive, sorted); ``[prefix]`` if it is a file."""
        ...

    def list_dirs(self, prefix: str = "") -> list[str]:
        """The keys of the immediate sub-folders of ``prefix`` (sorted)."""
        ...

    def modified_ms(self, key: str) -> int: ...

    def delete(self, key: str) -> None:
        """Delete one file; a missing key is not an error."""
        ...

    def delete_prefix(self, prefix: str) -> int:
        """Delete every key under the folder ``prefix``; returns how many files went."""
        ...

    def load_spec(self, key: str) -> dict[str, Any]: ...

    def key_for_load_spec(self, load_spec: Mapping[str, Any]) -> str: ...

    def uri(self, key: str) -> str:
        """What Spark reads: ``file:///…``, ``hdfs://host:port/…`` or ``s3a://bucket/…``."""
        ...

    def rename(self, src_key: str, dst_key: str) -> None:
        """Move a file (replacing ``dst_key``) or a folder (``dst_key`` must not exist)."""
        ...


def normalize_key(key: str, *, allow_empty: bool = False) -> str:
    """Validate a key and return it without leading/trailing slashes."""
    if not isinstance(key, str):
        raise DeepStorageError(f"a key must be a string, got {type(key).__name__}")
    k = key.strip("/")
    if not k:
        if allow_empty:
            return ""
        raise DeepStorageError("empty key")
    if "\\" in k or "\x00" in k:
        raise DeepStorageError(f"bad key {key!r}")
    for part in k.split("/"):
        if part in ("", ".", ".."):
            raise DeepStorageError(f"bad key {key!r}: empty, '.' or '..' component")
        if part.startswith("."):
            raise DeepStorageError(
                f"bad key {key!r}: components starting with '.' are reserved for temp files"
            )
    return k


def is_hidden(rel: str) -> bool:
    """A path inside deep storage that is not a key (an in-flight temp file or folder)."""
    return any(p.startswith(".") for p in rel.split("/"))


def temp_name(name: str) -> str:
    """The hidden sibling name an upload of ``name`` is written to before the rename."""
    return f".{name}.{uuid.uuid4().hex[:12]}.tmp"


def join_key(prefix: str, rel: str) -> str:
    if not prefix:
        return rel
    return f"{prefix}/{rel}" if rel else prefix


def _deep_storage_config(settings: Settings | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(settings, Settings):
        return settings.deep_storage
    if "deep_storage" in settings and isinstance(settings["deep_storage"], Mapping):
        return dict(settings["deep_storage"])
    return dict(settings)


def open_deep_storage(settings: Settings | Mapping[str, Any]) -> DeepStorage:
    """The backend ``settings.deep_storage`` names (``type``: ``local`` | ``s3`` | ``hdfs``).

    ``settings`` may be :class:`Settings`, a full settings mapping (with ``deep_storage``) or the
    ``deep_storage`` mapping itself.
    """
    cfg = _deep_storage_config(settings)
    typ = str(cfg.get("type") or "local").lower()
    if typ == "local":
        from radstack.storage.deep_storage.local import LocalDeepStorage

        path = cfg.get("path") or ""
        if not path:
            raise DeepStorageError("deep_storage.path is required for type local")
        return LocalDeepStorage(Path(path).expanduser())
    if typ == "s3":
        from radstack.storage.deep_storage.s3 import S3DeepStorage

        if not cfg.get("bucket"):
            raise DeepStorageError("deep_storage.bucket is required for type s3")
        return S3DeepStorage(
            bucket=str(cfg["bucket"]),
            prefix=str(cfg.get("path") or ""),
            endpoint_url=str(cfg.get("endpoint_url") or "") or None,
            region=str(cfg.get("region") or "us-east-1"),
        )
    if typ == "hdfs":
        from radstack.storage.deep_storage.hdfs import HdfsDeepStorage

        if not cfg.get("namenode_url"):
            raise DeepStorageError(
                "deep_storage.namenode_url (WebHDFS, http://host:port) is required for type hdfs"
            )
        return HdfsDeepStorage(
            namenode_url=str(cfg["namenode_url"]),
            base_path=str(cfg.get("path") or "/radstack"),
            fs_url=str(cfg.get("hdfs_fs_url") or "") or None,
            user=str(cfg.get("user") or "") or None,
        )
    raise DeepStorageError(f"unknown deep_storage.type {typ!r} (local, s3, hdfs)")


def fetch_load_spec(
    load_spec: Mapping[str, Any], local_path: Path, settings: Settings | Mapping[str, Any]
) -> None:
    """Copy what a segment's ``loadSpec`` points at to ``local_path``.

    A file lands at ``local_path``; a folder (e.g. a segment directory) is copied into the folder
    ``local_path`` keeping relative paths. The load spec's own type decides the backend (a ``local``
    spec is read from its absolute path; ``s3`` from its bucket with the configured endpoint; ``hdfs``
    through the configured WebHDFS address), so segments written under another configuration still load.
    """
    typ = str(load_spec.get("type", ""))
    local_path = Path(local_path)
    cfg = _deep_storage_config(settings)
    storage: DeepStorage
    if typ == "local":
        src = Path(str(load_spec["path"]))
        if src.is_dir():
            _copy_local_tree(src, local_path)
            return
        if not src.is_file():
            raise FileNotFoundError(str(src))
        from radstack.storage.deep_storage.local import atomic_copy

        atomic_copy(src, local_path)
        return
    if typ in ("s3", "s3_zip"):
        from radstack.storage.deep_storage.s3 import S3DeepStorage

        storage = S3DeepStorage(
            bucket=str(load_spec["bucket"]),
            prefix="",
            endpoint_url=str(cfg.get("endpoint_url") or "") or None,
            region=str(cfg.get("region") or "us-east-1"),
        )
    elif typ == "hdfs":
        from radstack.storage.deep_storage.hdfs import HdfsDeepStorage

        if not cfg.get("namenode_url"):
            raise DeepStorageError("an hdfs loadSpec needs deep_storage.namenode_url (WebHDFS)")
        storage = HdfsDeepStorage(
            namenode_url=str(cfg["namenode_url"]),
            base_path="/",
            fs_url=str(cfg.get("hdfs_fs_url") or "") or None,
            user=str(cfg.get("user") or "") or None,
        )
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
    from radstack.storage.deep_storage.local import atomic_copy

    for f in sorted(src.rglob("*")):
        rel = f.relative_to(src)
        if f.is_file() and not is_hidden(rel.as_posix()):
            atomic_copy(f, dst / rel)
