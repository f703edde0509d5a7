"""Running one Druid SQL query on the broker's DuckDB: translate, register what the statement needs
(UDFs, system tables), execute inside the broker's consistent snapshot, and hand back typed batches."""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa

from radstack.config import ServerSettings
from radstack.druid_types import JSON_ARRAY, JSON_COLUMN, native_type, sql_type_of_arrow
from radstack.sketches import family_of
from radstack.sql_text import quote_identifier
from radstack.storage.metadata import MetadataStore
from serving.broker.queries.limits import check_sql_text, resource_limit
from serving.broker.queries.query_manager import RunningQuery
from serving.broker.sql import explain, information_schema, sys_tables
from serving.broker.sql.catalog import SYSTEM_TABLES, Catalog, ColumnInfo
from serving.broker.sql.errors import column_not_found, validation_error
from serving.broker.sql.result_formats import Column
from serving.broker.sql.translate import Translation, translate
from serving.broker.store import udfs
from serving.broker.store.state import QueryableBroker
from serving.errors import DruidError, cancelled, engine_refusal, internal_error, user_message

BATCH_ROWS = 4096


@dataclass
class ServerInfo:
    """What sys.servers reports about this process."""

    host: str = "localhost"
    port: int = 8888
    started_ms: int | None = None


@dataclass
class SqlResult:
    """An executing query: its columns and the remaining batches (first one already fetched)."""

    columns: list[Column]
    first: pa.RecordBatch | None
    reader: Any
    translation: Translation
    _stack: contextlib.ExitStack = field(repr=False, default_factory=contextlib.ExitStack)
    _ahead: list[pa.RecordBatch] = field(repr=False, default_factory=list)
    _done: bool = field(repr=False, default=False)
    running: RunningQuery | None = field(repr=False, default=None)  # its RunningQuery: why a read was interrupted
    _looked: bool = field(repr=False, default=False)

    def _read(self) -> pa.RecordBatch:
        """The next batch; an interrupt (a timeout, a cancel, the memory guard) as the query's own error."""
        try:
            return next_batch(self.reader)
        except duckdb.InterruptException as e:
            if self.running is not None:
                self.running.check()
            raise duckdb_error(e) from e

    def look_ahead(self) -> None:
        """Read one batch ahead, once (no answer has begun yet). DuckDB's pool running out here raises its
        ``OutOfMemoryException``, so :func:`execute` can try the query again."""
        if self._looked or self.reader is None or self._done:
            return
        self._looked = True
        try:
            self._ahead.append(self._read())
        except StopIteration:
            self._done = True

    def whole(self) -> bool:
        """True when nothing is left after the batches held (the answer can be written at once instead of
        streamed); reads one batch ahead to know."""
        try:
            self.look_ahead()
        except duckdb.OutOfMemoryException as e:
            raise duckdb_error(e, getattr(self.running, "query_id", None)) from e
        return self.reader is None or self._done

    def batches(self) -> Iterator[pa.RecordBatch]:
        if self.first is not None:
            yield self.first
        yield from self._ahead
        if self.reader is None or self._done:
            return
        while True:
            try:
                batch = self._read()
            except StopIteration:
                return
            except duckdb.OutOfMemoryException as e:  # past the first batches: the answer is cut off with it
                raise duckdb_error(e, getattr(self.running, "query_id", None)) from e
            yield batch

    def close(self) -> None:
        self._stack.close()


def next_batch(reader: pa.RecordBatchReader) -> pa.RecordBatch:
    """The reader's next batch. DuckDB's Arrow stream reports its errors as Arrow's ``OSError``: an
    interrupt and the shared pool running out are raised as DuckDB's own exceptions again, so each keeps
    its answer (the query's error, Druid's 429 — never a 500)."""
    try:
        return reader.read_next_batch()
    except (OSError, pa.ArrowException) as e:
        message = str(e)
        if message.startswith("Out of Memory Error"):
            raise duckdb.OutOfMemoryException(message) from e
        if "INTERRUPT" in message:
            raise duckdb.InterruptException(message) from e
        raise


#: broker → (its last state, the catalog made from it): one catalog per broker generation, so what a
#: catalog memoizes (sqlglot schemas, translations) lives as long as the generation (and no longer than
#: the broker)
_CATALOGS: weakref.WeakKeyDictionary[QueryableBroker, tuple[Any, Catalog]] = weakref.WeakKeyDictionary()
_CATALOGS_LOCK = threading.Lock()


