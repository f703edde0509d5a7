"""Druid native JSON queries over the broker's datasource views.

:func:`run_native_query` validates a query, admits it through the query manager (id, timeout,
concurrency limit), opens one consistent snapshot and dispatches on ``queryType``.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

import duckdb
import orjson

from radstack.expressions.compiler import VALUE_LIMIT
from serving.auth import User
from serving.broker.native.groupby import run_groupby
from serving.broker.native.query_context import QueryContext
from serving.broker.native.scan import iter_scan, run_scan
from serving.broker.native.search import run_search
from serving.broker.native.segment_metadata import run_segment_metadata
from serving.broker.native.time_boundary import run_datasource_metadata, run_time_boundary
from serving.broker.native.timeseries import run_timeseries
from serving.broker.native.topn import run_topn
from serving.broker.queries.limits import check_json_depth, planning_guard, resource_limit
from serving.broker.queries.query_manager import QueryManager, RunningQuery
from serving.broker.store.state import QueryableBroker
from serving.errors import DruidError, engine_refusal, internal_error, invalid_input, user_message

log = logging.getLogger(__name__)

# queryType → (runner, needs intervals, default granularity)
QUERY_TYPES: dict[str, tuple[Callable[[QueryContext], list[dict[str, Any]]], bool, str]] = {
    "timeseries": (run_timeseries, True, "all"),
    "topN": (run_topn, True, "all"),
    "groupBy": (run_groupby, True, "all"),
    "scan": (run_scan, True, "all"),
    "search": (run_search, True, "all"),
    "timeBoundary": (run_time_boundary, False, "all"),
    "segmentMetadata": (run_segment_metadata, False, "all"),
    "dataSourceMetadata": (run_datasource_metadata, False, "all"),
}


def query_id_of(query: dict[str, Any]) -> str | None:
    """The client's ``context.queryId`` (400 when it cannot go into a response header), or None."""
    ctx = query.get("context")
    qid = ctx.get("queryId") if isinstance(ctx, dict) else None
    if not isinstance(qid, str | int) or isinstance(qid, bool):
        return None
    return QueryManager.checked_id(qid, "queryId")


def datasource_names(spec: Any) -> set[str]:
    """The tables a native ``dataSource`` reads: a name, ``table``, ``union``, ``query`` (nested) or
    ``join`` (both sides), walked without recursion."""
    names: set[str] = set()
    stack = [spec]
    while stack:
        ds = stack.pop()
        if isinstance(ds, str):
            names.add(ds)
        elif isinstance(ds, dict):
            typ = ds.get("type")
            if typ == "table" and isinstance(ds.get("name"), str):
                names.add(ds["name"])
            elif typ == "union":
                stack.extend(ds.get("dataSources") or [])
            elif typ == "query" and isinstance(ds.get("query"), dict):
                stack.append(ds["query"].get("dataSource"))
            elif typ == "join":
                stack.extend([ds.get("left"), ds.get("right")])
    return names


_LOOKUP_CALL = re.compile(r"""lookup\s*\(.*?,\s*'((?:[^'\\]|\\.)*)'""", re.IGNORECASE | re.DOTALL)


def lookup_names(query: Any) -> set[str]:
    """The registered lookups a native query reads, anywhere in it: a ``lookup`` datasource, a
    ``registeredLookup`` extraction, a ``lookup`` dimension spec by name, ``lookup(x, 'name')`` in an
    expression. Walked without recursion."""
    names: set[str] = set()
    stack = [query]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if v.get("type") in ("lookup", "registeredLookup"):
                names.update(x for x in (v.get("lookup"), v.get("name")) if isinstance(x, str))
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, str) and "lookup" in v.lower():
            names.update(m.group(1) for m in _LOOKUP_CALL.finditer(v))
    return names


def run_native_query(service: QueryableBroker, query: Any, *, query_id: str | None = None,
                     user: User | None = None, used_projections: dict[str, str] | None = None,
                     client: str | None = None, encode: Callable[[list[dict[str, Any]]], Any] | None = None,
                     stream: bool = False) -> Any:
    """Run one native query; ``used_projections`` (when given) receives datasource → the aggregate
    projection that answered. ``encode`` (the HTTP route's JSON writer) turns the rows into the answer
    while the query still holds its slot: on the worker thread, where the memory guard and the timeout see it.
    ``stream`` (with ``encode``): a ``scan`` answers a :class:`StreamedAnswer` instead, written as it is read."""
    if not isinstance(query, dict):
        raise invalid_input("A native query must be a JSON object")
    qtype = query.get("queryType")
    if not isinstance(qtype, str) or qtype not in QUERY_TYPES:
        raise invalid_input(
            f"Could not resolve type id '{qtype}' as a subtype of `org.apache.druid.query.Query`: "
            f"known type ids = {sorted(QUERY_TYPES)}"
        )
    if query.get("dataSource") is None:
        raise invalid_input("Missing required field [dataSource]")
    runner, needs_intervals, default_gran = QUERY_TYPES[qtype]
    context = query.get("context") or {}
    if not isinstance(context, dict):
        raise invalid_input("context must be a JSON object")
    limits = service.settings.server
    check_json_depth(query, max_depth=limits.max_query_depth)
    if user is not None:
        user.require("DATASOURCE", datasource_names(query.get("dataSource")), "READ")
        user.require("LOOKUP", lookup_names(query), "READ")
    manager = service.queries
    qid = query_id or query_id_of(query) or manager.new_id()
    value_limit = VALUE_LIMIT.set(limits.max_string_bytes)  # compiled into every expression's checks
    try:
        return _run(service, query, qid, context, runner, needs_intervals, default_gran, user, used_projections,
                    client, encode, stream)
    finally:
        VALUE_LIMIT.reset(value_limit)


