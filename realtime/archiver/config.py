"""The archiver's configuration (what :func:`realtime.archiver.settings.archiver_config` builds from
radstack's settings), apart from the archiver itself so reading it imports no Kafka or deep-storage client."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ArchiverConfig:
    bootstrap_servers: str
    topics: list[str]
    group_id: str = "radstack-archiver"
    max_records: int = 250_000
    max_bytes: int = 64 * 1024 * 1024
    max_age_seconds: float = 30.0
    # topic → (timestamp field, timestampSpec format); default ("timestamp", "auto")
    timestamp_fields: dict[str, tuple[str, str]] = field(default_factory=dict)
    compression: str = "zstd"
    parsed_columns: bool = True  # the parsed archive's typed columns beside the raw ones
    session_timeout_ms: int = 10_000
    consumer_conf: dict[str, Any] = field(default_factory=dict)
    # a flush step that fails (a DataNode or broker just died) is retried this long, then the run fails
    retry_seconds: float = 120.0

    def timestamp_of(self, topic: str) -> tuple[str, str]:
        return self.timestamp_fields.get(topic, ("timestamp", "auto"))
