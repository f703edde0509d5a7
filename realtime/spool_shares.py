"""How much of the receiver's spool one client may hold: the events it posted that the drainer has not
delivered yet. While Kafka is away the spool fills; without shares one client posting as fast as it can
would take all of it, and every other producer would get 503 — with them it gets 503 alone once its share
(``receiver.spool.max_bytes_per_client``, a quarter of the spool by default) is pending, and the others
keep being accepted. A client is its user (auth on) or its address."""

from __future__ import annotations

import threading
from collections import deque


class SpoolShareFull(Exception):
    """This client's undelivered events fill its share of the spool."""


class SpoolShares:
    def __init__(self, max_bytes_per_client: int) -> None:
        self.limit = max(0, int(max_bytes_per_client))
        self._pending: dict[str, deque[tuple[int, int]]] = {}  # client → (last seq, bytes) per entry
        self._bytes: dict[str, int] = {}
        self._lock = threading.Lock()

    def _forget_delivered(self, client: str, committed: int) -> None:
        entries = self._pending.get(client)
        while entries and entries[0][0] <= committed:
            self._bytes[client] -= entries.popleft()[1]
        if entries is not None and not entries:
            del self._pending[client]
            self._bytes.pop(client, None)

    def check(self, client: str, nbytes: int, committed: int) -> None:
        """Raise :class:`SpoolShareFull` when ``nbytes`` more would pass the client's share."""
        if not self.limit:
            return
        with self._lock:
            self._forget_delivered(client, committed)
            held = self._bytes.get(client, 0)
            if held and held + nbytes > self.limit:
                raise SpoolShareFull(f"this client has {held:,} bytes of events in the spool that Kafka has not "
                                     f"taken yet; {nbytes:,} more would pass its share "
                                     f"(receiver.spool.max_bytes_per_client: {self.limit:,})")

    def added(self, client: str, last_seq: int, nbytes: int) -> None:
        if not self.limit:
            return
        with self._lock:
            self._pending.setdefault(client, deque()).append((last_seq, nbytes))
            self._bytes[client] = self._bytes.get(client, 0) + nbytes

    def held(self, client: str, committed: int) -> int:
        with self._lock:
            self._forget_delivered(client, committed)
            return self._bytes.get(client, 0)