def catalog_of(broker: QueryableBroker, state: Any) -> Catalog:
    """The SQL catalog of a broker state snapshot (memoized per state)."""
    with _CATALOGS_LOCK:
        hit = _CATALOGS.get(broker)
    if hit is not None and hit[0] is state:
        return hit[1]
    catalog = Catalog({ds: [ColumnInfo(c.name, c.druid_type, c.kind, c.multi_value) for c in st.columns]
                       for ds, st in state.datasources.items()},
                      {ds: st.projections for ds, st in state.datasources.items() if st.projections},
                      dict(state.lookups),
                      {ds: (st.sketch_view_name, st.singles, st.whole_singles)
                       for ds, st in state.datasources.items() if st.singles})
    with _CATALOGS_LOCK:
        _CATALOGS[broker] = (state, catalog)
    return catalog


def _system_table(key: tuple[str, str], catalog: Catalog, broker: QueryableBroker, metadata: MetadataStore,
                  server: ServerInfo) -> pa.Table:
    schema, table = key
    if schema == "INFORMATION_SCHEMA":
        if table == "SCHEMATA":
            return information_schema.schemata_table()
        if table == "TABLES":
            return information_schema.tables_table(catalog)
        return information_schema.columns_table(catalog)
    if table == "segments":
        return sys_tables.segments_table(broker)
    if table == "servers":
        return sys_tables.servers_table(broker, server.host, server.port, server.started_ms)
    if table == "server_segments":
        return sys_tables.server_segments_table(broker, server.host, server.port)
    if table == "tasks":
        return sys_tables.tasks_table(metadata)
    if table == "corrections":
        return sys_tables.corrections_table(metadata)
    return sys_tables.supervisors_table(metadata)


_COLUMN_RE = re.compile(r'Referenced column "([^"]+)" not found|Column "([^"]+)" referenced that exists in the SELECT'
                        # an unknown column selected under its own name and grouped by: DuckDB sees an alias
                        r'|Alias with name "([^"]+)" exists, but aliases cannot be used')
_TABLE_RE = re.compile(r'Table with name ([^ ]+) does not exist')
_FUNC_RE = re.compile(r'(?:Scalar|Aggregate|Table) Function with name ([^ ]+) does not exist')


def duckdb_error(e: duckdb.Error, query_id: str | None = None) -> DruidError:
    """A DuckDB failure as Druid's error JSON: binder, conversion and range errors are the user's (400,
    :func:`user_message`); anything else is the server's (a generic 500 whose id finds it in the log)."""
    msg = str(e)
    if isinstance(e, duckdb.InterruptException):
        return cancelled("Query was interrupted")
    if isinstance(e, duckdb.BinderException | duckdb.CatalogException | duckdb.ParserException):
        m = _COLUMN_RE.search(msg)
        if m:
            return column_not_found(next(g for g in m.groups() if g))
        m = _FUNC_RE.search(msg)
        if m:
            return validation_error(f"No match found for function signature {m.group(1).upper()}")
        return validation_error(user_message(msg))
    if isinstance(e, duckdb.ConversionException | duckdb.InvalidInputException | duckdb.OutOfRangeException
                  | duckdb.SyntaxException):  # SyntaxException: a value's syntax (a LIKE pattern ending in its escape)
        return resource_limit(msg) or validation_error(user_message(msg))
    return engine_refusal(e, query_id) or internal_error(e, query_id=query_id)


def visible_rows(table: pa.Table, can_read: Callable[[str], bool],
                 segment_datasources: dict[str, str] | None = None) -> pa.Table:
    """The rows of a system table the user may see: those about datasources it may read (as Druid's
    authorizer filters INFORMATION_SCHEMA and sys.*), and every row about the system schemas.
    ``sys.server_segments`` names only segment ids: ``segment_datasources`` maps them to datasources;
    ``sys.supervisors`` are named after their datasource."""
    names = table.column_names
    if "datasource" in names:
        keep = [ds is None or can_read(ds) for ds in table.column("datasource").to_pylist()]
    elif "TABLE_NAME" in names and "TABLE_SCHEMA" in names:
        keep = [schema != "druid" or can_read(name) for schema, name in
                zip(table.column("TABLE_SCHEMA").to_pylist(), table.column("TABLE_NAME").to_pylist(), strict=True)]
    elif "segment_id" in names:
        owners = segment_datasources or {}
        keep = [sid in owners and can_read(owners[sid]) for sid in table.column("segment_id").to_pylist()]
    elif "supervisor_id" in names:
        keep = [can_read(sid) for sid in table.column("supervisor_id").to_pylist()]
    else:
        return table
    return table.filter(pa.array(keep, type=pa.bool_()))


