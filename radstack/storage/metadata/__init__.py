"""The metadata store: Druid's ``druid_segments``, ``druid_rules``, ``druid_tasks`` and ``druid_config``
tables plus ``radstack_state`` (watermarks), through SQLAlchemy Core.

SQLite by default (WAL mode, a busy timeout, write transactions taken with ``BEGIN IMMEDIATE`` so two
writers never deadlock on a lock upgrade), PostgreSQL (psycopg 3) when the URL says so. The schema
follows Druid's ``SQLMetadataConnector``: ISO strings for ``created_date``/``start``/``end``, the
DataSegment JSON as bytes in ``payload``, the same index names. Column names are emitted unquoted
like Druid's DDL (PostgreSQL folds ``dataSource`` to ``datasource``), except ``end``, which is reserved.

Publishing a set of segments is one transaction: readers see all of it or none of it. One
:class:`MetadataStore` (one Engine) is shared by every thread; each call takes its own connection.

The tables are laid out in :mod:`.tables`; each one's operations live in a module of its own
(:mod:`.segments`, :mod:`.rules`, :mod:`.tasks`, :mod:`.key_values`, :mod:`.corrections`) and :class:`MetadataStore` joins them.
"""

from radstack.storage.metadata.store import MetadataStore
from radstack.storage.metadata.tables import (
    DEFAULT_RULES,
    DEFAULT_RULES_DS,
    TASK_STATES,
    CorrectionRow,
    DatasourceNameConflict,
    MetadataError,
    SegmentExistsError,
    SegmentRow,
    TaskExistsError,
    TaskRow,
    normalize_url,
)

__all__ = [
    "DEFAULT_RULES",
    "DEFAULT_RULES_DS",
    "TASK_STATES",
    "CorrectionRow",
    "MetadataError",
    "MetadataStore",
    "DatasourceNameConflict",
    "SegmentExistsError",
    "SegmentRow",
    "TaskExistsError",
    "TaskRow",
    "normalize_url",
]
