"""The interface every deep-storage backend implements, and the key rules they share."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["DeepStorage", "DeepStorageError", "is_hidden", "join_key", "normalize_key", "temp_name"]


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
