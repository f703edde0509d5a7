"""Build the archiver's configuration from radstack's settings and the datasource catalog (the spec
files and the supervisors posted to the Overlord API)."""

from __future__ import annotations

from collections.abc import Callable

from radstack.config import Settings
from radstack.storage.supervisors import datasource_catalog
from realtime.archiver.config import ArchiverConfig

Topics = tuple[list[str], dict[str, tuple[str, str]]]


def catalog_topics(settings: Settings) -> Topics:
    """Every topic a datasource reads (sorted), and each topic's event-time field and format from the
    spec that reads it (``timestampSpec``)."""
    stamps: dict[str, tuple[str, str]] = {}
    for spec in datasource_catalog(settings).values():
        ts = spec.data_schema.timestamp_spec
        for topic in spec.processing.topics:
            stamps.setdefault(topic, (ts.column, ts.format))
    return sorted(stamps), stamps


def topics_source(settings: Settings) -> Callable[[], Topics] | None:
    """What a running archiver re-reads to cover new datasources (a supervisor posted after it
    started); None when ``archiver.topics`` fixes the list."""
    return None if settings.archiver.topics else (lambda: catalog_topics(settings))


def archiver_config(settings: Settings) -> ArchiverConfig:
    """Topics: ``archiver.topics`` or, when empty, every topic the datasources read."""
    spec_topics, stamps = catalog_topics(settings)
    topics = list(settings.archiver.topics or []) or spec_topics
    return ArchiverConfig(
        bootstrap_servers=settings.kafka.bootstrap_servers,
        topics=topics,
        group_id=settings.archiver.group_id,
        max_records=int(settings.archiver.max_records),
        max_bytes=int(settings.archiver.max_bytes),
        max_age_seconds=float(settings.archiver.max_age_seconds),
        timestamp_fields=stamps,
        compression=settings.archiver.compression,
        parsed_columns=bool(settings.archiver.parsed_columns),
        session_timeout_ms=int(settings.archiver.session_timeout_ms),
        retry_seconds=float(settings.archiver.retry_seconds),
    )
