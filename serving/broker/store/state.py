"""The broker's state: what its views were made from (one generation of the timeline), per datasource
its visible chunks, columns, timeline and projections; and what a query, SQL or native, needs of the
broker that holds it (:class:`QueryableBroker`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import duckdb

from radstack.config import Settings
from radstack.sql_text import quote_identifier as quote_ident
from radstack.storage.segments import DataSegment
from radstack.storage.timeline import VersionedIntervalTimeline
from serving.broker.queries.query_manager import QueryManager
from serving.broker.store.projection_views import ProjectionView
from serving.broker.store.segment_cache import SINGLE_PREFIX
from serving.broker.store.views import Chunk, ColumnInfo, single_columns, singles_view_sql
from serving.lookups import LoadedLookup


@dataclass(frozen=True)
class DatasourceState:
    name: str
    chunks: tuple[Chunk, ...]
    columns: tuple[ColumnInfo, ...]
    timeline: VersionedIntervalTimeline = field(compare=False)
    projections: tuple[ProjectionView, ...] = ()
    #: datasource table → the segment numbers it held when this state was built (views.select_sqls)
    members: dict[str, tuple[int, ...]] = field(default_factory=dict, compare=False)

    @property
    def view(self) -> str:
        return quote_ident(self.name)

    @property
    def sketch_view_name(self) -> str:
        """The view of the datasource's rows with the integer columns beside its sketch columns
        (:func:`serving.broker.store.views.singles_view_sql`; only SQL sketch merges read it)."""
        return f"__sketches__{self.name}"

    def sketch_view_sql(self) -> str | None:
        return singles_view_sql(self.chunks, self.columns, self.members)

    @property
    def singles(self) -> dict[str, str]:
        """Sketch column → the sketch view's integer column beside it (for the columns some of whose
        rows have one)."""
        return {c.name[len(SINGLE_PREFIX):]: c.name for c in single_columns(self.chunks, self.columns)}

    @property
    def whole_singles(self) -> frozenset[str]:
        """The sketch columns every visible row of which has its one value beside it."""
        sets = [set(c.loaded.whole_singles) for c in self.chunks]
        return frozenset(set.intersection(*sets) if sets else set())

    def column(self, name: str) -> ColumnInfo | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    @property
    def dimensions(self) -> list[str]:
        return [c.name for c in self.columns if c.kind == "dimension"]

    @property
    def metrics(self) -> list[str]:
        return [c.name for c in self.columns if c.kind == "metric"]


@dataclass(frozen=True)
class BrokerState:
    generation: int
    datasources: dict[str, DatasourceState]
    segments: tuple[DataSegment, ...]  # every used segment from the metadata store
    overshadowed: frozenset[str]
    lookups: dict[str, LoadedLookup] = field(default_factory=dict)  # name → its table (serving/lookups.py)


class QueryableBroker(Protocol):
    """What a query needs of the broker (:class:`serving.broker.service.BrokerService`): its settings and
    query manager, a snapshot of its views with the state they were made from (an optimistic one, outside
    a transaction, with a check that nothing was committed meanwhile), a connection to register UDFs on,
    and the segments ``sys.segments`` lists."""

    settings: Settings
    queries: QueryManager
    udf_key: object

    def snapshot(self) -> AbstractContextManager[tuple[duckdb.DuckDBPyConnection, BrokerState]]: ...

    def optimistic_snapshot(self) -> AbstractContextManager[
            tuple[duckdb.DuckDBPyConnection, BrokerState, Callable[[], bool]]]: ...

    def connection(self) -> duckdb.DuckDBPyConnection: ...

    def segment_states(self) -> list[dict[str, Any]]: ...
