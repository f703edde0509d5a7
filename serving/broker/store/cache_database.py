"""The broker's DuckDB database under ``{home}/segment-cache`` (:mod:`serving.broker.store.segment_cache` fills
it): opened locked and bounded, shared by the home's broker and private to any second broker on the same
home (removed when it closes, or by the next broker when its process is gone); a file DuckDB cannot read
is a cache miss."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import duckdb

from radstack.duckdb_sandbox import sandboxed_connection
from radstack.private_files import private_dir
from radstack.process_state import pid_alive

log = logging.getLogger(__name__)

#: the cache database under ``{home}/segment-cache``; a second broker on the same home gets a private one
CACHE_FILE = "segments.duckdb"
_PRIVATE_FILE = re.compile(r"segments-(\d+)-[0-9a-f]+\.duckdb(\.wal)?$")
#: cache files this process has open (DuckDB refuses a second open in one process with other settings)
_OPEN_FILES: set[Path] = set()
_OPEN_LOCK = threading.Lock()


@dataclass(frozen=True)
class CacheDatabase:
    """The broker's DuckDB: on ``path`` under the segment cache (in memory when there is no home)."""

    connection: duckdb.DuckDBPyConnection
    path: Path | None
    #: True for the home's ``segments.duckdb``, kept across restarts; False for a private file, removed at close
    shared: bool

    @property
    def downloads(self) -> Path | None:
        """Where this database's segment files are fetched to before loading (only its owner uses it)."""
        return None if self.path is None else self.path.with_name(self.path.stem + ".downloads")


def open_cache_database(cache_dir: Path | None, *, memory_limit: str = "", threads: int = 0,
                        query_memory_limit: str = "", max_spill: str = "") -> CacheDatabase:
    """Open (or create) ``{cache_dir}/segments.duckdb``, locked (:mod:`radstack.duckdb_sandbox`) and bounded
    by ``memory_limit``. When another broker, in this process or another, already serves from it, this one
    gets a private file that :func:`close_cache_database` removes; a file DuckDB cannot read (another
    DuckDB version, a torn disk) is a cache miss: it is removed and the cache starts empty."""
    if cache_dir is None:
        return CacheDatabase(sandboxed_connection(memory_limit=memory_limit, threads=threads,
                                                  query_memory_limit=query_memory_limit), None, False)
    private_dir(cache_dir)

    def connect(path: Path) -> duckdb.DuckDBPyConnection:
        return sandboxed_connection(database=path, memory_limit=memory_limit, threads=threads,
                                    temp_dir=cache_dir / ".duckdb-spill", query_memory_limit=query_memory_limit,
                                    max_spill=max_spill)

    shared = cache_dir / CACHE_FILE
    with _OPEN_LOCK:
        if shared not in _OPEN_FILES:
            con = None
            for attempt in range(2):
                try:
                    con = connect(shared)
                    break
                except duckdb.IOException as e:
                    if "lock" in str(e).lower():  # another process serves this home
                        log.warning("segment cache %s is in use by another process; using a private one", shared)
                        break
                    if attempt:
                        raise
                    log.warning("segment cache %s cannot be read (%s); starting it empty", shared, e)
                    _remove_database(shared)
                except duckdb.Error as e:
                    if attempt:
                        raise
                    log.warning("segment cache %s cannot be read (%s); starting it empty", shared, e)
                    _remove_database(shared)
            if con is not None:
                _OPEN_FILES.add(shared)
                _sweep_private_files(cache_dir)
                return CacheDatabase(con, shared, True)
        private = cache_dir / f"segments-{os.getpid()}-{uuid.uuid4().hex[:12]}.duckdb"
        _OPEN_FILES.add(private)
    return CacheDatabase(connect(private), private, False)


def close_cache_database(db: CacheDatabase) -> None:
    """Close the connection; a private cache file (and its downloads) is removed."""
    with contextlib.suppress(duckdb.Error):
        db.connection.close()
    if db.path is None:
        return
    with _OPEN_LOCK:
        _OPEN_FILES.discard(db.path)
    if not db.shared:
        _remove_database(db.path)


def _remove_database(path: Path) -> None:
    for f in (path, path.with_name(path.name + ".wal")):
        f.unlink(missing_ok=True)
    shutil.rmtree(path.with_name(path.stem + ".downloads"), ignore_errors=True)


def _sweep_private_files(cache_dir: Path) -> None:
    """Remove the private cache files of brokers that are gone (killed before they could)."""
    for f in cache_dir.glob("segments-*.duckdb*"):
        m = _PRIVATE_FILE.match(f.name)
        if m is None or pid_alive(int(m.group(1))):
            continue
        _remove_database(f.with_name(f.name.removesuffix(".wal")))
