"""Deep storage: where segments (``segments/…``) and the raw archive (``raw/…``) live.

Three backends share one interface, :class:`DeepStorage`: a local directory
(:class:`~radstack.storage.deep_storage.local.LocalDeepStorage`), S3 through boto3
(:class:`~radstack.storage.deep_storage.s3.S3DeepStorage`) and HDFS through WebHDFS
(:class:`~radstack.storage.deep_storage.hdfs.HdfsDeepStorage`), each described by its entry in
:data:`~radstack.storage.deep_storage.backends.BACKENDS` (what differs by kind: settings, load specs, Spark,
Druid). :func:`open_deep_storage` builds the one the ``deep_storage`` settings name. Importing this package
loads no backend's client library (the Airflow venv has none).

Keys are relative POSIX paths (``segments/ds/…/data.parquet``). No key component may start with
``.``: that namespace holds in-flight temp files (Hadoop's hidden-file rule, so Spark ignores them too),
which ``list`` never returns. ``put_file``/``put_bytes`` are atomic — a reader sees either no object or
the whole one under the key. See ``docs/deep-storage.md`` for the guarantees per backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from radstack.config import DeepStorageSettings, Settings
from radstack.storage.deep_storage.backends import backend_for_load_spec, backend_named
from radstack.storage.deep_storage.base import (
    DeepStorage,
    DeepStorageError,
    is_hidden,
    join_key,
    normalize_key,
    temp_name,
)

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
    return backend_named(cfg.type).from_settings(cfg)


def fetch_load_spec(
    load_spec: Mapping[str, Any], local_path: Path, settings: Settings | DeepStorageSettings | Mapping[str, Any]
) -> None:
    """Copy what a segment's ``loadSpec`` points at to ``local_path``.

    A file lands at ``local_path``; a folder (e.g. a segment directory) is copied into the folder
    ``local_path`` keeping relative paths. The load spec's own type decides the backend (a ``local``
    spec is read from its absolute path; ``s3`` from its bucket with the configured endpoint; ``hdfs``
    through the configured WebHDFS address), so segments written under another configuration still load.
    """
    backend_for_load_spec(load_spec).fetch(load_spec, Path(local_path), deep_storage_settings(settings))
