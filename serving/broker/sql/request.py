"""A SQL request's parts as the SQL API and the subscriptions read them: its ``context`` and
``parameters``, Druid's ``sqlStringifyArrays``, and what its user may read (the authorizer the engine
calls with the translation, the reader that hides other datasources' rows of system tables)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from serving.auth import User
from serving.broker.sql.translate import Translation
from serving.errors import DruidError


def context_and_parameters(body: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """The ``context`` object and ``parameters`` array of a SQL request (400 when of the wrong type)."""
    context = body.get("context")
    if context is None:
        context = {}
    if not isinstance(context, dict):
        raise DruidError("'context' must be a JSON object")
    parameters = body.get("parameters")
    if parameters is None:
        parameters = []
    if not isinstance(parameters, list):
        raise DruidError("'parameters' must be a JSON array")
    return context, parameters


def stringify_arrays(context: dict[str, Any]) -> bool:
    """Druid's ``sqlStringifyArrays`` (default true): arrays in results written as JSON strings."""
    return context.get("sqlStringifyArrays", True) not in (False, "false")


def authorizer(user: User | None) -> Callable[[Translation], None] | None:
    """READ on every datasource, lookup and ``sys`` table the statement reads (nothing to check without auth)."""
    if user is None:
        return None

    def check(tr: Translation) -> None:
        user.require("DATASOURCE", tr.datasources, "READ")
        user.require("LOOKUP", tr.lookups, "READ")
        user.require("SYSTEM_TABLE", {f"{schema}.{table}" for schema, table in tr.system_tables
                                      if schema.lower() == "sys"}, "READ")

    return check


def reader(user: User | None) -> Callable[[str], bool] | None:
    """Whether the user may read a datasource (None: everyone may, without auth)."""
    return None if user is None else (lambda ds: user.can("DATASOURCE", ds, "READ"))
