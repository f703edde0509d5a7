"""The metadata store: every table behind one object."""

from __future__ import annotations

from contextlib import suppress

from sqlalchemy.exc import IntegrityError

from radstack.storage.metadata.corrections import CorrectionTable
from radstack.storage.metadata.key_values import KeyValueTables
from radstack.storage.metadata.rules import RuleTable
from radstack.storage.metadata.segments import SegmentTable
from radstack.storage.metadata.tables import (
    DEFAULT_RULES,
    DEFAULT_RULES_DS,
)
from radstack.storage.metadata.tasks import TaskTable


class MetadataStore(SegmentTable, RuleTable, TaskTable, KeyValueTables, CorrectionTable):
    """Druid's metadata tables behind a small API. Thread-safe; every method is its own transaction."""

    def create_tables(self) -> None:
        """Create the tables and indexes that are missing (idempotent) and Druid's default rules."""
        with self._tx(write=True) as conn:
            self.metadata.create_all(conn, checkfirst=True)
        if self.get_rules(DEFAULT_RULES_DS) is None:
            with suppress(IntegrityError):  # another process created them at the same time
                self.set_rules(DEFAULT_RULES_DS, DEFAULT_RULES)
