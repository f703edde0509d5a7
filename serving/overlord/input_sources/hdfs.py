"""``hdfs``: ``paths`` (files, directories, a glob in the last component) over WebHDFS with the ``hdfs``
package, using ``deep_storage.namenode_url``; only under the prefixes of ``ingestion.hdfs_paths``, never
under ``deep_storage.path`` (radstack's segments and raw archive)."""

from __future__ import annotations

import fnmatch
import posixpath
import tempfile
from collections.abc import Mapping
from typing import Any, BinaryIO

from hdfs import InsecureClient

from radstack.config import Settings
from serving.input_policy import OWN_STATE, InputForbidden, deep_storage_hdfs_path, hdfs_path
from serving.overlord.input_sources.base import InputEntity, InputSource, InputSpecError, str_list


class HdfsSource(InputSource):
    type = "hdfs"
    spark = "optional"

    def validate(self, spec: Mapping[str, Any], path: str) -> None:
        if not str_list(spec.get("paths") or [], f"{path}.paths"):
            raise InputSpecError(f"{path}.paths: required")

    def check(self, spec: Mapping[str, Any], settings: Settings) -> None:
        prefixes = [posixpath.normpath("/" + p.lstrip("/")) for p in settings.ingestion.hdfs_paths if p]
        for raw in str_list(spec.get("paths") or [], "paths"):
            path = posixpath.normpath("/" + hdfs_path(raw).lstrip("/"))
            if deep_storage_hdfs_path(path, settings):
                raise InputForbidden(f"hdfs input source: {raw!r} {OWN_STATE}")
            if not any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes):
                raise InputForbidden(f"hdfs input source: {raw!r} is outside the paths inputs may read "
                                     f"({', '.join(prefixes) or 'none'}); list a prefix in ingestion.hdfs_paths to allow it")

    def resolve(self, spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:
        ds = settings.deep_storage
        url = ds.namenode_url
        if not url:
            raise InputSpecError("spec.ioConfig.inputSource: hdfs input needs deep_storage.namenode_url (WebHDFS)")
        client = InsecureClient(url, user=ds.user or None)
        files: list[tuple[str, int]] = []
        for raw in str_list(spec["paths"], "paths"):
            path = hdfs_path(raw)
            status = client.status(path, strict=False)
            if status is None:
                # a glob in the last component, as Druid accepts
                parent, pattern = path.rsplit("/", 1) if "/" in path else ("/", path)
                for name, st in client.list(parent or "/", status=True):
                    if st["type"] == "FILE" and fnmatch.fnmatchcase(name, pattern):
                        files.append((f"{parent}/{name}", int(st["length"])))
            elif status["type"] == "DIRECTORY":
                for root, _dirs, names in client.walk(path):
                    for name in sorted(names):
                        full = f"{root.rstrip('/')}/{name}"
                        files.append((full, int(client.status(full)["length"])))
            else:
                files.append((path, int(status["length"])))

        def opener(p: str) -> BinaryIO:
            data: Any = tempfile.SpooledTemporaryFile(max_size=16 << 20)  # noqa: SIM115 - returned open
            with client.read(p) as reader:
                while chunk := reader.read(1 << 20):
                    data.write(chunk)
            data.seek(0)
            return data

        return [InputEntity(f"hdfs:{p}", (lambda p=p: opener(p)), size) for p, size in files]

    def spark_uris(self, spec: Mapping[str, Any], settings: Settings) -> list[str] | None:
        fs = str(settings.deep_storage.hdfs_fs_url or "").rstrip("/")
        return [p if "://" in p else f"{fs}{p}" for p in str_list(spec["paths"], "paths")]


SOURCE = HdfsSource()
