"""The metadata store: every table behind one object."""

from __future__ import annotations

from contextlib import suppress

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from radstack.storage.metadata.corrections import CorrectionTable
from radstack.storage.metadata.key_values import KeyValueTables
from radstack.storage.metadata.rules import RuleTable
from radstack.storage.metadata.segment_table import SegmentTable
from radstack.storage.metadata.tables import (
    DEFAULT_RULES,
    DEFAULT_RULES_DS,
)
from radstack.storage.metadata.tasks import TaskTable

#: the PostgreSQL advisory lock that serializes creating the tables ("rads" in ASCII)
SCHEMA_LOCK = 0x72616473


class MetadataStore(SegmentTable, RuleTable, TaskTable, KeyValueTables, CorrectionTable):
    """Druid's metadata tables behind a small API. Thread-safe; every method is its own transaction."""

    def create_tables(self) -> None:
        """Create the tables and indexes that are missing (idempotent) and Druid's default rules."""
        with self._tx(write=True) as conn:
            if self.dialect == "postgresql":
                # processes starting at once on a new database (a cluster's server, archiver and drivers)
                # would each see a table missing and race to create it; one at a time, the others find it
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
            self.metadata.create_all(conn, checkfirst=True)
        if self.get_rules(DEFAULT_RULES_DS) is None:
            with suppress(IntegrityError):  # another process created them at the same time
                self.set_rules(DEFAULT_RULES_DS, DEFAULT_RULES)
