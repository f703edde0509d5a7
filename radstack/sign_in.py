"""Checking Basic credentials without letting a client stall or probe the process.

Shared by the server and the receiver (``server.auth``, ``receiver.auth``):

- credentials verified before are recognised from :class:`radstack.passwords.CredentialCache` (one
  SHA-256, no hashing), so a dashboard's requests stay cheap — even while its address is locked out;
- anything else is verified by PBKDF2 on a small thread pool of its own, off the event loop and away
  from the threads that run queries; at most :data:`MAX_PENDING` verifications wait, more answer 429;
- an unknown user is verified against a dummy hash of the same cost, so it takes as long as a wrong
  password and the answer time does not tell which names exist;
- attempts are counted before they are hashed, per user from one address and per address
  (``auth.max_failed_logins`` in ``auth.failed_login_window_seconds``) and per user from every address
  (ten times that); a right password takes its count back. Past a limit, attempts that would need
  hashing answer 429 with ``Retry-After`` without hashing anything — so parallel guesses cannot race
  past the count, and one address's flood does not lock a user out for another address. The address
  is the TCP peer's: ``X-Forwarded-For`` is believed only from ``trusted_proxies``.
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
#: failures for one user from every address together, in multiples of ``max_failed_logins``
USER_WIDE_FACTOR = 10


class TooManyAttempts(Exception):
    """Sign-in refused without checking the password: retry after :attr:`retry_after` seconds."""

    def __init__(self, retry_after: float, reason: str) -> None:
        super().__init__(reason)
        self.retry_after = max(1, math.ceil(retry_after))
        self.reason = reason


class FailedLogins:
    """Failures per key over a sliding window; a key with its limit of failures in the window is locked
    until its oldest failure leaves the window. An attempt is counted *before* its password is hashed
    (:meth:`reserve`), so parallel attempts cannot all get through; a right password takes its count back
    (:meth:`release`). Thread-safe, bounded."""

    def __init__(self, limit: int, window_seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window = window_seconds
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _times(self, key: str, now: float) -> deque[float] | None:
        times = self._failures.get(key)
        if times is not None:
            while times and times[0] <= now - self.window:
                times.popleft()
        return times

    def retry_after(self, keys: dict[str, int]) -> float | None:
        """Seconds until every key (→ its limit) may try again, or None when none is locked."""
        if self.limit <= 0:
            return None
        now = self._clock()
        with self._lock:
            return self._wait(keys, now)

    def _wait(self, keys: dict[str, int], now: float) -> float | None:
        wait = 0.0
        for key, limit in keys.items():
            times = self._times(key, now)
            if times is not None and len(times) >= limit:
                wait = max(wait, times[-limit] + self.window - now)
        return wait if wait > 0 else None

    def reserve(self, keys: dict[str, int]) -> float | None:
        """Count one attempt on every key at once, unless one is locked: then nothing is counted and the
        seconds to wait are returned."""
        if self.limit <= 0:
            return None
        now = self._clock()
        with self._lock:
            wait = self._wait(keys, now)
            if wait is not None:
                return wait
            for key, limit in keys.items():
                times = self._failures.get(key)
                if times is None or times.maxlen != limit:
                    times = self._failures[key] = deque(times or (), maxlen=max(1, limit))
                times.append(now)
                self._failures.move_to_end(key)
            while len(self._failures) > MAX_TRACKED:
                self._failures.popitem(last=False)
        return None

    def release(self, keys: dict[str, int]) -> None:
        """Take back one counted attempt per key (the password was right)."""
        with self._lock:
            for key in keys:
                times = self._failures.get(key)
                if times:
                    times.pop()


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
        """True when the pair is right; False when wrong; :class:`TooManyAttempts` when the user from this
        address, the address, or the user from everywhere is locked out, or too many checks wait already.
        The attempt is counted before the hash (and taken back when the password is right)."""
        if self.known(name, password):
            return True
        keys = self._keys(name, client)
        wait = self.failures.reserve(keys)
        if wait is not None:
            raise TooManyAttempts(wait, "too many failed sign-ins for this user or from this address")
        with self._pending_lock:
            if self._pending >= MAX_PENDING:
                self.failures.release(keys)
                raise TooManyAttempts(1, "too many sign-ins are being checked at once")
            self._pending += 1
        try:
            ok = await asyncio.get_running_loop().run_in_executor(self._pool, self._verify, name, password)
        finally:
            with self._pending_lock:
                self._pending -= 1
        if ok:
            self.failures.release(keys)
        return ok

    def _keys(self, name: str, client: str) -> dict[str, int]:
        """What an attempt counts against, each with its limit: the user from this address and the address
        (``max_failed_logins`` each), and the user from everywhere (:data:`USER_WIDE_FACTOR` times that,
        so many addresses cannot guess freely, while one address's flood does not lock the user out for
        the others)."""
        n = self.failures.limit
        return {f"user\0{name}\0addr\0{client}": n, f"addr\0{client}": n, f"user\0{name}": n * USER_WIDE_FACTOR}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
