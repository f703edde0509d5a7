"""A PostgreSQL server from Debian's packages, run by radstack itself: the metadata store of a cluster
whose processes live on more than one host (``radctl cluster up --hosts N``), and of the tests.

PostgreSQL refuses to run as root, so when this process is root every server command runs as the
``postgres`` user (``runuser -u postgres --``). :class:`PostgresNode` makes a data directory
(``initdb``: UTF-8, the ``postgres`` superuser with a password for TCP, trust only on its own Unix
socket), lets the hosts of its subnet in with that password (``samenet``, SCRAM), and gives the
command that runs the server in the foreground, so the launcher (a cluster's node group, a simulated
host) owns the process like any other node's.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

#: how a command runs where the server lives (``SimulatedHosts.run`` on a host; here by default)
Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]


class PostgresError(RuntimeError):
    """PostgreSQL is missing or a server command failed."""


def pg_bin() -> Path | None:
    """The newest installed PostgreSQL's ``bin`` directory (Debian: /usr/lib/postgresql/N/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def as_postgres(argv: list[str]) -> list[str]:
    """``argv`` run as the ``postgres`` user when this process is root (the server refuses root)."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else list(argv)


def give_to_postgres(*paths: Path) -> None:
    """Hand directories the server writes to the ``postgres`` user (when running as root)."""
    if os.geteuid() == 0:
        for p in paths:
            shutil.chown(p, "postgres", "postgres")


def _local_run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


@dataclass
class PostgresNode:
    """One server: data in ``base_dir/data``, its socket in ``base_dir/sock``, listening on
    ``address:port``. ``password`` (generated) is the ``postgres`` user's for TCP connections."""

    base_dir: Path
    address: str = "127.0.0.1"
    port: int = 5432
    password: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    run: Runner = field(default=_local_run, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def socket_dir(self) -> Path:
        return self.base_dir / "sock"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "postgres.log"

    def _bin(self, name: str) -> str:
        found = pg_bin()
        if found is None:
            raise PostgresError("PostgreSQL is not installed (Debian's postgresql package; `make system`)")
        return str(found / name)

    def _check(self, argv: list[str], what: str) -> str:
        out = self.run(argv)
        if out.returncode != 0:
            raise PostgresError(f"{what} failed (exit {out.returncode}): {(out.stdout + out.stderr).strip()[-1500:]}")
        return out.stdout

    def init(self) -> None:
        """``initdb`` into ``data`` (once): the superuser's password from a file only the server's user
        reads, SCRAM for TCP, and every host of the server's own subnet let in with it."""
        if (self.data_dir / "PG_VERSION").exists():
            return
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        pwfile = self.base_dir / "pwfile"
        pwfile.write_text(self.password + "\n")
        pwfile.chmod(0o600)
        give_to_postgres(self.base_dir, self.socket_dir, pwfile)
        try:
            self._check(as_postgres([self._bin("initdb"), "-D", str(self.data_dir), "-U", "postgres", "-E", "UTF8",
                                     "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}",
                                     "--no-sync"]), "initdb")  # fmt: skip
        finally:
            pwfile.unlink(missing_ok=True)
        with (self.data_dir / "pg_hba.conf").open("a") as hba:
            hba.write("# radstack: the hosts of the server's own subnet, with the password\n"
                      "host all all samenet scram-sha-256\n")  # fmt: skip

    def command(self) -> list[str]:
        """The server in the foreground (the caller's process owns it; SIGTERM is a smart shutdown)."""
        return as_postgres([self._bin("postgres"), "-D", str(self.data_dir), "-p", str(self.port),
                            "-c", f"listen_addresses={self.address}", "-c", f"unix_socket_directories={self.socket_dir}"])  # fmt: skip

    def ready(self) -> bool:
        return self.run([self._bin("pg_isready"), "-h", self.address, "-p", str(self.port), "-t", "2"]).returncode == 0

    def create_database(self, name: str) -> None:
        """``CREATE DATABASE name`` unless it exists (over the server's own socket)."""
        psql = [self._bin("psql"), "-h", str(self.socket_dir), "-p", str(self.port), "-U", "postgres", "-tA"]
        exists = self._check(as_postgres([*psql, "-c", f"SELECT 1 FROM pg_database WHERE datname = '{name}'"]), "psql")
        if exists.strip() != "1":
            self._check(as_postgres([*psql, "-c", f'CREATE DATABASE "{name}"']), f"CREATE DATABASE {name}")

    def url(self, database: str) -> str:
        """The SQLAlchemy URL radstack's ``metadata.url`` takes, password included."""
        return f"postgresql+psycopg://postgres:{self.password}@{self.address}:{self.port}/{database}"
