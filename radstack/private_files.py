"""Directories and files only this user can read. Every radstack process runs with umask 077
(:func:`private_process`: ``radctl`` sets it before any command, the server and the receiver again when
they start), so everything it writes — the home, the metadata store and its WAL (task payloads,
supervisor secrets), deep storage, the segment cache, spool, logs — is 0700 / 0600, and so is what its
children (Kafka, Spark, HDFS) write. Task work dirs and credential files are made private explicitly too,
whatever the umask."""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_UMASK = 0o077


def private_process(home: Path | None = None) -> None:
    """From now on this process (and its children) creates files 0600 and directories 0700; ``home``,
    when given, is created private, or made private when an older version left it open."""
    os.umask(PRIVATE_UMASK)
    if home is not None:
        private_dir(home)


def private_dir(path: Path) -> Path:
    """``path`` (and missing parents) created, then made 0700; returns it."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` as a 0600 file (created with that mode: never readable by others,
    not even for a moment); the parent must exist."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)
    return path
