"""Druid Kafka supervisors as radstack runs them: a supervisor spec posted to the Overlord API becomes a
record in the metadata store (config key ``supervisors``, as Druid keeps its ``druid_supervisors``), and
the streaming process (``radctl stream``, :mod:`realtime.streaming.supervised`) runs one Spark
streaming query per running supervisor.

A record holds the posted spec, the radstack datasource spec made from it, and the state the API
sets: ``RUNNING``, ``SUSPENDED`` or (after terminate) removed; ``generation`` goes up on every update,
``resetGeneration`` on every reset, so the streaming process restarts a query when either changes.

What a Druid Kafka supervisor spec maps to (:func:`datasource_spec_from_supervisor`):

- ``dataSchema`` → the datasource's ``dataSchema`` (the same parser as every spec);
- ``ioConfig.topic`` → ``processing.topics``; ``ioConfig.inputFormat`` must be ``json``;
- ``ioConfig.useEarliestOffset`` (Druid's default ``false``) → where a new query starts;
- ``ioConfig.lateMessageRejectionPeriod`` → ``processing.windowPeriod`` (events older than the
  stream's time minus this period are thrown away by the real-time path, and rebuilt by the batch one);
- an optional top-level ``processing`` object, radstack's own (Druid ignores unknown fields), may set
  ``eventId`` (the field whose repeats the stream and the rebuild drop as duplicates) and
  ``windowPeriod``; nothing else of a spec file's ``processing`` (no joins, lookups or files);
- ``ioConfig.consumerProperties["bootstrap.servers"]`` is kept for the status but **not used**: the
  streaming job reads the Kafka cluster of radstack's configuration, so a client cannot point the
  server at another host;
- ``tuningConfig`` and the task settings (``taskCount``, ``replicas``, ``taskDuration`` …) are kept
  and reported, not applied: one Spark query per datasource does the work of Druid's tasks.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from radstack.config import Settings
from radstack.datasources import load_catalog
from radstack.spec import DatasourceSpec, SpecError, load_datasource_spec
from radstack.storage.metadata import MetadataStore
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant

__all__ = ["CONFIG_KEY", "SupervisorError", "SupervisorRecord", "datasource_spec_from_supervisor",
           "load_supervisors", "save_supervisor", "delete_supervisor", "supervised_specs", "merge_catalog",
           "datasource_catalog", "datasource_spec"]

CONFIG_KEY = "supervisors"
#: what a supervisor spec's own ``processing`` object may set (radstack's extension)
EXTENSION_KEYS = frozenset({"eventId", "windowPeriod"})


class SupervisorError(ValueError):
    """A supervisor spec radstack cannot run: ``field`` and what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


@dataclass
class SupervisorRecord:
    id: str
    spec: dict[str, Any]  # the spec as posted
    datasource: dict[str, Any]  # the radstack datasource spec made from it (JSON)
    state: str = "RUNNING"
    generation: int = 1
    reset_generation: int = 0
    created: str = field(default_factory=lambda: format_instant(now_millis()))
    updated: str = field(default_factory=lambda: format_instant(now_millis()))
    owner: str | None = None  # the user who created it (auth on): server.max_supervisors_per_user counts these

    @property
    def suspended(self) -> bool:
        return self.state == "SUSPENDED"

    @property
    def topic(self) -> str:
        return str(self.datasource["processing"]["topics"][0])

    @property
    def use_earliest_offset(self) -> bool:
        return bool(_io_config(self.spec).get("useEarliestOffset", False))

    def datasource_spec(self) -> DatasourceSpec:
        return load_datasource_spec(copy.deepcopy(self.datasource))

    def shown_spec(self) -> dict[str, Any]:
        """The spec as every answer shows it: secrets (passwords, SASL JAAS configs, keys, tokens) redacted."""
        return redacted(self.spec)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "spec": self.spec, "datasource": self.datasource, "state": self.state,
                "generation": self.generation, "resetGeneration": self.reset_generation,
                "created": self.created, "updated": self.updated, "owner": self.owner}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> SupervisorRecord:
        return cls(id=str(raw["id"]), spec=dict(raw["spec"]), datasource=dict(raw["datasource"]),
                   state=str(raw.get("state", "RUNNING")), generation=int(raw.get("generation", 1)),
                   reset_generation=int(raw.get("resetGeneration", 0)), created=str(raw.get("created", "")),
                   updated=str(raw.get("updated", "")), owner=raw.get("owner"))


#: property names whose values are secrets (Kafka's ``ssl.*.password``, ``sasl.jaas.config``, schema
#: registry ``basic.auth.user.info``, a PasswordProvider's ``password``, cloud keys and tokens)
_SECRET_KEY = re.compile(r"password|secret|jaas|token|credential|user\.info|(^|[._])key$|accesskey", re.IGNORECASE)
REDACTED = "<redacted>"