def _run(service: QueryableBroker, query: dict[str, Any], qid: str, context: dict[str, Any], runner: Callable[[QueryContext], Any],
         needs_intervals: bool, default_gran: Any, user: User | None,
         used_projections: dict[str, str] | None, client: str | None,
         encode: Callable[[list[dict[str, Any]]], Any] | None, stream: bool) -> Any:
    manager = service.queries
    stack = contextlib.ExitStack()
    try:
        rq = stack.enter_context(manager.run(qid, manager.timeout_of(context), manager.priority_of(context),
                                             owner=user.name if user is not None else None, client=client))
        cursor, state = stack.enter_context(service.snapshot())
        rq.attach(cursor)
        with _native_errors(qid, rq), planning_guard():
            ctx = QueryContext.create(query, state, cursor, rq, needs_intervals=needs_intervals,
                                      default_granularity=default_gran)
            if ctx.projection is not None and used_projections is not None:
                used_projections[ctx.projection.datasource] = ctx.projection.name
            ctx.encoded = encode is not None
            if stream and runner is run_scan:
                answer = StreamedAnswer.start(iter_scan(ctx), stack, qid, rq)
                stack = contextlib.ExitStack()  # the answer holds the slot and the snapshot now
                return answer
            rows = runner(ctx)
        if encode is None:
            return rows
        rq.check()
        return encode(rows)
    finally:
        stack.close()


@contextlib.contextmanager
def _native_errors(qid: str, rq: Any) -> Iterator[None]:
    """A native query's failures as Druid's errors (planning, the first rows, and a streamed answer's rest)."""
    try:
        yield
    except DruidError:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError) as e:
        # A field of the wrong JSON type reached code that trusted it: the query is malformed (400).
        # Logged with its traceback, since a planner bug would look the same; Python's text stays here.
        log.warning("native query %s: %s: %s", qid, type(e).__name__, e, exc_info=True)
        raise invalid_input(f"Malformed native query: a field has the wrong type or shape (query id {qid})") from e
    except duckdb.InterruptException:
        rq.check()
        raise
    except duckdb.Error as e:
        rq.check()
        raise _duckdb_error(e, qid) from e


class StreamedAnswer:
    """A native answer written as it is read: ``first`` (``[`` and the first batch, computed before the
    response starts, so a failure there is still Druid's error JSON), then ``rest`` (each further batch,
    then ``]``). It holds the query's slot and snapshot until ``rest`` ends or is closed."""

    def __init__(self, first: bytes, rest: Iterator[bytes], running: RunningQuery) -> None:
        self.first, self.rest, self.running = first, rest, running

    @classmethod
    def start(cls, batches: Iterator[dict[str, Any]], stack: contextlib.ExitStack, qid: str, rq: Any) -> StreamedAnswer:
        chunks = _json_array(batches, stack, qid, rq)
        first = next(chunks)  # raises as the query would (the caller's stack is closed then)
        return cls(first, chunks, rq)

    def chunks(self) -> Iterator[bytes]:
        yield self.first
        yield from self.rest

    def close(self) -> None:
        close = getattr(self.rest, "close", None)
        if close is not None:
            close()


def _json_array(batches: Iterator[dict[str, Any]], stack: contextlib.ExitStack, qid: str,
                rq: Any) -> Iterator[bytes]:
    """``batches`` as the chunks of one JSON array; ``stack`` (the slot, the snapshot) closes when it ends."""
    with stack, _native_errors(qid, rq):
        opened = False
        for batch in batches:
            yield (b"," if opened else b"[") + orjson.dumps(batch, option=orjson.OPT_SERIALIZE_NUMPY)
            opened = True
        yield b"]" if opened else b"[]"


def _duckdb_error(e: duckdb.Error, query_id: str) -> DruidError:
    limit = resource_limit(str(e))
    if limit is not None:
        return limit
    if isinstance(e, duckdb.BinderException | duckdb.ConversionException | duckdb.InvalidInputException
                  | duckdb.ParserException | duckdb.CatalogException | duckdb.OutOfRangeException
                  | duckdb.SyntaxException):  # a value's syntax, e.g. a like pattern ending in its escape
        return invalid_input(f"Query could not be planned: {user_message(str(e))}")
    return engine_refusal(e, query_id) or internal_error(e, query_id=query_id)
