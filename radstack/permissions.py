"""Permissions in the shape of Druid's basic security, shared by the server's and the receiver's auth:
``{"resource": {"type": <type>, "name": <regex>}, "action": "READ" | "WRITE"}``.

Types: ``DATASOURCE``, ``STATE``, ``CONFIG``, ``EXTERNAL``, ``SYSTEM_TABLE``, ``LOOKUP`` (Druid's: READ on a
lookup to query it with ``LOOKUP()`` / ``lookup.name`` or read it through the lookup APIs) and ``TOPIC``
(radstack's receiver: which Kafka topics a user may write events to)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from radstack.passwords import is_hash

__all__ = ["ACTIONS", "RESOURCE_TYPES", "Permission", "UserEntry", "parse_permission", "parse_roles", "parse_user"]

RESOURCE_TYPES = ("DATASOURCE", "STATE", "CONFIG", "EXTERNAL", "SYSTEM_TABLE", "TOPIC", "LOOKUP")
ACTIONS = ("READ", "WRITE")


@dataclass(frozen=True)
class Permission:
    resource_type: str
    name: re.Pattern[str]
    action: str

    def allows(self, resource_type: str, name: str, action: str) -> bool:
        return (self.resource_type == resource_type and self.action == action
                and self.name.fullmatch(name) is not None)


def parse_permission(raw: Any, where: str) -> Permission:
    """One permission from its JSON/YAML form; ``ValueError`` naming ``where`` when it is malformed."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("resource"), Mapping):
        raise ValueError(f"{where}: expected {{resource: {{type, name}}, action}}")
    res = raw["resource"]
    rtype, action = str(res.get("type", "")).upper(), str(raw.get("action", "")).upper()
    if rtype not in RESOURCE_TYPES:
        raise ValueError(f"{where}.resource.type: expected one of {', '.join(RESOURCE_TYPES)}, got {rtype!r}")
    if action not in ACTIONS:
        raise ValueError(f"{where}.action: expected READ or WRITE, got {action!r}")
    try:
        pattern = re.compile(str(res.get("name", ".*")))
    except re.error as e:
        raise ValueError(f"{where}.resource.name: not a regular expression: {e}") from None
    return Permission(rtype, pattern, action)


def parse_roles(raw: Mapping[str, Any] | None, where: str) -> dict[str, tuple[Permission, ...]]:
    """``{role: [permission, …]}`` of an ``auth.roles`` section."""
    roles: dict[str, tuple[Permission, ...]] = {}
    for name, perms in (raw or {}).items():
        if not isinstance(perms, list):
            raise ValueError(f"{where}.roles.{name}: expected a list of permissions")
        roles[name] = tuple(parse_permission(p, f"{where}.roles.{name}[{i}]") for i, p in enumerate(perms))
    return roles


@dataclass(frozen=True)
class UserEntry:
    name: str
    password_hash: str
    roles: tuple[str, ...] | None  # None: the entry names no role


def parse_user(raw: Any, at: str, known_roles: Mapping[str, Any]) -> UserEntry:
    """One ``auth.users`` entry: a name, a password *hash* (a plain ``password`` is refused) and known roles."""
    if not isinstance(raw, Mapping) or not raw.get("name"):
        raise ValueError(f"{at}: expected {{name, password_hash, roles}}")
    if "password" in raw:
        raise ValueError(f"{at}.password: plain-text passwords are not accepted; store password_hash "
                         "instead (radctl auth hash-password)")
    encoded = str(raw.get("password_hash", ""))
    if not is_hash(encoded):
        raise ValueError(f"{at}.password_hash: expected pbkdf2_sha256$… (radctl auth hash-password)")
    names = raw.get("roles", [raw["role"]] if "role" in raw else None)
    if names is not None:
        names = (names,) if isinstance(names, str) else tuple(names)
        unknown = [r for r in names if r not in known_roles]
        if unknown:
            raise ValueError(f"{at}.roles: unknown role(s) {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(sorted(known_roles))}")
    return UserEntry(str(raw["name"]), encoded, names)
