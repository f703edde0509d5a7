"""What one kind of deep storage is to radstack: a :class:`Backend` owns everything that differs by kind —
opening it from the ``deep_storage`` settings, opening what a segment's ``loadSpec`` points at, the Spark
settings that read it, and where a Druid cluster's input source finds its files. Light on imports (the
Airflow venv builds Spark settings from it without boto3 or hdfs): the implementation of a backend is
imported when it is opened."""

from __future__ import annotations

import posixpath
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from radstack.config import DeepStorageSettings
from radstack.storage.deep_storage.base import DeepStorage

__all__ = ["Backend"]


class Backend(ABC):
    #: its ``deep_storage.type``
    type: ClassVar[str]
    #: the segment ``loadSpec`` types it reads (Druid's names)
    load_spec_types: ClassVar[tuple[str, ...]]

    @abstractmethod
    def from_settings(self, cfg: DeepStorageSettings) -> DeepStorage:
        """The deep storage the settings describe (a setting it needs is missing: DeepStorageError)."""

    @abstractmethod
    def from_load_spec(self, load_spec: Mapping[str, Any], cfg: DeepStorageSettings) -> tuple[DeepStorage, str]:
        """The storage holding what ``load_spec`` points at — whatever configuration wrote it — and its key."""

    def fetch(self, load_spec: Mapping[str, Any], local_path: Path, cfg: DeepStorageSettings) -> None:
        """Copy what ``load_spec`` points at to ``local_path``: a file lands there, a folder's files below it."""
        storage, key = self.from_load_spec(load_spec, cfg)
        if storage.exists(key):
            storage.download(key, local_path)
            return
        keys = storage.list(key)
        if not keys:
            raise FileNotFoundError(storage.uri(key))
        for k in keys:
            storage.download(k, local_path / posixpath.relpath(k, key))

    def spark_conf(self, cfg: DeepStorageSettings, jvm_dir: Path | None = None) -> dict[str, str]:
        """Spark settings to read (and write) it; ``spark.jars`` lists jars it needs on the classpath."""
        return {}

    @abstractmethod
    def druid_location(self, load_spec: Mapping[str, Any], cfg: DeepStorageSettings) -> str:
        """Where a Druid cluster reads the files of ``load_spec`` (a path or URI of its input source)."""

    @abstractmethod
    def druid_input_source(self, locations: Sequence[str]) -> dict[str, Any]:
        """Druid's ``inputSource`` reading ``locations`` (as :meth:`druid_location` gave them)."""
