"""Deep storage in HDFS through WebHDFS (the ``hdfs`` package's ``InsecureClient``).

``namenode_url`` is the NameNode's HTTP address (``http://host:9870``); ``fs_url`` is ``fs.defaultFS``
(``hdfs://host:8020``), used for the ``hdfs://`` URIs Spark reads and for load specs. Without it they
fall back to ``webhdfs://host:httpport/…``, which Spark's bundled Hadoop also reads.

Atomicity: uploads stream to a hidden temp file (``.name.<id>.tmp``, skipped by Hadoop input formats and
by :meth:`list`) in the destination folder, then one NameNode ``RENAME`` with ``renameoptions=OVERWRITE``
moves it onto the key — a metadata operation, atomic in HDFS. Folder renames are atomic as well.
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import os
import posixpath
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import requests
from hdfs import HdfsError, InsecureClient

from radstack.storage.deep_storage.base import DeepStorageError, is_hidden, join_key, normalize_key, temp_name

log = logging.getLogger(__name__)
CHUNK = 4 * 1024 * 1024
#: attempts at one upload when the DataNode the NameNode picked cannot be reached (sleeps 0.5, 1, 2, 4, 4 s)
WRITE_ATTEMPTS = 6


class HdfsDeepStorage:
    """Keys are paths under ``base_path`` (absolute HDFS path)."""

    type = "hdfs"

    def __init__(
        self,
        namenode_url: str,
        base_path: str = "/radstack",
        fs_url: str | None = None,
        user: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.namenode_url = namenode_url.rstrip("/")
        self.base_path = "/" + base_path.strip("/") if base_path.strip("/") else "/"
        self.fs_url = fs_url.rstrip("/") if fs_url else None
        self.user = user or os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
        self.client = InsecureClient(self.namenode_url, user=self.user, timeout=timeout)

    def __repr__(self) -> str:
        return f"HdfsDeepStorage({self.namenode_url!r}, base_path={self.base_path!r})"

    def _path(self, key: str, *, allow_empty: bool = False) -> str:
        k = normalize_key(key, allow_empty=allow_empty)
        return posixpath.join(self.base_path, k) if k else self.base_path

    def _status(self, path: str) -> dict[str, Any] | None:
        status = self.client.status(path, strict=False)
        return dict(status) if status else None

    def _rename_raw(self, src: str, dst: str, overwrite: bool) -> None:
        params: dict[str, str] = {"destination": dst}
        if overwrite:
            params["renameoptions"] = "OVERWRITE"
        res = self.client._rename(src, **params)  # WebHDFS RENAME; rename2 when options are given
        body = res.json() if res.content else {}
        if body and body.get("boolean") is False:
            raise DeepStorageError(f"HDFS rename {src} -> {dst} refused")

    # ------------------------------------------------------------------ writes
    def _put_stream(self, open_data: Callable[[], Any], key: str) -> dict[str, Any]:
        """Upload what ``open_data()`` gives (bytes or a binary file, opened again for each attempt) to a
        temp file beside ``key``, then rename it onto the key.

        WebHDFS sends the data to a DataNode the NameNode picks. A DataNode that just died is picked until
        the NameNode sees it stale (``dfs.namenode.stale.datanode.interval``; on a real cluster it may
        not have noticed for minutes): the connection to it fails, so the write is asked for again, up to
        :data:`WRITE_ATTEMPTS` times over about 12 s, and lands on a live one."""
        dst = self._path(key)
        parent, name = posixpath.split(dst)
        tmp = posixpath.join(parent, temp_name(name))
        for attempt in range(WRITE_ATTEMPTS):
            data = open_data()
            try:
                self.client.write(tmp, data=data, overwrite=True)
                break
            except (requests.ConnectionError, requests.Timeout) as e:
                self._forget(tmp)
                if attempt == WRITE_ATTEMPTS - 1:
                    raise DeepStorageError(f"HDFS write of {key!r} failed {WRITE_ATTEMPTS} times: {e}") from e
                log.warning("HDFS write of %r: the DataNode could not be reached (%s); asking the NameNode again",
                            key, e)  # fmt: skip
                time.sleep(min(4.0, 0.5 * 2**attempt))
            except BaseException as e:
                self._forget(tmp)
                if isinstance(e, HdfsError):  # e.g. no DataNode could take the block: callers may retry
                    raise DeepStorageError(f"HDFS write of {key!r} failed: {e}") from e
                raise
            finally:
                if hasattr(data, "close"):
                    data.close()
        try:
            self._rename_raw(tmp, dst, overwrite=True)
        except BaseException:
            self._forget(tmp)
            raise
        return self.load_spec(key)

    def _forget(self, tmp: str) -> None:
        with contextlib.suppress(HdfsError, OSError):
            self.client.delete(tmp)

    def put_file(self, local_path: Path, key: str) -> dict[str, Any]:
        return self._put_stream(lambda: open(local_path, "rb"), key)  # noqa: SIM115 - closed by _put_stream

    def put_bytes(self, data: bytes, key: str) -> dict[str, Any]:
        payload = bytes(data)
        return self._put_stream(lambda: payload, key)

    def rename(self, src_key: str, dst_key: str) -> None:
        src, dst = self._path(src_key), self._path(dst_key)
        st = self._status(src)
        if st is None:
            raise FileNotFoundError(src_key)
        self.client.makedirs(posixpath.dirname(dst))
        if st["type"] == "FILE":
            self._rename_raw(src, dst, overwrite=True)
            return
        if self._status(dst) is not None:
            raise FileExistsError(f"rename {src_key!r}: destination {dst_key!r} exists")
        self._rename_raw(src, dst, overwrite=False)

    def delete(self, key: str) -> None:
        path = self._path(key)
        st = self._status(path)
        if st is None:
            return
        if st["type"] != "FILE":
            raise IsADirectoryError(f"{key!r} is a folder; use delete_prefix")
        self.client.delete(path)

    def delete_prefix(self, prefix: str) -> int:
        k = normalize_key(prefix, allow_empty=True)
        path = self._path(k, allow_empty=True)
        st = self._status(path)
        if st is None:
            return 0
        n = len(self.list(k))
        if path == self.base_path:
            for child in self.client.list(path):
                self.client.delete(posixpath.join(path, child), recursive=True)
        else:
            self.client.delete(path, recursive=True)
        return n

    # ------------------------------------------------------------------ reads
    def get_bytes(self, key: str) -> bytes:
        path = self._path(key)
        try:
            with self.client.read(path) as r:
                return bytes(r.read())
        except HdfsError as e:
            if self._status(path) is None:
                raise FileNotFoundError(key) from None
            raise DeepStorageError(str(e)) from e

    def download(self, key: str, local_path: Path) -> None:
        path = self._path(key)
        st = self._status(path)
        if st is None or st["type"] != "FILE":
            raise FileNotFoundError(key)
        local_path = Path(local_path)
        local_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = local_path.parent / temp_name(local_path.name)
        try:
            with self.client.read(path, chunk_size=CHUNK) as reader, tmp.open("wb") as out:
                for chunk in reader:
                    out.write(chunk)
            os.replace(tmp, local_path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def exists(self, key: str) -> bool:
        st = self._status(self._path(key))
        return st is not None and st["type"] == "FILE"

    def list(self, prefix: str = "") -> list[str]:
        k = normalize_key(prefix, allow_empty=True)
        root = self._path(k, allow_empty=True)
        st = self._status(root)
        if st is None:
            return []
        if st["type"] == "FILE":
            return [k]
        out: list[str] = []
        for dirpath, dirnames, filenames in self.client.walk(root, ignore_missing=True):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel_dir = posixpath.relpath(dirpath, root)
            for f in filenames:
                rel = f if rel_dir == "." else f"{rel_dir}/{f}"
                if not is_hidden(rel):
                    out.append(join_key(k, rel))
        return sorted(out)

    def list_dirs(self, prefix: str = "") -> list[str]:
        k = normalize_key(prefix, allow_empty=True)
        path = self._path(k, allow_empty=True)
        st = self._status(path)
        if st is None or st["type"] != "DIRECTORY":
            return []
        return sorted(
            join_key(k, name)
            for name, s in self.client.list(path, status=True)
            if s["type"] == "DIRECTORY" and not name.startswith(".")
        )

    def modified_ms(self, key: str) -> int:
        st = self._status(self._path(key))
        if st is None:
            raise FileNotFoundError(key)
        return int(st["modificationTime"])

    # ------------------------------------------------------------------ addressing
    def _fs_prefix(self) -> str:
        if self.fs_url:
            return self.fs_url
        u = urlparse(self.namenode_url)
        return f"webhdfs://{u.netloc}"

    def load_spec(self, key: str) -> dict[str, Any]:
        return {"type": "hdfs", "path": self.uri(key)}

    def key_for_load_spec(self, load_spec: Mapping[str, Any]) -> str:
        if load_spec.get("type") != "hdfs":
            raise DeepStorageError(f"not an hdfs loadSpec: {dict(load_spec)}")
        path = urlparse(str(load_spec["path"])).path
        base = self.base_path.rstrip("/")
        if base and not path.startswith(base + "/"):
            raise DeepStorageError(f"{path} is outside deep storage {self.base_path}")
        return normalize_key(path[len(base) :])

    def uri(self, key: str) -> str:
        return self._fs_prefix() + self._path(key, allow_empty=True)
