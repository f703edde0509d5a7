"""Configuration: one typed settings model, read from ``radstack.yaml`` plus ``RADSTACK_*`` variables.

Every key is declared once, below, as a field of a section model with its type, default and
description; nothing else in radstack reads configuration by name. The composition root (the
``radctl`` command, the server, a job's ``main``) calls :func:`load_settings` once and passes the
:class:`Settings` object (or one of its sections) down.

Lookup order (later wins): the defaults declared here → the YAML file (``--config``,
``$RADSTACK_CONFIG``, ``./radstack.yaml``, ``$RADSTACK_HOME/radstack.yaml``) → environment variables.
An environment variable names a key path with ``__`` between levels: ``RADSTACK_METADATA__URL=…`` sets
``metadata.url``; ``RADSTACK_SERVER__PORT=9999`` sets ``server.port``; ``RADSTACK_HOME`` sets ``home``.
Lists and mappings in variables are YAML (``RADSTACK_KAFKA__TOPICS="{events: 4}"``). Unknown keys in
the file are errors (a typo never passes silently); unknown ``RADSTACK_*`` variables are ignored (other
tools share the prefix).

All embedded state lives under ``home`` (default ``~/.radstack``): the SQLite metadata file, the local
deep storage, Kafka's log dirs, logs and pid files. ``radctl config --keys`` and
``docs/configuration.md`` list every key; a test keeps the document in step with this package.

The parts: :mod:`.section` (the base of every section, :class:`ConfigError`), :mod:`.sections` and
:mod:`.server_sections` (the sections), :mod:`.settings` (:class:`Settings`), :mod:`.loading` (reading
and describing). A new key is a field of its section; a new section, a class there and a field of
:class:`Settings`.
"""

from radstack.config.loading import (
    DEFAULTS,
    config_keys,
    env_name,
    env_overrides,
    find_config_file,
    flatten,
    load_settings,
)
from radstack.config.section import ENV_PREFIX, REPO_ROOT, ConfigError, Section
from radstack.config.sections import (
    AirflowSettings,
    ArchiverSettings,
    BatchSettings,
    DatasourcesSettings,
    DeepStorageSettings,
    DruidSettings,
    HttpInputSettings,
    IngestionSettings,
    JvmSettings,
    KafkaSettings,
    LocalInputSettings,
    MetadataSettings,
    ReceiverSettings,
    SparkSettings,
    SpoolSettings,
    StreamingSettings,
)
from radstack.config.server_sections import (
    AuthSettings,
    CompactionSettings,
    CoordinatorSettings,
    KillSettings,
    KillTaskLogsSettings,
    RetentionSettings,
    SelfMetricsSettings,
    ServerSettings,
    TasksSettings,
)
from radstack.config.settings import Settings

__all__ = [
    "DEFAULTS", "ENV_PREFIX", "REPO_ROOT", "ConfigError", "Section", "config_keys", "env_name", "env_overrides",
    "find_config_file", "flatten", "load_settings",
    "AirflowSettings",
    "ArchiverSettings",
    "AuthSettings",
    "BatchSettings",
    "CompactionSettings",
    "CoordinatorSettings",
    "DatasourcesSettings",
    "DeepStorageSettings",
    "DruidSettings",
    "HttpInputSettings",
    "IngestionSettings",
    "JvmSettings",
    "KafkaSettings",
    "KillSettings",
    "KillTaskLogsSettings",
    "LocalInputSettings",
    "MetadataSettings",
    "ReceiverSettings",
    "RetentionSettings",
    "SelfMetricsSettings",
    "ServerSettings",
    "Settings",
    "SparkSettings",
    "SpoolSettings",
    "StreamingSettings",
    "TasksSettings",
]
