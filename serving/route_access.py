"""What every route of the server needs, declared once (the one authorization point the auth middleware
enforces, :mod:`serving.auth`): each route of the app is in :data:`ROUTES`, and
``tests/unit/test_route_access.py`` fails when a route is added without a line here.

A rule is one of:

- ``OPEN``: no sign-in (health, the console's static shell, what its sign-in form needs);
- ``SIGNED_IN``: any signed-in user; the handler checks per item and says so in ``checks`` (a query's
  datasources, a task's datasource and input, a subscription's owner, lists filtered to what the user may
  read);
- a resource: ``(type, action)`` on a name taken from a path parameter (``DATASOURCE`` READ on
  ``{data_source}``; ``LOOKUP`` READ on ``{name}``) or on the type's one name (``STATE``, ``CONFIG``).

A path no rule matches (it will be a 404) needs STATE READ to read and CONFIG WRITE to change, so a 404
tells nothing to a user who may not look.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from starlette.routing import compile_path

OPEN = "open"
SIGNED_IN = "signed_in"
#: the rules every datasource falls back to: STATE READ to read them, CONFIG WRITE to change them
DEFAULT_RULES = "_default"


@dataclass(frozen=True)
class Rule:
    methods: frozenset[str]
    template: str
    kind: str  # OPEN | SIGNED_IN | a resource type
    action: str = "READ"
    param: str | None = None  # the path parameter naming the resource (None: the type's one name)
    checks: str = ""  # what the handler checks besides
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", compile_path(self.template)[0])

    def need(self, params: dict[str, str]) -> tuple[str, str, str] | None:
        """The (resource type, name, action) this rule needs for a request with ``params``; None: none."""
        if self.kind in (OPEN, SIGNED_IN):
            return None
        name = params.get(self.param, "") if self.param else self.kind
        if self.kind == "DATASOURCE" and name == DEFAULT_RULES:  # the cluster-wide rules: not a datasource
            return ("STATE", "STATE", "READ") if self.action == "READ" else ("CONFIG", "CONFIG", "WRITE")
        return (self.kind, name, self.action)


def _r(methods: str, template: str, kind: str, action: str = "READ", param: str | None = None,
       checks: str = "") -> Rule:
    return Rule(frozenset(methods.split(",")), template, kind, action, param, checks)


_DS = "DATASOURCE"
_CO = "/druid/coordinator/v1"
_IX = "/druid/indexer/v1"
_LK = "/druid/coordinator/v1/lookups"
_FILTERED = "the answer lists only datasources the user may READ"

ROUTES: tuple[Rule, ...] = (
    # health and the console's shell: open, as Druid's unsecured paths
    _r("GET", "/status/health", OPEN),
    _r("GET", "/", OPEN),
    _r("GET", "/console", OPEN),
    _r("GET", "/console/", OPEN),
    _r("GET", "/unified-console.html", OPEN),
    _r("GET", "/console/{name:path}", OPEN),
    _r("GET", "/radstack/v1/capabilities", OPEN),
    _r("GET", "/radstack/v1/whoami", SIGNED_IN, checks="answers who the caller is (401 without a challenge)"),
    _r("GET", "/status", "STATE"),
    _r("GET", "/status/selfDiscovered/status", "STATE"),
    _r("GET", "/openapi.json", "STATE"),
    _r("GET", "/metrics", "STATE", checks="series about a datasource the user may not READ are left out"),
    # queries
    _r("POST", "/druid/v2/sql", SIGNED_IN, checks="READ on every datasource, sys table and lookup it reads"),
    _r("POST", "/druid/v2/sql/", SIGNED_IN, checks="READ on every datasource, sys table and lookup it reads"),
    _r("DELETE", "/druid/v2/sql/{sql_query_id}", SIGNED_IN, checks="its owner or STATE WRITE; 404 for anyone else"),
    _r("POST", "/druid/v2", SIGNED_IN, checks="READ on every datasource and lookup it reads"),
    _r("POST", "/druid/v2/", SIGNED_IN, checks="READ on every datasource and lookup it reads"),
    _r("DELETE", "/druid/v2/{query_id}", SIGNED_IN, checks="its owner or STATE WRITE; 404 for anyone else"),
    _r("GET", "/druid/v2/datasources", SIGNED_IN, checks=_FILTERED),
    _r("GET", "/druid/v2/datasources/{ds}", _DS, param="ds"),
    _r("GET", "/druid/v2/datasources/{ds}/dimensions", _DS, param="ds"),
    _r("GET", "/druid/v2/datasources/{ds}/metrics", _DS, param="ds"),
    # tasks
    _r("POST", f"{_IX}/task", SIGNED_IN, checks="WRITE on its datasource and READ on what its input reads"),
    _r("GET", f"{_IX}/task/{{task_id}}", "STATE", checks="READ on the task's datasource"),
    _r("GET", f"{_IX}/task/{{task_id}}/status", "STATE", checks="READ on the task's datasource"),
    _r("GET", f"{_IX}/task/{{task_id}}/reports", "STATE", checks="READ on the task's datasource"),
    _r("GET", f"{_IX}/task/{{task_id}}/log", "STATE", checks="READ on the task's datasource; only a log under {home}/logs"),
    _r("POST", f"{_IX}/task/{{task_id}}/shutdown", "CONFIG", "WRITE"),
    _r("POST", f"{_IX}/datasources/{{data_source}}/shutdownAllTasks", _DS, "WRITE", "data_source"),
    *(_r("GET", f"{_IX}/{p}", "STATE", checks="tasks of datasources the user may READ")
      for p in ("tasks", "runningTasks", "waitingTasks", "pendingTasks", "completeTasks")),
    # supervisors: named after their datasource
    _r("POST", f"{_IX}/supervisor", SIGNED_IN, checks="WRITE on its datasource and READ on its TOPIC"),
    _r("GET", f"{_IX}/supervisor", "STATE", checks="supervisors of datasources the user may READ, secrets redacted"),
    _r("GET", f"{_IX}/supervisor/{{supervisor_id}}", _DS, param="supervisor_id", checks="secrets redacted"),
    _r("GET", f"{_IX}/supervisor/{{supervisor_id}}/status", _DS, param="supervisor_id"),
    *(_r("POST", f"{_IX}/supervisor/{{supervisor_id}}/{verb}", _DS, "WRITE", "supervisor_id")
      for verb in ("suspend", "resume", "reset", "terminate")),
    # the coordinator: one datasource's state needs READ on it, changes WRITE
    _r("GET", f"{_CO}/datasources", "STATE", checks=_FILTERED),
    *(_r("GET", f"{_CO}/datasources/{{data_source}}{rest}", _DS, param="data_source")
      for rest in ("", "/intervals", "/intervals/{interval}", "/segments", "/segments/{segment_id}")),
    *(_r(m, f"{_CO}/datasources/{{data_source}}{rest}", _DS, "WRITE", "data_source")
      for m, rest in (("DELETE,POST", "/segments/{segment_id}"), ("POST", "/markUnused"), ("POST", "/markUsed"),
                      ("POST,DELETE", ""), ("DELETE", "/intervals/{interval}"))),
    _r("GET", f"{_CO}/metadata/datasources", "STATE", checks=_FILTERED),
    _r("GET", f"{_CO}/metadata/segments", "STATE", checks="segments of datasources the user may READ"),
    *(_r("GET", f"{_CO}/metadata/datasources/{{data_source}}{rest}", _DS, param="data_source")
      for rest in ("", "/segments", "/segments/{segment_id}")),
    _r("GET", f"{_CO}/rules", "STATE", checks="rules of datasources the user may READ (and _default)"),
    _r("GET", f"{_CO}/rules/{{data_source}}", _DS, param="data_source"),
    _r("POST", f"{_CO}/rules/{{data_source}}", _DS, "WRITE", "data_source"),
    _r("GET", f"{_CO}/config/compaction", "STATE", checks="configs of datasources the user may READ"),
    _r("POST", f"{_CO}/config/compaction", "CONFIG", "WRITE"),
    _r("GET", f"{_CO}/config/compaction/{{data_source}}", _DS, param="data_source"),
    _r("DELETE", f"{_CO}/config/compaction/{{data_source}}", _DS, "WRITE", "data_source"),
    # lookups: a resource of their own (Druid's LOOKUP); the whole configuration is CONFIG
    _r("GET", f"{_LK}/config", "CONFIG"),
    _r("POST", f"{_LK}/config", "CONFIG", "WRITE"),
    _r("GET", f"{_LK}/config/all", "CONFIG"),
    _r("GET", f"{_LK}/config/{{tier}}", "CONFIG"),
    _r("DELETE", f"{_LK}/config/{{tier}}", "CONFIG", "WRITE"),
    _r("GET", f"{_LK}/config/{{tier}}/{{name}}", "LOOKUP", param="name"),
    _r("POST,DELETE", f"{_LK}/config/{{tier}}/{{name}}", "CONFIG", "WRITE"),
    _r("GET", f"{_LK}/status", "CONFIG"),
    _r("GET", f"{_LK}/status/{{tier}}", "CONFIG"),
    _r("GET", f"{_LK}/status/{{tier}}/{{name}}", "LOOKUP", param="name"),
    _r("GET", f"{_LK}/nodeStatus", "CONFIG"),
    _r("GET", "/druid/listen/v1/lookups", "CONFIG"),
    _r("GET", "/druid/listen/v1/lookups/{name}", "LOOKUP", param="name"),
    _r("GET", "/druid/v1/lookups/introspect/{name}", "LOOKUP", param="name"),
    _r("GET", "/druid/v1/lookups/introspect/{name}/{part}", "LOOKUP", param="name"),
    # subscriptions: their owner's
    _r("POST,GET", "/radstack/v1/subscriptions", SIGNED_IN, checks="READ on the query's datasources; lists the user's own"),
    _r("GET,DELETE", "/radstack/v1/subscriptions/{sub_id}", SIGNED_IN, checks="its owner only (404 for others)"),
    _r("GET", "/radstack/v1/subscriptions/{sub_id}/events", SIGNED_IN, checks="its owner only (404 for others)"),
    # the console's own API
    _r("GET", "/radstack/v1/datasources", "STATE", checks=_FILTERED),
    _r("GET", "/radstack/v1/timeline/{data_source}", _DS, param="data_source"),
    _r("GET", "/radstack/v1/ingestion", "STATE", checks=_FILTERED),
    _r("GET", "/radstack/v1/druid", "STATE", checks=_FILTERED),
    _r("POST", "/radstack/v1/backfill", "CONFIG", "WRITE"),
)


def rule_for(method: str, path: str) -> tuple[Rule | None, dict[str, str]]:
    """The rule of the route ``method path`` would reach, and its path parameters."""
    method = "GET" if method.upper() == "HEAD" else method.upper()
    for rule in ROUTES:
        m = rule.regex.match(path)
        if m and method in rule.methods:
            return rule, m.groupdict()
    return None, {}


def required(method: str, path: str) -> tuple[str, str, str] | str:
    """What a request needs before its handler runs: ``(type, name, action)``, or :data:`OPEN` /
    :data:`SIGNED_IN`."""
    rule, params = rule_for(method, path)
    if rule is None:
        return ("STATE", "STATE", "READ") if method.upper() in ("GET", "HEAD", "OPTIONS") else ("CONFIG", "CONFIG", "WRITE")
    need = rule.need(params)
    return rule.kind if need is None else need
