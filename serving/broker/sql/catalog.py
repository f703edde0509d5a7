"""What the SQL layer knows about tables: datasources with their columns, and the system tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Druid's schemas, as INFORMATION_SCHEMA.SCHEMATA lists them.
SCHEMAS: tuple[str, ...] = ("druid", "lookup", "sys", "INFORMATION_SCHEMA", "view")

#: System tables: (schema, table) → the DuckDB name they are registered under for one query.
SYSTEM_TABLES: dict[tuple[str, str], str] = {
    ("INFORMATION_SCHEMA", "SCHEMATA"): "__druid_information_schema_schemata",
    ("INFORMATION_SCHEMA", "TABLES"): "__druid_information_schema_tables",
    ("INFORMATION_SCHEMA", "COLUMNS"): "__druid_information_schema_columns",
    ("sys", "segments"): "__druid_sys_segments",
    ("sys", "servers"): "__druid_sys_servers",
    ("sys", "server_segments"): "__druid_sys_server_segments",
    ("sys", "tasks"): "__druid_sys_tasks",
    ("sys", "supervisors"): "__druid_sys_supervisors",
    ("sys", "corrections"): "__druid_sys_corrections",  # radstack's own: real time vs batch per chunk
}


#: The columns of every table in the ``lookup`` schema, as in Druid.
LOOKUP_COLUMNS: tuple[tuple[str, str], ...] = (("k", "VARCHAR"), ("v", "VARCHAR"))


#: how many translations and schemas one catalog keeps (the oldest go first)
MEMO_SIZE = 512

#: Druid ARRAY column types → the SQL type sqlglot annotates them with
_ARRAY_SQL_TYPES = {"ARRAY<STRING>": "ARRAY<VARCHAR>", "ARRAY<LONG>": "ARRAY<BIGINT>", "ARRAY<DOUBLE>": "ARRAY<DOUBLE>"}


@dataclass(frozen=True)
class ColumnInfo:
    """One datasource column: its name and Druid type (``LONG``, ``FLOAT``, ``DOUBLE``, ``STRING``)."""

    name: str
    druid_type: str
    kind: str = "dimension"  # "time" | "dimension" | "metric"
    multi_value: bool = False  # a multi-value string dimension (a list of strings in DuckDB)

    @property
    def sql_type(self) -> str:
        """The type sqlglot annotates the column with (``JSON`` for a ``COMPLEX<json>`` column)."""
        if self.name == "__time":
            return "TIMESTAMP"
        t = self.druid_type.upper()
        if t.startswith("COMPLEX<") and t != "COMPLEX<JSON>":
            return "VARBINARY"  # a sketch (rules/sketches.py)
        if t in _ARRAY_SQL_TYPES:
            return _ARRAY_SQL_TYPES[t]
        return {"LONG": "BIGINT", "FLOAT": "FLOAT", "DOUBLE": "DOUBLE", "COMPLEX<JSON>": "JSON"}.get(t, "VARCHAR")

    @property
    def information_type(self) -> str:
        """``DATA_TYPE`` in INFORMATION_SCHEMA.COLUMNS: Druid shows nested and sketch columns as
        ``COMPLEX<json>``, ``COMPLEX<HLLSketch>`` …, and ARRAY columns as ``ARRAY``"""
        t = self.druid_type.upper()
        if t in _ARRAY_SQL_TYPES:
            return "ARRAY"  # as Druid 33 lists ARRAY<STRING>, ARRAY<LONG> … columns
        return self.druid_type if t.startswith("COMPLEX<") else self.sql_type


@dataclass
class Catalog:
    """Datasources visible to SQL (``druid`` schema), each with its columns in table order."""

    datasources: dict[str, list[ColumnInfo]] = field(default_factory=dict)
    #: datasource → its aggregate projections (:class:`serving.broker.store.projection_views.ProjectionView`);
    #: their views are queryable only through the projections rule, never listed in INFORMATION_SCHEMA
    projections: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    #: lookup name → :class:`serving.lookups.LoadedLookup` (its table has columns ``k``, ``v``): the
    #: ``lookup`` schema and ``LOOKUP()``
    lookups: dict[str, Any] = field(default_factory=dict)
    #: datasource → its sketch view, the sketch columns it has an integer column beside (→ that column),
    #: and those whose every row has its value there (:mod:`serving.broker.sql.rules.sketch_singles`)
    sketch_views: dict[str, tuple[str, dict[str, str], frozenset[str]]] = field(default_factory=dict)
    #: per catalog (a broker generation): sqlglot schemas built once, and recent translations
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the memo (a planning worker builds its own: planning_pool.py)."""
        return {**self.__dict__, "_memo": {}}

    def memo(self, key: Any, build: Any) -> Any:
        """``build()`` once per ``key`` for this catalog (at most :data:`MEMO_SIZE` entries kept)."""
        try:
            return self._memo[key]
        except KeyError:
            pass
        value = build()
        if len(self._memo) >= MEMO_SIZE:
            self._memo.pop(next(iter(self._memo)), None)
        self._memo[key] = value
        return value

    def has(self, name: str) -> bool:
        return name in self.datasources

    def relations(self, datasources: Any = (), system_tables: Any = (), lookups: Any = ()) -> frozenset[str]:
        """The DuckDB relation names a statement reading ``datasources``, ``system_tables`` (keys of
        :data:`SYSTEM_TABLES`) and ``lookups`` may use: :func:`serving.broker.queries.relations.check_relations`."""
        names: set[str] = set()
        for ds in datasources:
            if ds in self.datasources:
                names.add(ds)
                names.update(view.view_name for view in self.projections.get(ds, ()))
                if ds in self.sketch_views:
                    names.add(self.sketch_views[ds][0])
        names.update(SYSTEM_TABLES[key] for key in system_tables)
        for name in lookups:
            if name in self.lookups:
                names.update(self.lookups[name].tables)
        return frozenset(names)

    def sql_schema(self) -> dict[str, dict[str, str]]:
        """``{table: {column: sql type}}`` for sqlglot's type annotation."""
        out = {ds: {c.name: c.sql_type for c in cols} for ds, cols in self.datasources.items()}
        for lk in self.lookups.values():
            out[lk.table] = dict(LOOKUP_COLUMNS)
        for views in self.projections.values():
            for v in views:
                out[v.view_name] = {c.name: ("TIMESTAMP" if c.name == "__time" else c.sql_type) for c in v.columns}
        return out
