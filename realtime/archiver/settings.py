"""Build the archiver's configuration from radstack's settings and the datasource catalog."""

from __future__ import annotations

from radstack.config import Settings
from radstack.datasources import load_catalog
from realtime.archiver.archiver import ArchiverConfig


def archiver_config(settings: Settings) -> ArchiverConfig:
    """Topics: ``archiver.topics`` or, when empty, every topic the datasource specs read; each topic's
    event-time field and format come from the spec that reads it (``timestampSpec``)."""
    catalog = load_catalog(settings)
    stamps: dict[str, tuple[str, str]] = {}
    spec_topics: list[str] = []
    for spec in catalog.values():
        ts = spec.data_schema.timestamp_spec
        for topic in spec.processing.topics:
            spec_topics.append(topic)
            stamps.setdefault(topic, (ts.column, ts.format))
    topics = list(settings.archiver.topics or []) or sorted(set(spec_topics))
    return ArchiverConfig(
        bootstrap_servers=settings.kafka.bootstrap_servers,
        topics=topics,
        group_id=settings.archiver.group_id,
        max_records=int(settings.archiver.max_records),
        max_bytes=int(settings.archiver.max_bytes),
        max_age_seconds=float(settings.archiver.max_age_seconds),
        timestamp_fields=stamps,
        compression=settings.archiver.compression,
        session_timeout_ms=int(settings.archiver.session_timeout_ms),
        retry_seconds=float(settings.archiver.retry_seconds),
    )