def redacted(value: Any) -> Any:
    """``value`` with every secret-named entry's value replaced by :data:`REDACTED`, at any depth."""
    if isinstance(value, Mapping):
        return {k: (REDACTED if _SECRET_KEY.search(str(k)) and v not in (None, "") else redacted(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redacted(v) for v in value]
    return value


def _inner(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """Druid accepts the parts at the top level or under ``spec``."""
    inner = spec.get("spec")
    return inner if isinstance(inner, Mapping) else spec


def _io_config(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    io = _inner(spec).get("ioConfig")
    return io if isinstance(io, Mapping) else {}


def datasource_spec_from_supervisor(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The radstack datasource spec (JSON) a Druid Kafka supervisor spec runs as; raises
    :class:`SupervisorError` for what cannot run here."""
    if not isinstance(spec, Mapping):
        raise SupervisorError("", "a supervisor spec is a JSON object")
    if str(spec.get("type", "kafka")).lower() != "kafka":
        raise SupervisorError("type", f"only Kafka supervisors run here, not {spec.get('type')!r}")
    inner = _inner(spec)
    data_schema = inner.get("dataSchema")
    if not isinstance(data_schema, Mapping):
        raise SupervisorError("spec.dataSchema", "is required")
    io = _io_config(spec)
    topic = io.get("topic")
    if not isinstance(topic, str) or not topic:
        raise SupervisorError("spec.ioConfig.topic", "a Kafka topic is required (topicPattern is not supported)")
    fmt = io.get("inputFormat") or (data_schema.get("parser") or {}).get("parseSpec") or {"type": "json"}
    if str(fmt.get("type", fmt.get("format", "json"))).lower() != "json":
        raise SupervisorError("spec.ioConfig.inputFormat", f"only json input runs here, not {fmt.get('type')!r}")
    processing: dict[str, Any] = {"topics": [topic]}
    late = io.get("lateMessageRejectionPeriod")
    if late is not None:
        processing["windowPeriod"] = late
    extra = spec.get("processing", inner.get("processing"))
    if extra is not None:
        if not isinstance(extra, Mapping) or set(extra) - EXTENSION_KEYS:
            raise SupervisorError("processing", f"radstack's extension takes only {sorted(EXTENSION_KEYS)}")
        processing.update(extra)
    out = {"dataSchema": copy.deepcopy(dict(data_schema)), "processing": processing}
    try:
        load_datasource_spec(copy.deepcopy(out))
    except SpecError as e:
        raise SupervisorError(f"spec.{e.path}" if e.path else "spec", e.reason) from e
    return out


def load_supervisors(metadata: MetadataStore) -> dict[str, SupervisorRecord]:
    raw = metadata.get_config(CONFIG_KEY, {}) or {}
    return {k: SupervisorRecord.from_json(v) for k, v in raw.items()}


def save_supervisor(metadata: MetadataStore, record: SupervisorRecord) -> None:
    records = load_supervisors(metadata)
    record.updated = format_instant(now_millis())
    records[record.id] = record
    metadata.set_config(CONFIG_KEY, {k: r.to_json() for k, r in records.items()})


def delete_supervisor(metadata: MetadataStore, supervisor_id: str) -> bool:
    records = load_supervisors(metadata)
    if records.pop(supervisor_id, None) is None:
        return False
    metadata.set_config(CONFIG_KEY, {k: r.to_json() for k, r in records.items()})
    return True


def supervised_specs(metadata: MetadataStore) -> dict[str, DatasourceSpec]:
    """Datasource name → the spec each supervisor (running or suspended) streams."""
    return {rec.id: rec.datasource_spec() for rec in load_supervisors(metadata).values()}


def merge_catalog(files: Mapping[str, DatasourceSpec], supervised: Mapping[str, DatasourceSpec]) -> dict[str, DatasourceSpec]:
    """The spec files plus the supervisors' datasources: a file that streams a datasource keeps it (the
    API refuses such a supervisor); a file without topics gives way to the supervisor that streams it."""
    catalog = dict(files)
    for name, spec in supervised.items():
        if name not in catalog or not catalog[name].processing.topics:
            catalog[name] = spec
    return catalog


def datasource_catalog(settings: Settings, metadata: MetadataStore | None = None) -> dict[str, DatasourceSpec]:
    """Every datasource radstack streams, archives and rebuilds (:func:`merge_catalog` of the spec files
    and the supervisors posted to the Overlord API): the batch side — the archiver, the rebuild DAG,
    ``radctl backfill`` — covers a supervisor's datasource like a spec file's. Without a metadata
    store yet (a fresh home) it is the files alone."""
    try:
        if metadata is None:
            with MetadataStore.from_settings(settings, create=False) as md:
                supervised = supervised_specs(md)
        else:
            supervised = supervised_specs(metadata)
    except SQLAlchemyError:
        supervised = {}
    return merge_catalog(load_catalog(settings), supervised)


def datasource_spec(settings: Settings, name: str, metadata: MetadataStore | None = None) -> DatasourceSpec:
    """The spec of ``name`` from :func:`datasource_catalog`; KeyError names the known ones."""
    catalog = datasource_catalog(settings, metadata)
    if name not in catalog:
        known = ", ".join(sorted(catalog)) or "none"
        raise KeyError(f"unknown datasource {name!r} (known: {known}; specs are read from {settings.datasources_dir} "
                       "and the supervisors in the metadata store)")
    return catalog[name]