def _columns(schema: pa.Schema, json_columns: dict[int, str], first: pa.RecordBatch | None = None) -> list[Column]:
    """The result columns; ``json_columns``: the positions DuckDB types as JSON (``COMPLEX<json>``);
    binary columns are sketches, ``COMPLEX<family>`` after the first value of ``first``."""
    out = []
    for i, f in enumerate(schema):
        if i in json_columns:
            out.append(Column(f.name, *(JSON_COLUMN if json_columns[i] == "JSON" else JSON_ARRAY)))
            continue
        if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type):
            values = [v for v in (first.column(i).to_pylist() if first is not None else []) if v is not None]
            out.append(Column(f.name, "OTHER", f"COMPLEX<{family_of(values[0]) if values else 'sketch'}>"))
            continue
        st = sql_type_of_arrow(f.type)
        out.append(Column(f.name, st, native_type(st, f.type)))
    return out


#: DuckDB result types Druid has no column type for, answered as the number Calcite holds them as:
#: a day-time INTERVAL in milliseconds, a year-month one in months, a TIME in milliseconds of the day
_MONTHS = "datepart('year', {c}) * 12 + datepart('month', {c})"
_AS_NUMBER = {
    "INTERVAL": f"CASE WHEN {{c}} = to_months({_MONTHS}) THEN {_MONTHS} ELSE CAST(epoch({{c}}) * 1000 AS BIGINT) END",
    "TIME": "CAST(epoch({c}) * 1000 AS BIGINT)",
    "TIME WITH TIME ZONE": "CAST(epoch({c}) * 1000 AS BIGINT)",
}


def as_druid_numbers(rel: Any) -> Any:
    """``rel`` with its INTERVAL and TIME columns as BIGINT numbers (see ``_AS_NUMBER``); unchanged
    when it has none (the common case costs one look at the types)."""
    types = [str(t).upper() for t in rel.types]
    if not any(t in _AS_NUMBER for t in types):
        return rel
    items = [f"{_AS_NUMBER[t].format(c=f'#{i}') if t in _AS_NUMBER else f'#{i}'} AS {quote_identifier(name)}"
             for i, (t, name) in enumerate(zip(types, rel.columns, strict=True), start=1)]
    return rel.project(", ".join(items))


def _close_reader(reader: Any, cur: Any) -> None:
    with contextlib.suppress(Exception):
        reader.close()
    with contextlib.suppress(Exception):
        cur.abort()


def execute(
    broker: QueryableBroker,
    sql: str,
    *,
    context: dict[str, Any] | None = None,
    parameters: list[dict[str, Any]] | None = None,
    metadata: MetadataStore = None,
    running: RunningQuery | None = None,
    server: ServerInfo | None = None,
    batch_rows: int = BATCH_ROWS,
    authorize: Callable[[Translation], None] | None = None,
    can_read: Callable[[str], bool] | None = None,
) -> SqlResult:
    """Start one query; raises :class:`DruidError` before any row when it cannot run.

    ``running`` is the :class:`serving.broker.queries.query_manager.RunningQuery` (timeouts, cancellation);
    ``authorize`` sees the translation (datasources, system tables) and raises to refuse it;
    ``can_read`` hides the rows of system tables about datasources the user may not read;
    the caller must :meth:`SqlResult.close` the result (it holds the snapshot cursor)."""
    server = server or ServerInfo()
    limits = broker.settings.server
    check_sql_text(sql, max_chars=limits.max_sql_chars, max_depth=limits.max_query_depth)  # before any snapshot
    run = functools.partial(_execute, broker, sql, context=context, parameters=parameters, metadata=metadata,
                            running=running, server=server, batch_rows=batch_rows, authorize=authorize,
                            can_read=can_read, limits=limits)

    def attempt() -> SqlResult:
        with contextlib.suppress(_ViewsChanged):
            return run(optimistic=True)
        return run(optimistic=False)

    qid = getattr(running, "query_id", None)
    while True:
        try:
            result = attempt()
        except _OutOfMemory as e:  # others may hold the pool: once they have left, another try (a budget)
            if running is None or not running.wait_for_memory():
                raise duckdb_error(e.error, qid) from e.error
            continue
        try:
            result.look_ahead()  # the pool may run out on the second batch too, still before any answer
        except duckdb.OutOfMemoryException as e:
            result.close()
            if running is None or not running.wait_for_memory():
                raise duckdb_error(e, qid) from e
            continue
        except BaseException:
            result.close()
            raise
        return result


