"""Optional HTTP Basic authentication for the embedded server (``server.auth``).

``server.auth.enabled: true`` plus ``server.auth.users: [{name, password, role}]`` with role
``read`` or ``admin``. Readers may call every ``GET``/``HEAD`` endpoint and the query endpoints
(``/druid/v2…``, which are POSTs but read-only); everything else that writes — task submission and
shutdown, coordinator mark/kill, rules — needs ``admin``. No or bad credentials → 401 (with
``WWW-Authenticate: Basic``); a reader attempting a write → 403; both as Druid error JSON.
``/status/health`` stays open for load balancers, as Druid's default unsecured paths do.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from radstack.config import Settings
from serving.errors import DruidError

ROLES = ("read", "admin")
UNSECURED_PATHS = ("/status/health",
                   # the web console's static files and what it needs to show its sign-in form
                   "/", "/console", "/unified-console.html", "/radstack/v1/capabilities", "/radstack/v1/whoami")
UNSECURED_PREFIXES = ("/console/",)
READ_METHODS = ("GET", "HEAD", "OPTIONS")
READ_POST_PREFIXES = ("/druid/v2",)  # native + SQL queries (and their cancels)


@dataclass(frozen=True)
class User:
    name: str
    password: str
    role: str


def load_users(settings: Settings) -> dict[str, User]:
    users: dict[str, User] = {}
    for i, u in enumerate(settings.server.auth.users or []):
        if not isinstance(u, Mapping) or not u.get("name"):
            raise ValueError(f"server.auth.users[{i}]: expected {{name, password, role}}")
        role = str(u.get("role", "read"))
        if role not in ROLES:
            raise ValueError(f"server.auth.users[{i}].role: expected read or admin, got {role!r}")
        users[str(u["name"])] = User(str(u["name"]), str(u.get("password", "")), role)
    return users


def needs_admin(method: str, path: str) -> bool:
    if method.upper() in READ_METHODS:
        return False
    return not path.startswith(READ_POST_PREFIXES)


def authenticate(header: str | None, users: Mapping[str, User]) -> User | None:
    """The user named by a ``Basic`` Authorization header, or None."""
    if not header or not header.lower().startswith("basic "):
        return None
    try:
        name, _, password = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user = users.get(name)
    if user is None or not hmac.compare_digest(user.password.encode(), password.encode()):
        return None
    return user


class BasicAuthMiddleware:
    """ASGI middleware enforcing :func:`authenticate` and :func:`needs_admin`."""

    def __init__(self, app: ASGIApp, users: Mapping[str, User]) -> None:
        self.app = app
        self.users = dict(users)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNSECURED_PATHS or scope["path"].startswith(UNSECURED_PREFIXES):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        user = authenticate(headers.get("authorization"), self.users)
        if user is None:
            err = DruidError("Unauthorized: missing or invalid credentials", category="UNAUTHORIZED")
            await send_error(send, err, extra_headers=[(b"www-authenticate", b'Basic realm="radstack"')])
            return
        if needs_admin(scope["method"], scope["path"]) and user.role != "admin":
            err = DruidError(f"Forbidden: user [{user.name}] may not {scope['method']} {scope['path']}",
                             category="FORBIDDEN")
            await send_error(send, err)
            return
        scope.setdefault("state", {})["user"] = user
        await self.app(scope, receive, send)


async def send_error(send: Send, err: DruidError, extra_headers: list[tuple[bytes, bytes]] | None = None) -> None:

    body = orjson.dumps(err.to_json())
    headers: list[Any] = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += extra_headers or []
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
