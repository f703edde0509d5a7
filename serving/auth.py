"""Optional HTTP Basic authentication and Druid-style permissions for the embedded server (``server.auth``).

``server.auth.enabled: true`` plus ``server.auth.users: [{name, password_hash, roles}]``. Passwords are
stored as hashes (:mod:`radstack.passwords`; ``radctl auth hash-password``); a plain ``password`` is
refused at start-up. Permissions have the shape of Druid's basic security:
``{"resource": {"type": DATASOURCE | STATE | CONFIG | EXTERNAL | SYSTEM_TABLE, "name": <regex>},
"action": READ | WRITE}``, granted through roles. Two roles are built in — ``read`` (read every
datasource, system table and state) and ``admin`` (everything) — and ``server.auth.roles`` adds more, e.g.
a role that reads only ``ads.*`` datasources.

What each request needs:

- queries (``POST /druid/v2``, ``/druid/v2/sql``): READ on every datasource they read (checked after
  planning, on the real table names) and on every ``sys`` table;
- a task: WRITE on its datasource, and READ on ``EXTERNAL`` resource named like the input source type
  (``local``, ``http``, ``s3``, ``hdfs``, ``archive``) unless the input is ``inline``, as Druid's
  input-source security does;
- coordinator writes under ``…/datasources/{ds}`` or ``…/rules/{ds}``: WRITE on that datasource;
  other writes (the ``_default`` rules, backfill, kill, compaction configs without a datasource in the
  path): CONFIG WRITE;
- every other ``GET``: STATE READ.

No or bad credentials → 401 (with ``WWW-Authenticate: Basic``); a missing permission → 403; too many
failed sign-ins for a user or from an address → 429 with ``Retry-After`` (:mod:`radstack.sign_in`: hashing
off the event loop, unknown users as slow as wrong passwords); all as Druid error JSON. ``/status/health``
and the console's static shell stay open, as Druid's unsecured paths do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from radstack.config import AuthSettings, Settings
from radstack.passwords import GENERATED_ADMIN, generated_admin
from radstack.permissions import ACTIONS, RESOURCE_TYPES, Permission, parse_roles, parse_user
from radstack.sign_in import SignIn, TooManyAttempts
from serving.errors import DruidError, send_error
from serving.route_access import OPEN, SIGNED_IN, required

#: answered 401 without ``WWW-Authenticate`` (the console asks it; a browser must not pop up its own dialog)
WHOAMI_PATH = "/radstack/v1/whoami"


def _all(types: Iterable[str], actions: Iterable[str]) -> tuple[Permission, ...]:
    return tuple(Permission(t, re.compile(".*"), a) for t in types for a in actions)


BUILTIN_ROLES: dict[str, tuple[Permission, ...]] = {
    "read": _all(("DATASOURCE", "STATE", "SYSTEM_TABLE", "LOOKUP"), ("READ",)),
    "admin": _all(RESOURCE_TYPES, ACTIONS),
}


@dataclass(frozen=True)
class User:
    name: str
    password_hash: str
    roles: tuple[str, ...]
    permissions: tuple[Permission, ...] = field(default=(), repr=False)

    @property
    def role(self) -> str:
        """What the console shows: ``admin`` when the user may write anything, else its roles."""
        return "admin" if "admin" in self.roles else ",".join(self.roles)

    def can(self, resource_type: str, name: str, action: str) -> bool:
        return any(p.allows(resource_type, name, action) for p in self.permissions)

    def can_any(self, resource_type: str, action: str) -> bool:
        return any(p.resource_type == resource_type and p.action == action for p in self.permissions)

    def require(self, resource_type: str, names: Iterable[str], action: str) -> None:
        """Raise 403 naming the first ``name`` this user may not ``action``."""
        for name in sorted(set(names)):
            if not self.can(resource_type, name, action):
                raise DruidError(f"Forbidden: user [{self.name}] lacks {action} on {resource_type} [{name}]",
                                 category="FORBIDDEN")


def role_permissions(auth: AuthSettings, where: str) -> dict[str, tuple[Permission, ...]]:
    return {**BUILTIN_ROLES, **parse_roles(auth.roles, where)}


def load_auth_users(auth: AuthSettings, where: str) -> dict[str, User]:
    """The users of one ``auth`` section, validated: hashed passwords, known roles (default ``read``)."""
    roles = role_permissions(auth, where)
    users: dict[str, User] = {}
    for i, raw in enumerate(auth.users or []):
        u = parse_user(raw, f"{where}.users[{i}]", roles)
        names = u.roles or ("read",)
        users[u.name] = User(u.name, u.password_hash, names, tuple(p for r in names for p in roles[r]))
    return users


def load_users(settings: Settings) -> dict[str, User]:
    users = load_auth_users(settings.server.auth, "server.auth")
    auth = settings.server.auth
    if auth.enabled and auth.generate_admin and GENERATED_ADMIN not in users:
        encoded = generated_admin(settings.home, "server")
        users[GENERATED_ADMIN] = User(GENERATED_ADMIN, encoded, ("admin",), BUILTIN_ROLES["admin"])
    return users


def too_many_attempts(e: TooManyAttempts) -> DruidError:
    return DruidError(f"Too many sign-in attempts: {e.reason}; retry after {e.retry_after} s "
                      "(server.auth.max_failed_logins)", category="CAPACITY_EXCEEDED", error_code="tooManyAttempts")


def datasource_reader(scope_or_request: Any) -> Callable[[str], bool]:
    """Whether the request's user may see a datasource (DATASOURCE READ; everyone when auth is off):
    Druid filters its coordinator and overlord lists this way."""
    user = request_user(scope_or_request)
    if user is None:
        return lambda _name: True
    return lambda name: user.can("DATASOURCE", name, "READ")


def query_canceller(user: User | None) -> Any:
    """Who may cancel a running query: anyone without auth; with auth its owner or a STATE WRITE holder."""
    if user is None:
        return None
    return lambda rq: rq.owner == user.name or user.can("STATE", "STATE", "WRITE")


def request_user(scope_or_request: Any) -> User | None:
    """The authenticated user of a request (None when auth is off)."""
    state = scope_or_request.get("state") if isinstance(scope_or_request, dict) else getattr(
        scope_or_request, "scope", {}).get("state")
    return (state or {}).get("user")


class BasicAuthMiddleware:
    """ASGI middleware: authenticate, then enforce :func:`required`."""

    def __init__(self, app: ASGIApp, users: Mapping[str, User], auth: AuthSettings | None = None) -> None:
        self.app = app
        self.users = dict(users)
        # radstack/sign_in.py: off the event loop, unknown users as slow as wrong passwords, rate-limited
        self.sign_in = SignIn.for_auth({n: u.password_hash for n, u in self.users.items()}, auth or AuthSettings())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        need = required(scope["method"], scope["path"])  # serving/route_access.py: every route's rule
        if need == OPEN:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        client = (scope.get("client") or ("unknown", 0))[0]
        try:
            name = await self.sign_in.authenticate(headers.get("authorization"), str(client))
        except TooManyAttempts as e:
            await send_error(send, too_many_attempts(e), extra_headers=[(b"retry-after", str(e.retry_after).encode())])
            return
        user = self.users.get(name) if name is not None else None
        if user is None:
            err = DruidError("Unauthorized: missing or invalid credentials", category="UNAUTHORIZED")
            challenge = [] if scope["path"] == WHOAMI_PATH else [(b"www-authenticate", b'Basic realm="radstack"')]
            await send_error(send, err, extra_headers=challenge)
            return
        if need == SIGNED_IN and scope["path"] == "/druid/indexer/v1/task" and not user.can_any("DATASOURCE", "WRITE"):
            need = ("DATASOURCE", "*", "WRITE")  # may write no datasource at all: refuse before parsing
        if isinstance(need, tuple) and not (need[1] == "*" and user.can_any(need[0], need[2])) and not user.can(*need):
            err = DruidError(f"Forbidden: user [{user.name}] may not {scope['method']} {scope['path']} "
                             f"(needs {need[2]} on {need[0]} [{need[1]}])", category="FORBIDDEN")
            await send_error(send, err)
            return
        scope.setdefault("state", {})["user"] = user
        await self.app(scope, receive, send)
