"""Permissions in the shape of Druid's basic security, shared by the server's and the receiver's auth:
``{"resource": {"type": <type>, "name": <regex>}, "action": "READ" | "WRITE"}``.

Types: ``DATASOURCE``, ``STATE``, ``CONFIG``, ``EXTERNAL``, ``SYSTEM_TABLE`` (Druid's) and ``TOPIC``
(radstack's receiver: which Kafka topics a user may write events to)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ACTIONS", "RESOURCE_TYPES", "Permission", "parse_permission"]

RESOURCE_TYPES = ("DATASOURCE", "STATE", "CONFIG", "EXTERNAL", "SYSTEM_TABLE", "TOPIC")
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
