"""Druid's error: :class:`DruidError` and the HTTP status of its category, in the lowest layer so every
process that answers HTTP (the server, the receiver, the browser guard) raises and renders one kind.

Current Druid answers errors as a ``DruidException``::

    {"error": "druidException", "errorCode": "invalidInput", "persona": "USER",
     "category": "INVALID_INPUT", "errorMessage": "...", "context": {...}}

with the status taken from the category. Older clients (pydruid, Superset) read ``error``,
``errorMessage`` and ``errorClass``, so the legacy fields ``errorClass`` and ``host`` are added too.
The server's helpers and its one renderer are in :mod:`serving.errors`.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import orjson

log = logging.getLogger("serving.errors")

CATEGORY_STATUS: dict[str, int] = {
    "DEFENSIVE": 500,
    "INVALID_INPUT": 400,
    "UNAUTHORIZED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "CONFLICT": 409,
    "CAPACITY_EXCEEDED": 429,
    "CANCELED": 500,
    "RUNTIME_FAILURE": 500,
    "TIMEOUT": 504,
    "UNSUPPORTED": 501,
    "SERVICE_UNAVAILABLE": 503,
    "UNCATEGORIZED": 500,
}



def category_of_status(status: int) -> str:
    """The category of an HTTP status the web framework answers with (404 for a route not there, 405, 413 …)."""
    extra = {405: "UNSUPPORTED", 413: "CAPACITY_EXCEEDED", 415: "UNSUPPORTED"}
    if status in extra:
        return extra[status]
    for category, code in CATEGORY_STATUS.items():
        if code == status and code != 500:
            return category
    return "RUNTIME_FAILURE" if status >= 500 else "INVALID_INPUT"


#: categories of failures that are the server's, not the client's: their text never leaves the server
INTERNAL_CATEGORIES = frozenset({"RUNTIME_FAILURE", "UNCATEGORIZED", "DEFENSIVE"})


class DruidError(Exception):
    """An error that becomes Druid's error JSON with the status of its category.

    An internal failure (:data:`INTERNAL_CATEGORIES`) never shows its text: the client gets a generic
    message and an id (the query id when there is one); the text goes to the server log under that id,
    so no DuckDB, Python, Spark or file-system message reaches a client."""

    def __init__(
        self,
        message: str,
        *,
        category: str = "INVALID_INPUT",
        error_code: str | None = None,
        error_class: str | None = None,
        persona: str = "USER",
        context: dict[str, Any] | None = None,
        status: int | None = None,
        error_id: str | None = None,
        logged: bool = False,
    ) -> None:
        if category not in CATEGORY_STATUS:
            raise ValueError(f"unknown Druid error category {category!r}")
        if category in INTERNAL_CATEGORIES:
            error_id = error_id or uuid.uuid4().hex
            if not logged:
                log.error("internal error %s: %s", error_id, message)
            message = (f"Internal error: the server could not complete this request (id {error_id}; "
                       "the server log has the details under this id)")
            context = {**(context or {}), "errorId": error_id}
            error_class, persona = None, "OPERATOR"
        super().__init__(message)
        self.error_id = error_id
        self.message = message
        self.category = category
        self.error_code = error_code or _default_code(category)
        self.error_class = error_class or "org.apache.druid.error.DruidException"
        self.persona = persona
        self.context = context or {}
        self.status = status or CATEGORY_STATUS[category]

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with every field (a planning worker raises it in the server: planning_pool.py)."""
        return (_rebuild_error, (type(self), self.args, dict(self.__dict__)))

    def to_bytes(self) -> bytes:
        """The error JSON as sent (every renderer of the server writes these bytes)."""
        return orjson.dumps(self.to_json())

    def to_json(self) -> dict[str, Any]:
        return {
            "error": "druidException",
            "errorCode": self.error_code,
            "persona": self.persona,
            "category": self.category,
            "errorMessage": self.message,
            "context": self.context,
            "errorClass": self.error_class,
            "host": None,
        }


def _rebuild_error(cls: type[DruidError], args: tuple[Any, ...], fields: dict[str, Any]) -> DruidError:
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(fields)
    return err


def _default_code(category: str) -> str:
    return {
        "INVALID_INPUT": "invalidInput",
        "NOT_FOUND": "notFound",
        "CAPACITY_EXCEEDED": "capacityExceeded",
        "TIMEOUT": "timeout",
        "UNSUPPORTED": "unsupported",
        "CANCELED": "canceled",
        "UNAUTHORIZED": "unauthorized",
        "FORBIDDEN": "forbidden",
        "CONFLICT": "conflict",
        "SERVICE_UNAVAILABLE": "serviceUnavailable",
    }.get(category, "runtimeFailure")
