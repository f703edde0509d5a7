"""Checking Basic credentials without letting a client stall or probe the process.

Shared by the server and the receiver (``server.auth``, ``receiver.auth``):

- credentials verified before are recognised from :class:`radstack.passwords.CredentialCache` (one
  SHA-256, no hashing), so a dashboard's requests stay cheap — even while its address is locked out;
- anything else is verified by PBKDF2 on a small thread pool of its own, off the event loop and away
  from the threads that run queries; at most :data:`MAX_PENDING` verifications wait, more answer 429;
- an unknown user is verified against a dummy hash of the same cost, so it takes as long as a wrong
  password and the answer time does not tell which names exist;
- failed attempts are counted per user name and per client address over a sliding window
  (``auth.max_failed_logins`` in ``auth.failed_login_window_seconds``); past it, attempts that would
  need hashing answer 429 with ``Retry-After`` without hashing anything.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from radstack.config import AuthSettings
from radstack.passwords import (
    ITERATIONS,
    CredentialCache,
    basic_credentials,
    hash_iterations,
    hash_password,
    verify_password,
)

#: verifications that may wait for the hashing pool at once; more → 429 at once
MAX_PENDING = 64
#: threads that hash passwords (each check is ~50 ms of one core)
HASH_THREADS = 1
#: distinct user names / addresses whose failures are remembered (the oldest are forgotten first)
MAX_TRACKED = 10_000


class TooManyAttempts(Exception):
    """Sign-in refused without checking the password: retry after :attr:`retry_after` seconds."""

    def __init__(self, retry_after: float, reason: str) -> None:
        super().__init__(reason)
        self.retry_after = max(1, math.ceil(retry_after))
        self.reason = reason


class FailedLogins:
    """Failures per key over a sliding window; a key with ``limit`` failures in the window is locked
    until its oldest failure leaves the window. Thread-safe, bounded."""

    def __init__(self, limit: int, window_seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window = window_seconds
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, keys: list[str]) -> float | None:
        """Seconds until every key in ``keys`` may try again, or None when none is locked."""
        if self.limit <= 0:
            return None
        now = self._clock()
        wait = 0.0
        with self._lock:
            for key in keys:
                times = self._failures.get(key)
                if times is None:
                    continue
                while times and times[0] <= now - self.window:
                    times.popleft()
                if len(times) >= self.limit:
                    wait = max(wait, times[0] + self.window - now)
        return wait if wait > 0 else None

    def failed(self, keys: list[str]) -> None:
        now = self._clock()
        with self._lock:
            for key in keys:
                times = self._failures.setdefault(key, deque(maxlen=max(1, self.limit)))
                times.append(now)
                self._failures.move_to_end(key)
            while len(self._failures) > MAX_TRACKED:
                self._failures.popitem(last=False)


class SignIn:
    """Verify (name, password) pairs against ``hashes`` (name → ``password_hash``) as the module says."""

    def __init__(self, hashes: dict[str, str], *, max_failed_logins: int, window_seconds: float) -> None:
        self.hashes = dict(hashes)
        self.cache = CredentialCache()
        self.failures = FailedLogins(max_failed_logins, window_seconds)
        # the dummy costs what the users' hashes cost (the most common iteration count among them)
        counts = [hash_iterations(h) for h in self.hashes.values()] or [ITERATIONS]
        self._dummy = hash_password("radstack-dummy-password", iterations=max(set(counts), key=counts.count))
        self._pool = ThreadPoolExecutor(max_workers=HASH_THREADS, thread_name_prefix="sign-in")
        self._pending = 0
        self._pending_lock = threading.Lock()

    @classmethod
    def for_auth(cls, hashes: dict[str, str], auth: AuthSettings) -> SignIn:
        """The checker for one ``auth`` section (``server.auth``, ``receiver.auth``) and its users' hashes."""
        return cls(hashes, max_failed_logins=auth.max_failed_logins, window_seconds=auth.failed_login_window_seconds)

    async def authenticate(self, header: str | None, client: str) -> str | None:
        """The user name a ``Basic`` Authorization header names when its password is right, else None
        (:class:`TooManyAttempts` as :meth:`check`)."""
        creds = basic_credentials(header)
        if creds is None:
            return None
        return creds[0] if await self.check(creds[0], creds[1], client) else None

    def known(self, name: str, password: str) -> bool:
        """True when this exact pair was verified before (no hashing)."""
        encoded = self.hashes.get(name)
        return encoded is not None and self.cache.seen(name, password, encoded)

    def _verify(self, name: str, password: str) -> bool:
        encoded = self.hashes.get(name)
        if encoded is None:
            verify_password(password, self._dummy)  # the same work as a wrong password
            return False
        return self.cache.check(name, password, encoded)

    async def check(self, name: str, password: str, client: str) -> bool:
        """True when the pair is right; False when wrong; :class:`TooManyAttempts` when the user or
        the client address is locked out, or too many checks are waiting already."""
        if self.known(name, password):
            return True
        self._admit(name, client)
        with self._pending_lock:
            if self._pending >= MAX_PENDING:
                raise TooManyAttempts(1, "too many sign-ins are being checked at once")
            self._pending += 1
        try:
            ok = await asyncio.get_running_loop().run_in_executor(self._pool, self._verify, name, password)
        finally:
            with self._pending_lock:
                self._pending -= 1
        if not ok:
            self.failures.failed(self._keys(name, client))
        return ok

    def _admit(self, name: str, client: str) -> None:
        wait = self.failures.retry_after(self._keys(name, client))
        if wait is not None:
            raise TooManyAttempts(wait, "too many failed sign-ins for this user or from this address")

    @staticmethod
    def _keys(name: str, client: str) -> list[str]:
        return [f"user\0{name}", f"addr\0{client}"]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
