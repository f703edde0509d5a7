"""Who may post events: ``receiver.auth.users`` and the topics their roles grant."""

from __future__ import annotations

from dataclasses import dataclass

from radstack.config import Settings
from radstack.passwords import GENERATED_ADMIN, generated_admin
from radstack.permissions import Permission, parse_roles, parse_user


@dataclass(frozen=True)
class ReceiverUser:
    password_hash: str
    topics: tuple[Permission, ...] | None  # None: every allowed topic

    def may_write(self, topic: str) -> bool:
        return self.topics is None or any(p.allows("TOPIC", topic, "WRITE") for p in self.topics)


def receiver_users(settings: Settings) -> dict[str, ReceiverUser]:
    """``receiver.auth.users`` by name (a plain ``password`` is refused). A user with ``roles`` may write
    only the topics those roles (``receiver.auth.roles``) grant ``TOPIC`` ``WRITE`` on; without roles,
    every allowed topic."""
    auth = settings.receiver.auth
    roles = parse_roles(auth.roles, "receiver.auth")
    users: dict[str, ReceiverUser] = {}
    for i, raw in enumerate(auth.users or []):
        u = parse_user(raw, f"receiver.auth.users[{i}]", roles)
        topics = None if u.roles is None else tuple(p for r in u.roles for p in roles[r])
        users[u.name] = ReceiverUser(u.password_hash, topics)
    if auth.enabled and auth.generate_admin and GENERATED_ADMIN not in users:
        encoded = generated_admin(settings.home, "receiver")
        users[GENERATED_ADMIN] = ReceiverUser(encoded, None)  # every allowed topic
    return users
