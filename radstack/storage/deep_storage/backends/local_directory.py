"""A local (or NFS-mounted) directory: ``deep_storage.type: local``, ``loadSpec`` type ``local``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from radstack.config import DeepStorageSettings
from radstack.storage.deep_storage.backends.base import Backend
from radstack.storage.deep_storage.base import DeepStorage, DeepStorageError, is_hidden
from radstack.storage.deep_storage.local import LocalDeepStorage, atomic_copy


class LocalDirectory(Backend):
    type = "local"
    load_spec_types = ("local",)

    def from_settings(self, cfg: DeepStorageSettings) -> DeepStorage:
        if not cfg.path:
            raise DeepStorageError("deep_storage.path is required for type local")
        return LocalDeepStorage(Path(cfg.path).expanduser())

    def from_load_spec(self, load_spec: Mapping[str, Any], cfg: DeepStorageSettings) -> tuple[DeepStorage, str]:
        path = Path(str(load_spec["path"]))
        return LocalDeepStorage(path.parent), path.name

    def fetch(self, load_spec: Mapping[str, Any], local_path: Path, cfg: DeepStorageSettings) -> None:
        # by its absolute path: a folder above it may be hidden (~/.radstack), which no key may name
        src = Path(str(load_spec["path"]))
        if src.is_dir():
            for f in sorted(src.rglob("*")):
                rel = f.relative_to(src)
                if f.is_file() and not is_hidden(rel.as_posix()):
                    atomic_copy(f, Path(local_path) / rel)
            return
        if not src.is_file():
            raise FileNotFoundError(str(src))
        atomic_copy(src, Path(local_path))

    def druid_location(self, load_spec: Mapping[str, Any], cfg: DeepStorageSettings) -> str:
        return str(load_spec["path"])

    def druid_input_source(self, locations: Sequence[str]) -> dict[str, Any]:
        return {"type": "local", "files": list(locations)}


BACKEND = LocalDirectory()
