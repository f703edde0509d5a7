"""``local``: files on the server (``baseDir`` + ``filter`` glob, recursive, or ``files``), only under
``ingestion.local.allowed_dirs`` — checked at submission and again for every file when the task runs."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from radstack.config import Settings
from serving.input_policy import check_local_file
from serving.overlord.input_sources.base import InputEntity, InputSource, InputSpecError, str_list


class LocalSource(InputSource):
    type = "local"

    def validate(self, spec: Mapping[str, Any], path: str) -> None:
        files = spec.get("files")
        if files is not None:
            str_list(files, f"{path}.files")
        elif not spec.get("baseDir"):
            raise InputSpecError(f"{path}.baseDir: required unless 'files' is given")
        if spec.get("filter") is not None and not isinstance(spec.get("filter"), str):
            raise InputSpecError(f"{path}.filter: expected a glob string")

    def check(self, spec: Mapping[str, Any], settings: Settings) -> None:
        if spec.get("files") is not None:
            for f in str_list(spec["files"], "files"):
                check_local_file(f, settings)
        else:
            check_local_file(str(spec.get("baseDir", "")), settings)

    def resolve(self, spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:
        paths: list[Path]
        if spec.get("files") is not None:
            paths = [check_local_file(p, settings) for p in str_list(spec["files"], "files")]
            missing = [str(p) for p in paths if not p.is_file()]
            if missing:
                raise FileNotFoundError(f"local input source: no such file(s): {', '.join(missing)}")
        else:
            base = check_local_file(spec["baseDir"], settings)
            if not base.is_dir():
                raise FileNotFoundError(f"local input source: baseDir {str(base)!r} is not a directory")
            pattern = spec.get("filter") or "*"
            # Druid matches the filter against file names, walking baseDir recursively.
            paths = sorted(check_local_file(p, settings) for p in base.rglob("*")
                           if p.is_file() and fnmatch.fnmatchcase(p.name, pattern))
        return [InputEntity(str(p), (lambda p=p: open(p, "rb")), p.stat().st_size) for p in paths]


SOURCE = LocalSource()
