"""One Engine shared by every thread; every call is its own transaction (``_tx``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from radstack.config import Settings
from radstack.storage.metadata.tables import (
    configure_sqlite,
    define_tables,
    normalize_url,
)


class MetadataConnection:
    """The engine, the table objects and one transaction per call; the table modules build on it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self.metadata = sa.MetaData()
        t = define_tables(self.metadata)
        self.t_segments, self.t_rules, self.t_tasks = t["segments"], t["rules"], t["tasks"]
        self.t_config, self.t_state = t["config"], t["state"]
        self.t_subscriptions, self.t_corrections = t["subscriptions"], t["corrections"]
        # An in-memory SQLite database is one shared connection: serialize its use.
        self._lock: threading.Lock | None = threading.Lock() if isinstance(engine.pool, StaticPool) else None

    # ---- lifecycle ------------------------------------------------------------------------------

    @classmethod
    def from_url(cls, url: str, **engine_kw: Any) -> Self:
        url = normalize_url(url)
        sa_url = sa.make_url(url)
        if sa_url.get_backend_name() == "sqlite":
            db = sa_url.database or ""
            memory = db in ("", ":memory:") or db.startswith("file::memory:")
            if not memory:
                Path(db).expanduser().parent.mkdir(parents=True, exist_ok=True)
            kw: dict[str, Any] = {"connect_args": {"timeout": 30, "check_same_thread": False}}
            if memory:
                kw["poolclass"] = StaticPool
            kw.update(engine_kw)
            engine = sa.create_engine(sa_url, **kw)
            configure_sqlite(engine, wal=not memory)
        else:
            kw = {"pool_pre_ping": True, "pool_size": 5, "max_overflow": 10}
            kw.update(engine_kw)
            engine = sa.create_engine(sa_url, **kw)
        return cls(engine)

    @classmethod
    def from_settings(cls, settings: Settings, *, create: bool = True) -> Self:
        store = cls.from_url(settings.metadata_url)
        if create:
            store.create_tables()
        return store

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self, *, write: bool = False) -> Iterator[Connection]:
        """One transaction. SQLite writers start with BEGIN IMMEDIATE (see configure_sqlite)."""
        if self._lock is not None:
            self._lock.acquire()
        try:
            with self.engine.connect() as conn:
                if write:
                    conn.execution_options(radstack_write=True)
                with conn.begin():
                    yield conn
        finally:
            if self._lock is not None:
                self._lock.release()

    def _upsert(self, conn: Connection, table: sa.Table, values: dict[str, Any], keys: list[str]) -> None:
        if self.dialect in ("postgresql", "sqlite"):
            dialect_insert = postgresql_insert if self.dialect == "postgresql" else sqlite_insert
        else:  # pragma: no cover - other backends: update, then insert
            if (
                conn.execute(
                    sa.update(table).where(*(table.c[k] == values[k] for k in keys)).values(**values)
                ).rowcount
                == 0
            ):
                conn.execute(sa.insert(table).values(**values))
            return
        stmt = dialect_insert(table).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=[table.c[k] for k in keys],
            set_={k: v for k, v in values.items() if k not in keys},
        )
        conn.execute(stmt)
