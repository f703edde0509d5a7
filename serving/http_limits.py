"""What one client may hold of the server's sockets and time, enforced where connections arrive (uvicorn's
HTTP/1.1 protocol), before any request reaches the app:

* at most ``server.max_connections`` open connections, and ``server.max_connections_per_client`` from one
  address: the next one gets an immediate 503 with Druid's error JSON and is closed;
* a request's line and headers must arrive within ``server.header_timeout_seconds`` of the connection
  (or of the previous answer on a kept-alive one), its body within ``server.body_timeout_seconds``;
  past either the connection is closed (a slowloris holds nothing);
* an idle kept-alive connection closes after ``server.idle_timeout_seconds`` (uvicorn's keep-alive timeout).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from radstack.config import ServerSettings
from radstack.druid_errors import DruidError


def _refusal(message: str) -> bytes:
    body = DruidError(message, category="CAPACITY_EXCEEDED", persona="OPERATOR").to_bytes()
    return (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Retry-After: 1\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def limited_protocol(server: ServerSettings) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the limits above (one class per server: its per-client counts)."""
    per_client: Counter[str] = Counter()

    class LimitedH11Protocol(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _host: str | None = None
        _counted = False

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._host = self.client[0] if self.client else None
            if len(self.connections) > server.max_connections:
                self._refuse(f"The server holds {server.max_connections} connections (server.max_connections)")
                return
            if self._host is not None:
                if per_client[self._host] >= server.max_connections_per_client:
                    self._refuse(f"This client holds {server.max_connections_per_client} connections "
                                 "(server.max_connections_per_client)")
                    return
                per_client[self._host] += 1
                self._counted = True
            self._arm(server.header_timeout_seconds)

        def _refuse(self, message: str) -> None:
            self.transport.write(_refusal(message))
            self.transport.close()

        def _arm(self, seconds: float) -> None:
            self._disarm()
            if seconds > 0:
                self._timer = self.loop.call_later(seconds, self._too_slow)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _too_slow(self) -> None:
            self._timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            idle = self.cycle is None or self.cycle.response_complete
            if idle and self._timer is None:  # the first bytes of the next request on a kept-alive connection
                self._arm(server.header_timeout_seconds)
            super().data_received(data)
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                if cycle.more_body:  # headers in; the body still coming
                    if not getattr(cycle, "_body_timer_armed", False):
                        cycle._body_timer_armed = True  # type: ignore[attr-defined]
                        self._arm(server.body_timeout_seconds)
                else:
                    self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._counted and self._host is not None:
                self._counted = False
                per_client[self._host] -= 1
                if per_client[self._host] <= 0:
                    del per_client[self._host]
            super().connection_lost(exc)

    return LimitedH11Protocol
