"""Configuration: one ``radstack.yaml`` plus ``RADSTACK_*`` environment overrides.

Lookup order (later wins): built-in defaults → the YAML file (``--config``, ``$RADSTACK_CONFIG``,
``./radstack.yaml``, ``$RADSTACK_HOME/radstack.yaml``) → environment variables. An environment variable
names a key path with ``__`` between levels: ``RADSTACK_METADATA__URL=postgresql://…`` sets
``metadata.url``; ``RADSTACK_SERVER__PORT=9999`` sets ``server.port``. ``RADSTACK_HOME`` sets ``home``.

All embedded state lives under ``home`` (default ``~/.radstack``): the SQLite metadata file, the local
deep storage, Kafka's log dirs, logs and pid files. Production settings point the same keys at
PostgreSQL, HDFS or S3. ``docs/configuration.md`` lists every key; a test keeps it in step with
:data:`DEFAULTS`.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DEFAULTS: dict[str, Any] = {
    "home": "~/.radstack",
    "metadata": {
        # SQLAlchemy URL; empty means sqlite:///{home}/metadata.db
        "url": "",
    },
    "deep_storage": {
        "type": "local",  # local | s3 | hdfs
        "path": "",  # local: directory (empty → {home}/deep-storage); hdfs: base path; s3: key prefix
        "bucket": "",  # s3
        "endpoint_url": "",  # s3: e.g. http://127.0.0.1:5000 for moto/MinIO
        "region": "us-east-1",  # s3
        "namenode_url": "",  # hdfs: WebHDFS URL, e.g. http://127.0.0.1:9870
        "hdfs_fs_url": "",  # hdfs: the fs.defaultFS Spark reads, e.g. hdfs://127.0.0.1:9000
        "user": "",  # hdfs user
    },
    "server": {
        "host": "127.0.0.1",
        "port": 8888,
        "max_body_bytes": 64 * 1024 * 1024,
        "max_concurrent_queries": 16,
        "default_query_timeout_ms": 300_000,
        "segment_cache_bytes": 8 * 1024**3,
        "auth": {
            "enabled": False,
            # [{name, password, role: read|admin}]
            "users": [],
        },
    },
    "coordinator": {
        "period_seconds": 10,
        # Druid waits before marking overshadowed segments unused (druid.coordinator.period etc.)
        "overshadowed_unused_delay_seconds": 0,
        "metadata_poll_seconds": 1.0,
        # segment files no metadata row points to (an uncommitted publish) are deleted after this age
        "orphan_files_min_age_seconds": 3600,
        # retention rules (serving/retention.py): drop rules mark segments unused every pass
        "retention": {"on": True},
        # tiered rollup compaction (radstack/storage/compaction.py) of datasources with a compaction config
        "compaction": {
            "on": True,
            "period_seconds": 60,
            "runner": "auto",  # auto | inprocess | spark
            "spark_min_rows": 2_000_000,  # auto: intervals with at least this many input rows use Spark
            "max_intervals_per_run": 4,
        },
        # automatic kill of unused segments (serving/kill.py): OFF by default
        "kill": {
            "on": False,
            "period_seconds": 3600,
            "duration_to_retain": "P90D",  # only segments whose interval ended this long ago
            "buffer_period": "P30D",  # ... and that have been unused this long
            "max_segments": 100,  # per datasource and pass
            "datasources": [],  # empty: all
            "dry_run": False,
        },
        # ingest the platform's own metrics as datasource radstack_metrics (serving/self_metrics.py)
        "self_metrics": {"on": False, "period_seconds": 60, "datasource": "radstack_metrics"},
    },
    "tasks": {
        "max_running": 2,
        # hdfs/s3 JSON inputs at least this big run as a Spark job (batch/); the raw archive always does
        "spark_min_bytes": 256 * 1024 * 1024,
    },
    "kafka": {
        "bootstrap_servers": "127.0.0.1:9092",
        "embedded": True,
        "port": 9092,
        "controller_port": 9093,
        "heap": "512m",
        "auto_create_topics": False,
        "start_timeout_seconds": 90,
        # topic → partitions; created (replication 1 embedded) by `radctl up` / `radctl kafka topics`
        "topics": {"events": 2, "impressions": 2, "clicks": 2, "netflow": 2},
        "replication_factor": 1,
    },
    "receiver": {
        "host": "127.0.0.1",
        "port": 8200,
        "max_body_bytes": 16 * 1024 * 1024,
        "timestamp_field": "timestamp",
        "delivery_timeout_ms": 10_000,
        "auth": {
            "enabled": False,
            # [{name, password}]
            "users": [],
        },
    },
    "archiver": {
        "group_id": "radstack-archiver",
        # raw topics to archive; empty → every topic named in the datasource specs
        "topics": [],
        "max_records": 250_000,
        "max_bytes": 64 * 1024 * 1024,
        "max_age_seconds": 30.0,
        "compression": "zstd",
        # a killed archiver's partitions move to a new one after this long (broker minimum 6000)
        "session_timeout_ms": 10_000,
        # Prometheus /metrics of the archiver process (0 = off)
        "metrics_port": 8201,
    },
    "spark": {
        "master": "local[*]",
        "shuffle_partitions": 4,
        "driver_memory": "2g",
        "conf": {},
    },
    "batch": {
        # Arrow partitions the rebuild hashes rows into (one indexer call each); 0 → spark.shuffle_partitions
        "partitions": 0,
        # an unfinished rebuild's files older than this are deleted by the next run (any host)
        "stale_job_seconds": 21600,
        # `radctl backfill --via local`: consecutive chunks rebuilt by one Spark job (one version, one
        # atomic publish, tombstones for empty chunks); 1440 = a day of MINUTE segments in one job
        "chunks_per_job": 1440,
        # spark-submit on a cluster (spark.master not local): deploy mode and the package shipped
        "deploy_mode": "client",
        "py_files": "",  # wheel/zip of radstack for the executors; empty → built into {home}/dist
    },
    "airflow": {
        # REST API of Airflow 3 (e.g. http://127.0.0.1:8080); empty → `radctl backfill` runs locally
        "url": "",
        "username": "",
        "password": "",
        "dag_prefix": "radstack_rebuild_",
        # scheduled runs start this long after a segment interval ends (windowPeriod + archiver lag)
        "schedule_delay": "PT30M",
        "wait_timeout_seconds": 3600,
    },
    "streaming": {
        # the real-time layer (radctl stream); see docs/realtime.md
        "trigger_seconds": 1.0,
        "max_offsets_per_trigger": 300_000,
        # shuffle partitions of the dedup/join state, frozen into the checkpoint; 0 → one per core
        # of a local master (fastest measured), spark.shuffle_partitions on a cluster
        "shuffle_partitions": 0,
        "fail_on_data_loss": True,
        "starting_offsets": "earliest",
        "handoff": True,
        "handoff_check_seconds": 10.0,
        "progress_seconds": 1.0,
    },
    "jvm": {
        # where `make jvm` copies the Maven Central jars (deploy/jvm/pom.xml)
        "dir": "",
    },
    "datasources": {
        # directory of datasource specs (*.yaml / *.json); empty → {home}/datasources
        "dir": "",
    },
}

ENV_PREFIX = "RADSTACK_"


class ConfigError(ValueError):
    """A configuration value that cannot be used."""


@dataclass(frozen=True)
class Settings:
    """The resolved configuration: a nested dict with typed accessors for what every part uses."""

    raw: dict[str, Any]
    source: Path | None = None

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.raw
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def home(self) -> Path:
        return Path(os.path.expanduser(str(self.raw["home"]))).resolve()

    @property
    def metadata_url(self) -> str:
        url = self.get("metadata.url") or ""
        return url or f"sqlite:///{self.home / 'metadata.db'}"

    @property
    def deep_storage(self) -> dict[str, Any]:
        ds = dict(self.get("deep_storage") or {})
        if ds.get("type", "local") == "local" and not ds.get("path"):
            ds["path"] = str(self.home / "deep-storage")
        return ds

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def jvm_dir(self) -> Path:
        d = self.get("jvm.dir")
        if d:
            return Path(os.path.expanduser(d)).resolve()
        return Path(__file__).resolve().parent.parent / ".jvm"

    @property
    def datasources_dir(self) -> Path:
        d = self.get("datasources.dir")
        return Path(os.path.expanduser(d)).resolve() if d else self.home / "datasources"

    def with_overrides(self, overrides: dict[str, Any]) -> Settings:
        return Settings(_merge(copy.deepcopy(self.raw), overrides), self.source)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        else:
            base[k] = v
    return base


def _coerce(text: str, like: Any) -> Any:
    """Read an environment string as the type of the default it replaces."""
    if isinstance(like, bool):
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"expected a boolean, got {text!r}")
    if isinstance(like, int):
        return int(text)
    if isinstance(like, float):
        return float(text)
    if isinstance(like, list | dict):
        return yaml.safe_load(text)
    return text


def env_overrides(env: dict[str, str] | os._Environ[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name == "RADSTACK_CONFIG":
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        like: Any = DEFAULTS
        for p in path:
            like = like.get(p) if isinstance(like, dict) else None
        if like is None and path != ["home"]:
            continue  # unknown keys are ignored (other tools share the prefix); docs list the known ones
        try:
            val = _coerce(value, like) if like is not None else value
        except ValueError as e:
            raise ConfigError(f"{name}: {e}") from e
        node = out
        for p in path[:-1]:
            node = node.setdefault(p, {})
        node[path[-1]] = val
    return out


def find_config_file(explicit: str | os.PathLike[str] | None, env: dict[str, str] | os._Environ[str]) -> Path | None:
    candidates: list[Path] = []
    if explicit:
        p = Path(explicit)
        if not p.exists():
            raise ConfigError(f"config file {p} does not exist")
        return p
    if env.get("RADSTACK_CONFIG"):
        p = Path(env["RADSTACK_CONFIG"])
        if not p.exists():
            raise ConfigError(f"RADSTACK_CONFIG={p} does not exist")
        return p
    candidates.append(Path.cwd() / "radstack.yaml")
    home = env.get("RADSTACK_HOME") or DEFAULTS["home"]
    candidates.append(Path(os.path.expanduser(home)) / "radstack.yaml")
    return next((c for c in candidates if c.exists()), None)


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    env: dict[str, str] | os._Environ[str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Settings:
    env = os.environ if env is None else env
    raw = copy.deepcopy(DEFAULTS)
    path = find_config_file(config_file, env)
    if path is not None:
        loaded = yaml.safe_load(path.read_text()) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping")
        unknown = sorted(set(loaded) - set(DEFAULTS))
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}")
        _merge(raw, loaded)
    _merge(raw, env_overrides(env))
    if overrides:
        _merge(raw, overrides)
    return Settings(raw, path)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (lists and empty dicts are leaves)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def env_name(dotted: str) -> str:
    """The environment variable that overrides ``dotted`` (``server.port`` → ``RADSTACK_SERVER__PORT``)."""
    return ENV_PREFIX + "__".join(p.upper() for p in dotted.split("."))
