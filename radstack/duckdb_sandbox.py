"""DuckDB connections that can reach only what radstack hands them.

Every DuckDB connection that runs a statement derived from a request (a query, a filter or expression
of a spec, a lookup) is opened here: no extension is installed or loaded on demand, files are reachable
only under ``allowed_dirs`` (none by default: segments, lookups and staged rows arrive as Arrow),
``memory_limit`` bounds it (and ``query_memory_limit`` each query's sorts and hash tables, ``max_spill`` what
it writes to its spill directory), and the configuration is then locked so no statement can undo any of it.
The order matters (checked on DuckDB 2.0): ``allowed_directories`` cannot be passed at connect, and
``enable_external_access`` must be switched off after it and before ``lock_configuration``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

import duckdb

from radstack.private_files import private_dir
from radstack.sql_text import string_literal

#: share of the memory this process may use (the machine's, or its cgroup's limit when lower) a
#: connection may use when no limit is configured
DEFAULT_MEMORY_SHARE = 0.5
#: share of ``memory_limit`` one query's sorts and hash tables may hold before they spill (DuckDB's
#: ``operator_memory_limit``, per connection: every query runs on its own cursor)
DEFAULT_QUERY_MEMORY_SHARE = 0.25
#: the spill directory's cap when none is configured (DuckDB's default is 90 % of the free disk)
DEFAULT_MAX_SPILL = "4GiB"

_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
          "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}


def parse_size(text: str) -> int:
    """Bytes of a size in DuckDB's spelling (``'512MiB'``, ``'8GB'``, ``'1.5GiB'``, ``'1024'``)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if m is None or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (e.g. 512MiB, 8GiB)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def cgroup_memory_limit() -> int | None:
    """The memory limit of this process's cgroup (v2 ``memory.max`` or v1 ``memory.limit_in_bytes``),
    None when there is none."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            raw = Path(path).read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < 2**60:  # v1 writes a huge number for "no limit", v2 writes "max"
            return int(raw)
    return None


def available_memory() -> int:
    """This machine's physical memory, or its cgroup's limit when lower."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not Linux
        total = 8 * 2**30
    limit = cgroup_memory_limit()
    return min(total, limit) if limit is not None else total


def default_memory_limit() -> str:
    """Half of :func:`available_memory`, in DuckDB's spelling (``'12288MiB'``)."""
    return f"{max(256, int(available_memory() * DEFAULT_MEMORY_SHARE) // 2**20)}MiB"


def sandboxed_connection(
    *,
    database: Path | None = None,
    memory_limit: str = "",
    threads: int = 0,
    temp_dir: Path | None = None,
    allowed_dirs: Iterable[Path] = (),
    time_zone: str = "UTC",
    query_memory_limit: str = "",
    max_spill: str = "",
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection, locked: no files outside ``allowed_dirs`` (and ``temp_dir``, where it spills),
    no extensions, no ``ATTACH``/``COPY`` elsewhere, no setting changed later. In memory, or on the
    ``database`` file (opened before the lock, so its own file and WAL are the only ones it writes)."""
    config: dict[str, str | int | bool] = {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    }
    if threads:
        config["threads"] = int(threads)
    dirs = [Path(d) for d in allowed_dirs]
    if temp_dir is not None:
        private_dir(Path(temp_dir))
        config["temp_directory"] = str(temp_dir)
        dirs.append(Path(temp_dir))
    con = duckdb.connect(str(database) if database is not None else ":memory:", config=config)
    try:
        con.execute(f"SET TimeZone = {string_literal(time_zone)}")
        limit = memory_limit or default_memory_limit()
        con.execute(f"SET memory_limit = {string_literal(limit)}")
        per_query = query_memory_limit or f"{max(16, int(parse_size(limit) * DEFAULT_QUERY_MEMORY_SHARE) // 2**20)}MiB"
        con.execute(f"SET operator_memory_limit = {string_literal(per_query)}")
        if temp_dir is not None:
            con.execute(f"SET max_temp_directory_size = {string_literal(max_spill or DEFAULT_MAX_SPILL)}")
        listed = ", ".join(string_literal(str(d.resolve()) + os.sep) for d in dirs)
        con.execute(f"SET allowed_directories = [{listed}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con
