"""State shared by the rewrite rules while one statement is translated."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from radstack.sql_text import DEFAULT_MAX_VALUE_BYTES
from radstack.time.joda import canonical_zone, zone
from serving.broker.sql.catalog import Catalog
from serving.broker.sql.errors import validation_error


def truthy(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() not in ("false", "0", "no", "")
    return bool(v)


#: the query-context keys a translation reads: only these reach the rules and the translation memo's key
#: (a request's ``sqlQueryId``, ``timeout``, ``priority`` … change nothing in the plan). A rule that reads
#: another key adds it here.
PLANNING_KEYS = ("sqlTimeZone", "useApproximateCountDistinct", "noProjections", "useProjection", "forceProjections")


def planning_context(context: dict[str, Any] | None) -> dict[str, Any]:
    """The part of a query context that can change a translation (:data:`PLANNING_KEYS`)."""
    return {k: context[k] for k in PLANNING_KEYS if k in (context or {})}  # type: ignore[index]


@dataclass
class TranslationContext:
    catalog: Catalog
    now_ms: int
    query_context: dict[str, Any] = field(default_factory=dict)  # planning_context() of the request's
    udfs: set[str] = field(default_factory=set)  # DuckDB UDFs the statement needs
    system_tables: set[tuple[str, str]] = field(default_factory=set)  # (schema, table) used
    datasources: set[str] = field(default_factory=set)  # datasources read
    lookups: set[str] = field(default_factory=set)  # lookups read (lookup.name or LOOKUP())
    cte_names: set[str] = field(default_factory=set)
    projections: dict[str, str] = field(default_factory=dict)  # datasource → projection that answered
    max_string_bytes: int = DEFAULT_MAX_VALUE_BYTES  # server.max_string_bytes (rules/value_limits.py)
    parameters: list[dict[str, Any]] = field(default_factory=list)  # the request's dynamic parameters
    system_schema: dict[str, dict[str, str]] | None = None  # sys/INFORMATION_SCHEMA columns (None: SYSTEM_SCHEMA)

    @property
    def time_zone(self) -> str:
        """Druid's ``sqlTimeZone`` context key (default UTC): the zone of the TIME_* defaults; a fixed
        offset (``-08:00``) spelled as every engine here reads it (``GMT-08:00``)."""
        name = str(self.query_context.get("sqlTimeZone") or "UTC")
        try:
            zone(name)
        except ValueError as e:  # a 400, whichever rule reads the zone first
            raise validation_error(f"Invalid sqlTimeZone [{name}]: {e}") from e
        return canonical_zone(name)

    @property
    def approximate_count_distinct(self) -> bool:
        return truthy(self.query_context.get("useApproximateCountDistinct", True))
