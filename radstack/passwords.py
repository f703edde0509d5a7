"""Password hashes for the optional Basic auth of the server and the receiver.

Configs hold ``password_hash`` values, never passwords: PBKDF2-HMAC-SHA256 (Python's ``hashlib``, backed
by OpenSSL) with a random 16-byte salt, written ``pbkdf2_sha256$<iterations>$<salt>$<hash>`` (base64),
the format Django and passlib use. ``radctl auth hash-password`` makes one. Verifying costs about
50 ms on purpose, so :class:`CredentialCache` remembers recent successful checks (keyed by a SHA-256 of
the credentials, in memory only) the way Druid's basic authenticator caches its credentials.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import sys
import threading
from collections import OrderedDict
from pathlib import Path

from radstack.private_files import private_dir, write_private

__all__ = ["ALGORITHM", "CredentialCache", "basic_credentials", "check_new_password", "hash_password", "is_hash",
           "verify_password"]

ALGORITHM = "pbkdf2_sha256"
ITERATIONS = 120_000
#: the fewest PBKDF2 iterations ``radctl auth hash-password`` writes (OWASP's floor for SHA-256 is higher;
#: this keeps hashes made with older defaults usable while refusing toy values)
MIN_ITERATIONS = 100_000
#: the shortest password ``radctl auth hash-password`` hashes
MIN_PASSWORD_CHARS = 10


def check_new_password(password: str, iterations: int) -> None:
    """Raise ValueError for a password or an iteration count too weak to hash."""
    if not password.strip():
        raise ValueError("the password is empty")
    if len(password) < MIN_PASSWORD_CHARS:
        raise ValueError(f"the password is shorter than {MIN_PASSWORD_CHARS} characters")
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"{iterations} iterations is too few: at least {MIN_ITERATIONS:,}")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def hash_password(password: str, *, iterations: int = ITERATIONS, salt: bytes | None = None) -> str:
    salt = salt or os.urandom(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    return f"{ALGORITHM}${iterations}${_b64(salt)}${_b64(digest)}"


def hash_iterations(encoded: str) -> int:
    """The PBKDF2 iteration count of a ``password_hash`` (:data:`ITERATIONS` for a malformed one)."""
    return int(encoded.split("$")[1]) if is_hash(encoded) else ITERATIONS


def is_hash(value: str) -> bool:
    parts = value.split("$")
    return len(parts) == 4 and parts[0] == ALGORITHM and parts[1].isdigit()


def verify_password(password: str, encoded: str) -> bool:
    """True when ``password`` matches ``encoded`` (constant-time compare; a malformed hash never matches)."""
    if not is_hash(encoded):
        return False
    _, iterations, salt, digest = encoded.split("$")
    try:
        expected = _unb64(digest)
        got = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), _unb64(salt), int(iterations))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, expected)


class CredentialCache:
    """Recently verified (name, password) pairs, by SHA-256 digest, bounded and thread-safe."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._seen: OrderedDict[bytes, str] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(name: str, password: str, encoded: str) -> bytes:
        return hashlib.sha256(f"{name}\0{password}\0{encoded}".encode()).digest()

    def _hit(self, key: bytes) -> bool:
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                return True
        return False

    def seen(self, name: str, password: str, encoded: str) -> bool:
        """True when this exact pair was verified before (one SHA-256, no PBKDF2)."""
        return self._hit(self._key(name, password, encoded))

    def check(self, name: str, password: str, encoded: str) -> bool:
        key = self._key(name, password, encoded)
        if self._hit(key):
            return True
        if not verify_password(password, encoded):
            return False
        with self._lock:
            self._seen[key] = name
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)
        return True


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """(name, password) from an HTTP ``Authorization: Basic …`` header, or None."""
    if not header or not header.lower().startswith("basic "):
        return None
    try:
        name, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return (name, password) if sep else None


#: the user ``auth.generate_admin`` adds
GENERATED_ADMIN = "admin"


def generated_admin(home: Path, section: str) -> str:
    """The password hash of the generated ``admin`` user of ``{section}.auth`` (``server``, ``receiver``),
    kept in ``{home}/credentials/{section}-admin.json`` (0600, in a 0700 directory). The first call makes
    a random password and stores only its hash; the password is shown once — on stderr when that is a
    terminal, else (a log file: ``radctl up``, a container) in ``{section}-admin.password`` (0600) beside
    it, never in a log."""
    path, where = home / "credentials" / f"{section}-admin.json", f"{section}.auth"
    if path.is_file():
        return str(json.loads(path.read_text())["password_hash"])
    private_dir(path.parent)
    password = secrets.token_urlsafe(18)
    encoded = hash_password(password)
    write_private(path, json.dumps({"name": GENERATED_ADMIN, "password_hash": encoded}))
    if sys.stderr.isatty():
        print(f"radstack: {where}: generated user '{GENERATED_ADMIN}' with password {password} "
              f"(shown once; only its hash is kept, in {path}; replace it with your own users in {where}.users)",
              file=sys.stderr, flush=True)
    else:  # stderr is a log file (radctl up, a container): the password goes to a 0600 file, never a log
        once = write_private(path.with_name(f"{section}-admin.password"), password + "\n")
        print(f"radstack: {where}: generated user '{GENERATED_ADMIN}'; its password is in {once} (0600, "
              f"written once: read it, then delete the file; only its hash is kept, in {path})",
              file=sys.stderr, flush=True)
    return encoded
