"""Druid's error JSON and the HTTP status that goes with it.

Current Druid answers errors as a ``DruidException``::

    {"error": "druidException", "errorCode": "invalidInput", "persona": "USER",
     "category": "INVALID_INPUT", "errorMessage": "...", "context": {...}}

with the status taken from the category. Older clients (pydruid, Superset) read ``error``,
``errorMessage`` and ``errorClass``, so the legacy fields ``errorClass`` and ``host`` are added too.
Raise :class:`DruidError` anywhere below a request handler; the app's handler turns it into that
response with :func:`error_response` (and a middleware, which answers before any handler, with
:func:`send_error`): the one place an error becomes HTTP.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.types import Message, Send

from radstack.druid_errors import CATEGORY_STATUS, INTERNAL_CATEGORIES, DruidError, category_of_status

__all__ = ["CATEGORY_STATUS", "INTERNAL_CATEGORIES", "DruidError"]

log = logging.getLogger(__name__)


def error_response(err: DruidError, headers: dict[str, str] | None = None) -> Response:
    """Druid's error JSON with its status, as a response."""
    return Response(err.to_bytes(), status_code=err.status, media_type="application/json", headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Every error a route raises answered as Druid's error JSON: a :class:`DruidError` as itself, the
    framework's validation and HTTP errors with their category, anything else as an internal error
    (logged with its traceback under the id it answers)."""

    @app.exception_handler(DruidError)
    async def _druid_error(_request: Request, exc: DruidError) -> Response:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError) -> Response:
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path"))
        msg = str(first.get("msg", "invalid request"))
        return error_response(invalid_input(f"{where}: {msg}" if where else msg))

    @app.exception_handler(HTTPException)
    async def _http_error(_request: Request, exc: HTTPException) -> Response:
        detail = exc.detail if isinstance(exc.detail, str) else orjson.dumps(exc.detail).decode()
        err = DruidError(detail, category=category_of_status(exc.status_code), status=exc.status_code)
        return error_response(err, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected_error(_request: Request, exc: Exception) -> Response:
        return error_response(internal_error(exc))


class StartWatch:
    """An ASGI ``send`` that remembers whether the response has started (after that, no error can be sent)."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.started = False

    async def __call__(self, msg: Message) -> None:
        if msg["type"] == "http.response.start":
            self.started = True
        await self.send(msg)


async def send_error(send: Send, err: DruidError, extra_headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """The same answer sent on an ASGI channel (a middleware answering before any handler)."""
    body = err.to_bytes()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *(extra_headers or [])]
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

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


#: what looks like a path, a URL or a file name inside a message (an IPv4 subnet, ``10.0.0.0/8``, is kept)
_PATHLIKE = re.compile(
    r"""(?P<subnet>\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}/[0-9]{1,3}\b)"""
    r"""|(?:[A-Za-z][A-Za-z0-9+.-]*://|~?/|\.\.?/)[^\s'"\])]*"""
    r"""|[^\s'"()\[\],]*\.(?:csv|tsv|json|jsonl|ndjson|parquet|txt|db|duckdb|duckdb_extension|gz|zst|arrow|xlsx?|sqlite)\b"""
    r"""|[^\s'"()\[\],]*[*?][^\s'"()\[\],]*[/.][^\s'"()\[\],]*""",
    re.IGNORECASE)


def redact_paths(message: str) -> str:
    """``message`` with every path, URL, glob or file name replaced by ``<path>``: a query's error repeats
    what the client sent, but never a file's name, so no answer confirms or lists one."""
    return _PATHLIKE.sub(lambda m: m.group() if m.group("subnet") else "<path>", message)


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
