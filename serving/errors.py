"""Druid's error JSON and the HTTP status that goes with it.

Current Druid answers errors as a ``DruidException``::

    {"error": "druidException", "errorCode": "invalidInput", "persona": "USER",
     "category": "INVALID_INPUT", "errorMessage": "...", "context": {...}}

with the status taken from the category. Older clients (pydruid, Superset) read ``error``,
``errorMessage`` and ``errorClass``, so the legacy fields ``errorClass`` and ``host`` are added too.
Raise :class:`DruidError` anywhere below a request handler; the app turns it into that response.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

log = logging.getLogger(__name__)

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

# Druid's legacy error codes (QueryException) for the same categories.
LEGACY_ERROR: dict[str, str] = {
    "INVALID_INPUT": "Plan validation failed",
    "CAPACITY_EXCEEDED": "Query capacity exceeded",
    "TIMEOUT": "Query timeout",
    "UNSUPPORTED": "Unsupported operation",
    "CANCELED": "Query cancelled",
    "RUNTIME_FAILURE": "Unknown exception",
    "UNCATEGORIZED": "Unknown exception",
    "DEFENSIVE": "Unknown exception",
}


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


#: radstack's own relation and function names (``__seg_3``, ``__rs_cte_1`` …): never echoed in an error message
_INTERNAL_TEXT = re.compile(r"__(?!time\b)[A-Za-z0-9_]+")


def user_message(msg: str) -> str:
    """The first line of a DuckDB message about the user's statement, without DuckDB's error-class
    prefix, radstack's internal names, anything that looks like a path, or a quoted name that is not a
    plain name (:func:`shown_name`)."""
    first = re.sub(r"^[A-Za-z ]+ Error: ", "", msg.split("\n", 1)[0])
    first = _QUOTED.sub(lambda m: m.group(1) + shown_name(m.group(2)) + m.group(1), first)
    return redact_paths(_INTERNAL_TEXT.sub("?", first))


_QUOTED = re.compile(r"(['\"])([^'\"]*)\1")


#: a name an error message may repeat as the client sent it: no path, glob, URL or file name characters
_SHOWN_NAME = re.compile(r"[A-Za-z0-9_\- ]{1,128}")


def shown_name(name: str) -> str:
    """``name`` as an error message may show it: as sent when it is a plain name, else a placeholder —
    an answer never repeats a path, a glob, a URL or a file name (nothing to confirm, nothing to probe)."""
    return name if _SHOWN_NAME.fullmatch(name) else "<not a table name>"


#: what looks like a path, a URL or a file name inside a message
_PATHLIKE = re.compile(
    r"""(?:[A-Za-z][A-Za-z0-9+.-]*://|~?/|\.\.?/)[^\s'"\])]*"""
    r"""|[^\s'"()\[\],]*\.(?:csv|tsv|json|jsonl|ndjson|parquet|txt|db|duckdb|duckdb_extension|gz|zst|arrow|xlsx?|sqlite)\b"""
    r"""|[^\s'"()\[\],]*[*?][^\s'"()\[\],]*[/.][^\s'"()\[\],]*""",
    re.IGNORECASE)


def redact_paths(message: str) -> str:
    """``message`` with every path, URL, glob or file name replaced by ``<path>``: a query's error repeats
    what the client sent, but never a file's name, so no answer confirms or lists one."""
    return _PATHLIKE.sub("<path>", message)


def query_error(err: DruidError) -> DruidError:
    """``err`` as a query answers it: paths redacted from its message (:func:`redact_paths`)."""
    err.message = redact_paths(err.message)
    err.args = (err.message,)
    return err


def object_not_found(name: str, within: str | None = None) -> DruidError:
    """Druid's ``Object 'x' not found`` (400) for a table that is not there or not radstack's to show."""
    where = f" within '{within}'" if within else ""
    return DruidError(f"Object '{shown_name(name)}' not found{where}", category="INVALID_INPUT",
                      error_code="invalidInput", context={"legacyErrorCode": "Plan validation failed"})


def engine_refusal(e: BaseException, query_id: str | None = None) -> DruidError | None:
    """Druid's error for a DuckDB refusal that is the statement's doing, not the server's (None: it is
    the server's): an engine feature that does not exist is 501; something the locked engine refused to
    reach (a file, a setting, an extension: radstack/duckdb_sandbox.py) is 403 — logged, since the
    checks before the engine should have refused it first; running out of memory is 429."""
    name = type(e).__name__
    if name == "NotImplementedException":
        return unsupported("This statement uses something the query engine does not implement")
    if name == "PermissionException":
        log.warning("query %s: the locked engine refused: %s", query_id, e)
        return DruidError("Forbidden: the statement tries to reach something outside the data radstack serves",
                          category="FORBIDDEN")
    if name == "OutOfMemoryException":
        return capacity_exceeded("The query needs more memory than server.memory_limit allows")
    return None


def internal_error(exc: BaseException | str, *, query_id: str | None = None) -> DruidError:
    """An unexpected failure as a generic 500 whose id (``query_id`` when given) finds the detail —
    logged here with its traceback — in the server log."""
    error_id = query_id or uuid.uuid4().hex
    if isinstance(exc, BaseException):
        log.error("internal error %s: %s: %s", error_id, type(exc).__name__, exc, exc_info=exc)
    else:
        log.error("internal error %s: %s", error_id, exc)
    return DruidError(str(exc), category="RUNTIME_FAILURE", error_id=error_id, logged=True)


def invalid_input(message: str, **context: Any) -> DruidError:
    return DruidError(message, category="INVALID_INPUT", context={k: str(v) for k, v in context.items()})


def not_found(message: str) -> DruidError:
    return DruidError(message, category="NOT_FOUND")


def unsupported(message: str) -> DruidError:
    return DruidError(message, category="UNSUPPORTED")


def timeout(message: str = "Query did not complete within the configured timeout") -> DruidError:
    return DruidError(message, category="TIMEOUT", error_code="legacyQueryException",
                      context={"legacyErrorCode": "Query timeout"})


def capacity_exceeded(message: str = "Too many concurrent queries") -> DruidError:
    return DruidError(message, category="CAPACITY_EXCEEDED", error_code="legacyQueryException",
                      context={"legacyErrorCode": "Query capacity exceeded"})


def cancelled(message: str = "Query cancelled") -> DruidError:
    return DruidError(message, category="CANCELED", error_code="legacyQueryException",
                      context={"legacyErrorCode": "Query cancelled"})