class _OutOfMemory(Exception):
    """DuckDB's shared pool ran out before the first row (see :meth:`RunningQuery.wait_for_memory`)."""

    def __init__(self, error: duckdb.Error) -> None:
        super().__init__(str(error))
        self.error = error


class _ViewsChanged(Exception):
    """New views were committed while a statement ran outside a transaction: run it again in one."""


def _execute(broker: QueryableBroker, sql: str, *, context: dict[str, Any] | None, parameters: list[dict[str, Any]] | None,
             metadata: MetadataStore, running: RunningQuery | None, server: ServerInfo, batch_rows: int,
             authorize: Callable[[Translation], None] | None, can_read: Callable[[str], bool] | None,
             limits: ServerSettings, optimistic: bool) -> SqlResult:
    stack = contextlib.ExitStack()
    unchanged: Callable[[], bool] = lambda: True  # noqa: E731 - a transaction's snapshot always matches
    try:
        if optimistic:
            cur, state, unchanged = stack.enter_context(broker.optimistic_snapshot())
        else:
            cur, state = stack.enter_context(broker.snapshot())
            with contextlib.suppress(AttributeError, duckdb.Error):
                cur.complete()  # finish any result the snapshot's own SELECT left open
        catalog = catalog_of(broker, state)
        explained = explain.explained_statement(sql)
        tr = translate(sql if explained is None else explained, catalog, context=context, parameters=parameters,
                       max_string_bytes=limits.max_string_bytes, planning_processes=limits.planning_processes)
        if authorize is not None:
            authorize(tr)  # the tables it really reads, before anything runs
        if tr.udfs:
            setup = broker.connection()
            try:
                udfs.register(setup, tr.udfs, db_key=broker.udf_key)
            finally:
                setup.close()
        for key in tr.system_tables:
            table = _system_table(key, catalog, broker, metadata, server)
            if can_read is not None:
                owners = ({seg.identifier: seg.data_source for seg in state.segments}
                          if key == ("sys", "server_segments") else None)
                table = visible_rows(table, can_read, owners)
            cur.register(SYSTEM_TABLES[key], table)
        if running is not None:
            running.attach(cur)
        try:
            rel = as_druid_numbers(cur.sql(tr.sql))
            json_columns = {i: str(t).upper() for i, t in enumerate(rel.types) if str(t).upper() in ("JSON", "JSON[]")}
            if explained is not None:  # plan the statement (no rows) for its signature; answer the plan
                planned = _columns(rel.limit(0).to_arrow_table().schema, json_columns)
                if not unchanged():
                    raise _ViewsChanged
                table = explain.explain_table(tr, planned, context)
                return SqlResult(explain.COLUMNS, None, pa.RecordBatchReader.from_batches(table.schema, table.to_batches()),
                                 tr, stack)
            reader = rel.to_arrow_reader(batch_rows)
            stack.callback(_close_reader, reader, cur)
            schema = reader.schema
            try:
                first = next_batch(reader)
            except StopIteration:
                first = None
            if running is not None:
                # A cancel that raced the first batch still answers with Druid's error JSON: the
                # response has not started yet (after this point a cancel truncates the stream).
                running.check()
        except duckdb.InterruptException as e:
            if running is not None:
                running.check()
            raise duckdb_error(e) from e
        except duckdb.Error as e:
            if not unchanged():  # it may have read a view as it was being replaced
                raise _ViewsChanged from e
            if isinstance(e, duckdb.OutOfMemoryException):
                raise _OutOfMemory(e) from e
            raise duckdb_error(e, getattr(running, "query_id", None)) from e
        if not unchanged():  # the statement started after new views were committed: not the planned ones
            raise _ViewsChanged
        return SqlResult(_columns(schema, json_columns, first), first, reader, tr, stack, running=running)
    except BaseException:
        stack.close()
        raise
