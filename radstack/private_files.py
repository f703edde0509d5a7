"""Directories and files only this user can read: task work dirs (they hold the settings, with their
passwords) and credential files are 0700 / 0600 from the moment they exist, whatever the umask."""

from __future__ import annotations

import os
from pathlib import Path


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
