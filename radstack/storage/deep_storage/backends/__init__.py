"""The deep-storage backends, one module each declaring its :class:`Backend` as ``BACKEND``. Adding one is
a module here (with its implementation beside the others in ``radstack/storage/deep_storage/``) and a line
in :data:`BACKENDS` — and its name in ``DeepStorageSettings.type`` (``radstack/config/sections.py``, the core, which
cannot import this layer; ``tests/unit/test_deep_storage_backends.py`` keeps the two the same)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from radstack.storage.deep_storage.backends import hdfs_webhdfs, local_directory, s3_bucket
from radstack.storage.deep_storage.backends.base import Backend
from radstack.storage.deep_storage.base import DeepStorageError

__all__ = ["BACKENDS", "Backend", "backend_for_load_spec", "backend_named"]

BACKENDS: tuple[Backend, ...] = (local_directory.BACKEND, s3_bucket.BACKEND, hdfs_webhdfs.BACKEND)

_BY_TYPE = {b.type: b for b in BACKENDS}
_BY_LOAD_SPEC = {t: b for b in BACKENDS for t in b.load_spec_types}


def backend_named(type_: str) -> Backend:
    """The backend of ``deep_storage.type``."""
    try:
        return _BY_TYPE[type_]
    except KeyError:
        raise DeepStorageError(f"unknown deep_storage.type {type_!r}: one of {', '.join(_BY_TYPE)}") from None


def backend_for_load_spec(load_spec: Mapping[str, Any]) -> Backend:
    """The backend that reads a segment's ``loadSpec`` (by its ``type``)."""
    typ = str(load_spec.get("type", ""))
    try:
        return _BY_LOAD_SPEC[typ]
    except KeyError:
        raise DeepStorageError(f"cannot load a segment with loadSpec type {typ!r}") from None
