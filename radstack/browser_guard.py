"""Safe from other websites: what a page in the user's browser may not make the server do.

- **DNS rebinding.** A request's ``Host`` must be an IP address (a page cannot rebind a literal address),
  the name the server binds, or a name in ``server.allowed_hosts`` (default: ``localhost`` and its
  subdomains); else 403 before anything runs. A deployment reached by name lists its names (docs/deployment.md).
- **Cross-site requests.** A request that is not a plain read (anything but GET/HEAD/OPTIONS: queries,
  tasks, ``markUnused``, rules) with an ``Origin`` other than the server's own, or with ``Sec-Fetch-Site:
  cross-site``, is refused with 403 unless its origin is in ``server.cors_allowed_origins``; those origins
  get CORS headers (and their preflights an answer), no other origin does, so a foreign page can neither
  act nor read. ``Content-Type: text/plain`` (a "simple" request with no preflight) changes nothing.
- **Headers.** Every answer carries ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY`` and
  ``Referrer-Policy: no-referrer``; the console's pages also a ``Content-Security-Policy`` (scripts only
  from the server itself, no framing).

Tests: ``tests/unit/test_browser_guard.py``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from radstack.druid_errors import DruidError

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DEFAULT_HOSTS = ("localhost", ".localhost")
CONSOLE_CSP = (b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
               b"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
_COMMON_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
                   (b"referrer-policy", b"no-referrer")]
_CONSOLE_PATHS = ("/", "/console", "/unified-console.html")


def _host_name(host_header: str) -> str:
    """The host of a ``Host`` header, without its port (IPv6 literals keep no brackets)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%")[0])
        return True
    except ValueError:
        return False


def host_allowed(host_header: str | None, allowed: Iterable[str]) -> bool:
    """An IP literal, or a name listed (``.example.com`` also allows its subdomains; ``*`` allows any)."""
    if not host_header:
        return True  # HTTP/1.0 without Host: not a browser
    host = _host_name(host_header).rstrip(".")
    if _is_ip(host):
        return True
    for entry in allowed:
        entry = entry.strip().lower()
        if entry == "*" or host == entry.lstrip(".") or (entry.startswith(".") and host.endswith(entry)):
            return True
    return False


def _origin(value: str) -> str:
    parts = urlsplit(value.strip())
    return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else value.strip().lower()


class BrowserGuardMiddleware:
    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str] = (), cors_allowed_origins: Iterable[str] = (),
                 section: str = "server", bind_host: str = "") -> None:
        self.app = app
        self.section = section  # where the two settings live, named in the refusals
        # the name it binds (``server.host: radstack.internal``) is always one it answers to
        own = (bind_host,) if bind_host and not _is_ip(bind_host.strip("[]")) else ()
        self.allowed_hosts = (*(tuple(allowed_hosts) or DEFAULT_HOSTS), *own)
        self.origins = frozenset(_origin(o) for o in cors_allowed_origins if o)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host")
        if not host_allowed(host, self.allowed_hosts):
            await _refuse(send, f"Forbidden: host [{_host_name(host or '')[:100]}] is not one this server answers "
                                f"to ({self.section}.allowed_hosts)")
            return
        origin = headers.get("origin")
        listed = origin is not None and _origin(origin) in self.origins
        same = origin is not None and host is not None and urlsplit(origin.strip()).netloc.lower() == host.strip().lower()
        method = scope["method"].upper()
        if method == "OPTIONS" and listed and "access-control-request-method" in headers:
            await _preflight(send, origin or "", headers)
            return
        cross_site = headers.get("sec-fetch-site", "").lower() == "cross-site"
        if method not in SAFE_METHODS and not listed and not same and (origin is not None or cross_site):
            await _refuse(send, "Forbidden: a request from another website (its Origin is not this server's and "
                                f"not in {self.section}.cors_allowed_origins)")
            return
        console = scope["path"] in _CONSOLE_PATHS or scope["path"].startswith("/console/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = list(_COMMON_HEADERS)
                if console:
                    extra.append((b"content-security-policy", CONSOLE_CSP))
                if listed:
                    extra += [(b"access-control-allow-origin", (origin or "").encode("latin-1")),
                              (b"access-control-allow-credentials", b"true"), (b"vary", b"Origin")]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _refuse(send: Send, message: str) -> None:
    body = orjson.dumps(DruidError(message, category="FORBIDDEN").to_json())
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *_COMMON_HEADERS]})
    await send({"type": "http.response.body", "body": body})


async def _preflight(send: Send, origin: str, headers: dict[str, str]) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": [
        (b"access-control-allow-origin", origin.encode("latin-1")), (b"access-control-allow-credentials", b"true"),
        (b"access-control-allow-methods", b"GET, POST, DELETE"),
        (b"access-control-allow-headers", headers.get("access-control-request-headers", "").encode("latin-1")[:1000]),
        (b"access-control-max-age", b"600"), (b"vary", b"Origin"), *_COMMON_HEADERS]})
    await send({"type": "http.response.body", "body": b""})
