"""Deep storage in a local (or NFS-mounted) directory — the embedded default.

Uploads are written to a hidden temp file in the destination folder, fsynced, then ``os.replace``d
onto the key: POSIX rename is atomic, so the key holds either nothing, the old file, or the complete
new one. Folder renames use ``os.rename`` (atomic on one filesystem).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from radstack.storage.deep_storage.base import DeepStorageError, is_hidden, join_key, normalize_key, temp_name

CHUNK = 4 * 1024 * 1024


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_atomic(dst: Path, chunks: Iterator[bytes]) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.parent / temp_name(dst.name)
    try:
        with tmp.open("wb") as out:
            for chunk in chunks:
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    _fsync_dir(dst.parent)


def _file_chunks(src: Path) -> Iterator[bytes]:
    with src.open("rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk


def atomic_copy(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` through a hidden temp file beside ``dst`` and a rename."""
    _write_atomic(Path(dst), _file_chunks(Path(src)))


class LocalDeepStorage:
    """Keys are paths under ``root`` (created on first write)."""

    type = "local"

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()

    def __repr__(self) -> str:
        return f"LocalDeepStorage({str(self.root)!r})"

    def _path(self, key: str, *, allow_empty: bool = False) -> Path:
        k = normalize_key(key, allow_empty=allow_empty)
        return self.root / k if k else self.root

    # ------------------------------------------------------------------ writes
    def put_file(self, local_path: Path, key: str) -> dict[str, Any]:
        _write_atomic(self._path(key), _file_chunks(Path(local_path)))
        return self.load_spec(key)

    def put_bytes(self, data: bytes, key: str) -> dict[str, Any]:
        _write_atomic(self._path(key), iter([bytes(data)]))
        return self.load_spec(key)

    def rename(self, src_key: str, dst_key: str) -> None:
        src, dst = self._path(src_key), self._path(dst_key)
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
        elif src.is_dir():
            if dst.exists():
                raise FileExistsError(f"rename {src_key!r}: destination {dst_key!r} exists")
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.rename(src, dst)
        else:
            raise FileNotFoundError(src_key)
        self._prune_empty(src.parent)

    def delete(self, key: str) -> None:
        p = self._path(key)
        if p.is_dir():
            raise IsADirectoryError(f"{key!r} is a folder; use delete_prefix")
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
        self._prune_empty(p.parent)

    def delete_prefix(self, prefix: str) -> int:
        p = self._path(prefix, allow_empty=True)
        if p.is_file():
            p.unlink()
            self._prune_empty(p.parent)
            return 1
        if not p.is_dir():
            return 0
        n = len(self.list(prefix))
        if p == self.root:
            for child in p.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        else:
            shutil.rmtree(p)
            self._prune_empty(p.parent)
        return n

    def _prune_empty(self, folder: Path) -> None:
        """Remove folders left empty up to the root, as Druid's local segment killer does."""
        while folder != self.root and self.root in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent

    # ------------------------------------------------------------------ reads
    def get_bytes(self, key: str) -> bytes:
        p = self._path(key)
        if not p.is_file():
            raise FileNotFoundError(key)
        return p.read_bytes()

    def download(self, key: str, local_path: Path) -> None:
        p = self._path(key)
        if not p.is_file():
            raise FileNotFoundError(key)
        atomic_copy(p, Path(local_path))

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str = "") -> list[str]:
        k = normalize_key(prefix, allow_empty=True)
        p = self._path(k, allow_empty=True)
        if p.is_file():
            return [k]
        if not p.is_dir():
            return []
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel_dir = Path(dirpath).relative_to(p).as_posix()
            for f in filenames:
                rel = f if rel_dir == "." else f"{rel_dir}/{f}"
                if not is_hidden(rel):
                    out.append(join_key(k, rel))
        return sorted(out)

    def list_dirs(self, prefix: str = "") -> list[str]:
        k = normalize_key(prefix, allow_empty=True)
        p = self._path(k, allow_empty=True)
        if not p.is_dir():
            return []
        return sorted(join_key(k, c.name) for c in p.iterdir() if c.is_dir() and not c.name.startswith("."))

    def modified_ms(self, key: str) -> int:
        p = self._path(key)
        if not p.is_file():
            raise FileNotFoundError(key)
        return p.stat().st_mtime_ns // 1_000_000

    # ------------------------------------------------------------------ addressing
    def load_spec(self, key: str) -> dict[str, Any]:
        return {"type": "local", "path": str(self._path(key))}

    def key_for_load_spec(self, load_spec: Mapping[str, Any]) -> str:
        if load_spec.get("type") != "local":
            raise DeepStorageError(f"not a local loadSpec: {dict(load_spec)}")
        path = Path(str(load_spec["path"])).expanduser().resolve()
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            raise DeepStorageError(f"{path} is outside deep storage {self.root}") from None
        return normalize_key(rel.as_posix())

    def uri(self, key: str) -> str:
        # not Path.as_uri(): Hadoop's Path does not decode %XX, and Hive-style "dt=…" must stay as is
        return "file://" + self._path(key, allow_empty=True).as_posix()
