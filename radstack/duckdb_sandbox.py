"""DuckDB connections that can reach only what radstack hands them.

Every DuckDB connection that runs a statement derived from a request (a query, a filter or expression
of a spec, a lookup) is opened here: no extension is installed or loaded on demand, files are reachable
only under ``allowed_dirs`` (none by default: segments, lookups and staged rows arrive as Arrow),
``memory_limit`` bounds it, and the configuration is then locked so no statement can undo any of it.
The order matters (checked on DuckDB 2.0): ``allowed_directories`` cannot be passed at connect, and
``enable_external_access`` must be switched off after it and before ``lock_configuration``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import duckdb

from radstack.private_files import private_dir
from radstack.sql_text import string_literal

#: share of the machine's memory a connection may use when no limit is configured
DEFAULT_MEMORY_SHARE = 0.5


def default_memory_limit() -> str:
    """Half of this machine's physical memory, in DuckDB's spelling (``'12GiB'``)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not Linux
        return "4GiB"
    return f"{max(256, int(total * DEFAULT_MEMORY_SHARE) // 2**20)}MiB"


def sandboxed_connection(
    *,
    database: Path | None = None,
    memory_limit: str = "",
    threads: int = 0,
    temp_dir: Path | None = None,
    allowed_dirs: Iterable[Path] = (),
    time_zone: str = "UTC",
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
        con.execute(f"SET memory_limit = {string_literal(memory_limit or default_memory_limit())}")
        listed = ", ".join(string_literal(str(d.resolve()) + os.sep) for d in dirs)
        con.execute(f"SET allowed_directories = [{listed}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con
