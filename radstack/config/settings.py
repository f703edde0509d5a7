"""The whole configuration of one process: :class:`Settings`, its sections and the paths derived from them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, ValidationError, model_validator

from radstack.config.section import REPO_ROOT, ConfigError, Section
from radstack.config.sections import (
    AirflowSettings,
    ArchiverSettings,
    BatchSettings,
    DatasourcesSettings,
    DeepStorageSettings,
    DruidSettings,
    IngestionSettings,
    JvmSettings,
    KafkaSettings,
    MetadataSettings,
    ReceiverSettings,
    SparkSettings,
    StreamingSettings,
)
from radstack.config.server_sections import (
    CoordinatorSettings,
    ServerSettings,
    TasksSettings,
)


def _expand(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.expanduser(str(path))).resolve()


class Settings(Section):
    """The resolved configuration of one radstack process."""

    home: Path = Field(Path("~/.radstack"), description="where all embedded state lives")
    metadata: MetadataSettings = Field(default_factory=MetadataSettings)
    deep_storage: DeepStorageSettings = Field(default_factory=DeepStorageSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    coordinator: CoordinatorSettings = Field(default_factory=CoordinatorSettings)
    tasks: TasksSettings = Field(default_factory=TasksSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    receiver: ReceiverSettings = Field(default_factory=ReceiverSettings)
    archiver: ArchiverSettings = Field(default_factory=ArchiverSettings)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    batch: BatchSettings = Field(default_factory=BatchSettings)
    airflow: AirflowSettings = Field(default_factory=AirflowSettings)
    streaming: StreamingSettings = Field(default_factory=StreamingSettings)
    jvm: JvmSettings = Field(default_factory=JvmSettings)
    datasources: DatasourcesSettings = Field(default_factory=DatasourcesSettings)
    ingestion: IngestionSettings = Field(default_factory=IngestionSettings)
    druid: DruidSettings = Field(default_factory=DruidSettings)

    _source: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _resolve_paths(self) -> Settings:
        home = _expand(self.home)
        object.__setattr__(self, "home", home)
        if self.deep_storage.type == "local" and not self.deep_storage.path:
            ds = self.deep_storage.model_copy(update={"path": str(home / "deep-storage")})
            object.__setattr__(self, "deep_storage", ds)
        return self

    @property
    def source(self) -> Path | None:
        """The YAML file these settings were read from, if any."""
        return self._source

    @property
    def metadata_url(self) -> str:
        return self.metadata.url or f"sqlite:///{self.home / 'metadata.db'}"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def jvm_dir(self) -> Path:
        return _expand(self.jvm.dir) if self.jvm.dir else REPO_ROOT / ".jvm"

    @property
    def data_dir(self) -> Path:
        """Where input files for tasks go by default (``ingestion.local.allowed_dirs`` empty)."""
        return self.home / "data"

    @property
    def local_input_base(self) -> Path:
        """Where a relative ``local`` input path starts (``ingestion.local.base_dir``, else the checkout)."""
        base = self.ingestion.local.base_dir
        return _expand(base) if base else REPO_ROOT

    @property
    def local_input_dirs(self) -> list[Path]:
        """The directories ``local`` input sources may read, resolved: ``ingestion.local.allowed_dirs`` (or
        its defaults). radstack's own state is never among them (:attr:`own_state_paths`)."""
        dirs = self.ingestion.local.allowed_dirs
        return [_expand(d) for d in dirs] if dirs else [self.data_dir.resolve(), (REPO_ROOT / "examples").resolve()]

    @property
    def own_state_paths(self) -> list[Path]:
        """Local places holding radstack's own state — the home (all but :attr:`data_dir`), a local deep
        storage (segments and the raw archive), a SQLite metadata store, the spool and the datasource specs —
        which no ``local`` input may read, whatever ``ingestion.local.allowed_dirs`` says (re-index a
        datasource with the ``druid`` input source, which checks READ on it)."""
        out = [self.home, self.spool_dir, self.datasources_dir]
        if self.deep_storage.type == "local" and self.deep_storage.path:
            out.append(_expand(self.deep_storage.path))
        if self.metadata_url.startswith("sqlite:///"):
            out.append(_expand(self.metadata_url.removeprefix("sqlite:///")))
        return [p.resolve() for p in out]

    @property
    def spool_dir(self) -> Path:
        """The receiver's write-ahead spool (``receiver.spool.dir``, else ``{home}/spool/receiver``)."""
        return _expand(self.receiver.spool.dir) if self.receiver.spool.dir else self.home / "spool" / "receiver"

    @property
    def datasources_dir(self) -> Path:
        return _expand(self.datasources.dir) if self.datasources.dir else self.home / "datasources"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able values, the shape of ``radstack.yaml`` (what a child process is handed)."""
        return self.model_dump(mode="json")

    def with_overrides(self, overrides: Mapping[str, Any]) -> Settings:
        """A copy with ``overrides`` (a nested mapping like the YAML file) merged in and validated."""
        out = _validate(_merge(self.to_dict(), overrides), where="overrides")
        out._source = self._source
        return out


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        else:
            base[k] = v
    return base


def _validate(raw: Mapping[str, Any], where: str) -> Settings:
    try:
        return Settings.model_validate(raw)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            key = ".".join(str(p) for p in err["loc"])
            what = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            problems.append(f"{key}: {what}")
        raise ConfigError(f"{where}: " + "; ".join(problems)) from None
