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
``docs/configuration.md`` list every key; a test keeps the document in step with this module.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, ValidationError, model_validator

from radstack.sql_text import DEFAULT_MAX_VALUE_BYTES
from radstack.user_errors import UserError

__all__ = [
    "ConfigError",
    "Settings",
    "DeepStorageSettings",
    "KafkaSettings",
    "SparkSettings",
    "StreamingSettings",
    "load_settings",
    "config_keys",
    "env_name",
    "flatten",
    "DEFAULTS",
]

ENV_PREFIX = "RADSTACK_"
REPO_ROOT = Path(__file__).resolve().parent.parent


class ConfigError(ValueError, UserError):
    """A configuration value that cannot be used."""


class Section(BaseModel):
    """A group of settings: immutable, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# -- sections, in the order of docs/configuration.md -----------------------------------------------


class MetadataSettings(Section):
    url: str = Field("", description="SQLAlchemy URL of the metadata store; empty → sqlite:///{home}/metadata.db")


class DeepStorageSettings(Section):
    type: Literal["local", "s3", "hdfs"] = Field("local", description="local | s3 | hdfs")
    path: str = Field("", description="local: directory (empty → {home}/deep-storage); hdfs: base path; s3: key prefix")
    bucket: str = Field("", description="s3: the bucket")
    endpoint_url: str = Field("", description="s3: endpoint, e.g. http://127.0.0.1:5000 for moto/MinIO")
    region: str = Field("us-east-1", description="s3: region")
    namenode_url: str = Field("", description="hdfs: WebHDFS URL, e.g. http://127.0.0.1:9870")
    hdfs_fs_url: str = Field("", description="hdfs: the fs.defaultFS Spark reads, e.g. hdfs://127.0.0.1:9000")
    user: str = Field("", description="hdfs: user")


class AuthSettings(Section):
    enabled: bool = Field(False, description="require HTTP Basic authentication")
    users: list[dict[str, Any]] = Field(
        default_factory=list,
        description="[{name, password_hash, roles}]: hashes from `radctl auth hash-password`; roles read | admin | yours")
    roles: dict[str, list[dict[str, Any]]] = Field(
        default_factory=dict,
        description="server: role → Druid permissions [{resource: {type, name regex}, action: READ|WRITE}]")
    max_failed_logins: int = Field(
        10, description="failed sign-ins for one user from one address, and from one address, in the window before "
        "429 (0: no limit); one user from every address together: 10 times as many")
    failed_login_window_seconds: float = Field(60, description="the window max_failed_logins counts over")
    generate_admin: bool = Field(
        False, description="add a user `admin` (role admin) whose random password is generated at the first start, "
        "printed once, and kept hashed in {home}/credentials (0600)")


class ServerSettings(Section):
    host: str = Field("127.0.0.1", description="bind address of the Druid-compatible server")
    allowed_hosts: list[str] = Field(
        default_factory=list, description="host names a request's Host header may name (IP addresses always may; "
        "`.example.com` allows its subdomains, `*` any); empty → localhost (DNS-rebinding protection)")
    cors_allowed_origins: list[str] = Field(
        default_factory=list, description="web origins (scheme://host:port) whose pages may send queries and "
        "changes and read the answers; none by default: a request from another website gets 403")
    trusted_proxies: list[str] = Field(
        default_factory=list, description="addresses of reverse proxies whose X-Forwarded-For / X-Forwarded-Proto "
        "name the real client (sign-in limits, per-client lanes); none by default: the peer address is the client")
    port: int = Field(8888, description="its port")
    request_log: bool = Field(True, description="one line per query in serve.log: method, path, status, time, size, "
                              "query id, user, client (serving/request_log.py)")
    max_body_bytes: int = Field(64 * 1024 * 1024, description="largest request body (413 above)")
    max_concurrent_queries: int = Field(16, description="queries run at once; more wait in the queue")
    max_queued_queries: int = Field(128, description="queries that may wait for a slot; more → 429")
    query_queue_timeout_ms: int = Field(60_000, description="longest wait for a slot (and never past the query's timeout); then 429")
    low_priority_percent: int = Field(
        50, description="share of the slots queries with a negative context priority may hold (Druid's hilo lane)")
    default_query_timeout_ms: int = Field(300_000, description="a query's timeout when its context sets none")
    max_query_timeout_ms: int = Field(
        600_000, description="the longest timeout a query may ask for (Druid's maxQueryTimeout): a larger one is a "
        "400, 'timeout': 0 means this one; 0 → no limit")
    write_timeout_seconds: float = Field(
        30, description="a client that takes no part of a streamed answer for this long (or past the query's own "
        "timeout) loses the connection, and the query its slot")
    max_connections: int = Field(
        1000, description="open HTTP connections the server holds; the next one gets an immediate 503 and is closed")
    max_connections_per_client: int = Field(
        128, description="open HTTP connections one client address may hold (503 above)")
    header_timeout_seconds: float = Field(
        10, description="a request's line and headers must arrive within this long, or the connection is closed")
    body_timeout_seconds: float = Field(
        60, description="a request's body must arrive within this long after its headers, or the connection is closed")
    idle_timeout_seconds: float = Field(5, description="an idle kept-alive connection is closed after this long")
    max_queries_per_user: int = Field(
        8, description="queries one user (or, with auth off, one client address) runs at once; more wait in the queue "
        "(at most half of max_queued_queries each, 429 above), so no user holds every slot; 0 → no limit")
    segment_cache_bytes: int = Field(
        8 * 1024**3, description="bytes of segments (their descriptors' size) the broker's on-disk segment cache "
        "holds; a segment beyond it stays unavailable, as on a full Druid historical; 0 → no limit")
    duckdb_threads: int = Field(0, description="threads of the broker's DuckDB; 0 → DuckDB's default (all cores)")
    memory_limit: str = Field(
        "", description="memory the broker's DuckDB may use (DuckDB's spelling, e.g. '8GiB'): its buffer pool over the "
        "on-disk segment cache and every query's working memory; empty → half the machine's, or of its cgroup's "
        "limit when lower")
    query_memory_limit: str = Field(
        "", description="memory one query's sorts, joins and hash tables may hold before they spill to disk "
        "(DuckDB's operator_memory_limit); empty → a quarter of memory_limit")
    max_spill: str = Field(
        "4GiB", description="largest total the broker's queries may spill to disk at once (DuckDB's "
        "max_temp_directory_size); a query that needs more fails with 429 'Resource limit exceeded'")
    memory_headroom: str = Field(
        "300MiB", description="the process's memory budget is memory_limit plus this (Python, the results on their "
        "way out); past it the memory guard stops the longest-running query (400 'Resource limit exceeded'); "
        "empty → no guard")
    max_sql_chars: int = Field(131_072, description="longest SQL text a query may have (400 above; planning is linear in it)")
    planning_processes: int = Field(
        1, description="worker processes that plan SQL statements of 16 KiB or more, so one cannot hold the "
        "server's interpreter while other requests wait; 0 → plan every statement in the server process")
    max_query_depth: int = Field(
        40, description="deepest nesting of parentheses, NOTs, subqueries, filters or expressions in a query (400 above)")
    max_string_bytes: int = Field(
        DEFAULT_MAX_VALUE_BYTES, description="largest string or array one function call may build (REPEAT, LPAD, "
        "REPLACE, ||, ARRAY_CONCAT …, in SQL, native expressions and ingestion transforms), checked before it is built: "
        "400 'Resource limit exceeded' above. DuckDB evaluates 2,048 rows at a time, so this bounds one expression's "
        "working memory to 2,048 × it per thread; 0 → no limit")
    max_subscriptions: int = Field(1000, description="live query subscriptions the server keeps (400 above)")
    max_subscriptions_per_user: int = Field(100, description="subscriptions one user may keep (429 above; auth on)")
    max_streams_per_user: int = Field(
        20, description="event streams (GET …/subscriptions/{id}/events) one user may hold open at once (429 above)")
    max_subscription_answer_bytes: int = Field(
        16 * 1024 * 1024, description="largest answer a subscription may push (its JSON; 400 at creation, an error event later)")
    backfill_slots: int = Field(2, description="backfills (POST /radstack/v1/backfill) that run at once; more wait, like Druid's task slots")
    max_queued_backfills: int = Field(32, description="backfills that may wait for a slot (429 above)")
    max_supervisors_per_user: int = Field(20, description="supervisors one user may own (429 above; auth on)")
    subscription_tick_ms: int = Field(
        1000, description="how often a subscription whose SQL reads the current time (a sliding window) is re-run")
    subscription_threads: int = Field(2, description="subscription queries re-run at once after a change")
    auth: AuthSettings = Field(default_factory=AuthSettings)


class RetentionSettings(Section):
    on: bool = Field(True, description="apply retention (drop) rules every coordinator pass")


class CompactionSettings(Section):
    on: bool = Field(True, description="tiered rollup compaction of datasources with a compaction config")
    period_seconds: float = Field(60, description="seconds between compaction passes")
    runner: Literal["auto", "inprocess", "spark"] = Field("auto", description="auto | inprocess | spark")
    spark_min_rows: int = Field(2_000_000, description="auto: intervals with at least this many input rows use Spark")
    max_intervals_per_run: int = Field(4, description="intervals compacted per datasource and pass")


class KillSettings(Section):
    on: bool = Field(False, description="delete unused segments automatically (off by default)")
    period_seconds: float = Field(3600, description="seconds between kill passes")
    duration_to_retain: str = Field("P90D", description="only segments whose interval ended this long ago")
    buffer_period: str = Field("P30D", description="... and that have been unused this long")
    max_segments: int = Field(100, description="segments killed per datasource and pass")
    datasources: list[str] = Field(default_factory=list, description="datasources to kill in; empty → all")
    dry_run: bool = Field(False, description="log what would be killed, delete nothing")


class SelfMetricsSettings(Section):
    on: bool = Field(False, description="ingest the platform's own metrics as a datasource")
    period_seconds: float = Field(60, description="seconds between samples")
    datasource: str = Field("radstack_metrics", description="the datasource they go to")


class CoordinatorSettings(Section):
    period_seconds: float = Field(10, description="seconds between coordinator passes")
    overshadowed_unused_delay_seconds: float = Field(
        0, description="wait before marking overshadowed segments unused (Druid's druid.coordinator.period etc.)")
    metadata_poll_seconds: float = Field(1.0, description="how often the broker polls the metadata store")
    orphan_files_min_age_seconds: float = Field(
        3600, description="segment files no metadata row points to (an uncommitted publish) are deleted after this age")
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    kill: KillSettings = Field(default_factory=KillSettings)
    self_metrics: SelfMetricsSettings = Field(default_factory=SelfMetricsSettings)


class TasksSettings(Section):
    max_running: int = Field(2, description="Overlord tasks run at once")
    spark_min_bytes: int = Field(256 * 1024 * 1024,
                                 description="hdfs/s3 JSON inputs at least this big run as a Spark job (the raw archive always does)")


class KafkaSettings(Section):
    bootstrap_servers: str = Field("127.0.0.1:9092", description="a real cluster's brokers (kafka.embedded false)")
    embedded: bool = Field(True, description="run the single-node KRaft broker radstack starts itself")
    port: int = Field(9092, description="embedded broker: client port")
    controller_port: int = Field(9093, description="embedded broker: KRaft controller port")
    heap: str = Field("512m", description="embedded broker: JVM heap")
    auto_create_topics: bool = Field(False, description="embedded broker: auto.create.topics.enable")
    start_timeout_seconds: float = Field(90, description="embedded broker: seconds to wait for it to serve")
    topics: dict[str, int] = Field(
        default_factory=lambda: {"events": 2, "impressions": 2, "clicks": 2, "netflow": 2},
        description="topic → partitions, created by `radctl up` / `radctl kafka topics`")
    replication_factor: int = Field(1, description="replication of the topics radstack creates")

    @property
    def clients_bootstrap(self) -> str:
        """Where clients connect: the embedded broker's port, or ``bootstrap_servers`` of a real cluster."""
        return f"127.0.0.1:{self.port}" if self.embedded else self.bootstrap_servers


class SpoolSettings(Section):
    enabled: bool = Field(
        True, description="write accepted events to a local write-ahead spool first (202 while Kafka is away); false → 503 while Kafka is away")
    dir: str = Field("", description="spool directory (one receiver process each); empty → {home}/spool/receiver")
    max_bytes: int = Field(1024 * 1024 * 1024, description="spool size cap; a request that would pass it gets 503 + Retry-After")
    max_bytes_per_client: int = Field(
        -1, description="undelivered bytes one client (its user, or address with auth off) may hold in the spool; "
        "more → 503 for that client alone; -1 → a quarter of max_bytes, 0 → no per-client limit")
    segment_bytes: int = Field(64 * 1024 * 1024, description="the spool rolls to a new file at this size (delivered files are deleted)")
    fsync: Literal["always", "interval", "never"] = Field(
        "always", description="always: fsync before answering (survives a machine crash); interval: every fsync_interval_ms (a process crash loses nothing); never: the OS decides")
    fsync_interval_ms: int = Field(1000, description="fsync period when fsync is interval")


class ReceiverSettings(Section):
    host: str = Field("127.0.0.1", description="bind address of the HTTP event receiver")
    port: int = Field(8200, description="its port")
    allowed_hosts: list[str] = Field(
        default_factory=list, description="host names a request's Host header may name (IP addresses always may); "
        "empty → localhost (as server.allowed_hosts)")
    cors_allowed_origins: list[str] = Field(
        default_factory=list, description="web origins whose pages may post events (none by default: 403)")
    trusted_proxies: list[str] = Field(
        default_factory=list, description="reverse proxies whose X-Forwarded-For is believed (as server.trusted_proxies)")
    max_body_bytes: int = Field(16 * 1024 * 1024, description="largest request body (413 above)")
    max_event_bytes: int = Field(
        1_000_000, description="largest single event (its JSON bytes); larger → 413. Kafka's message.max.bytes bounds it")
    topics: list[str] = Field(
        default_factory=list,
        description="topics clients may write; empty → kafka.topics and the topics the datasource specs read (never internal or dead-letter topics)")
    timestamp_field: str = Field("timestamp", description="the event field checked for an event time")
    delivery_timeout_ms: int = Field(
        10_000, description="how long a POST waits for Kafka's acknowledgement (then 202 with the spool, 503 without)")
    auth: AuthSettings = Field(default_factory=AuthSettings)
    spool: SpoolSettings = Field(default_factory=SpoolSettings)


class ArchiverSettings(Section):
    group_id: str = Field("radstack-archiver", description="Kafka consumer group")
    topics: list[str] = Field(default_factory=list,
                              description="raw topics to archive; empty → every topic named in the datasource specs")
    max_records: int = Field(250_000, description="flush after this many buffered records")
    max_bytes: int = Field(64 * 1024 * 1024, description="... or this many buffered bytes")
    max_age_seconds: float = Field(30.0, description="... or when the oldest buffered record is this old")
    compression: str = Field("zstd", description="Parquet compression of the archive files")
    session_timeout_ms: int = Field(
        10_000, description="a killed archiver's partitions move to a new one after this long (broker minimum 6000)")
    metrics_port: int = Field(8201, description="Prometheus /metrics of the archiver process (0 = off)")
    retry_seconds: float = Field(
        120.0, description="a flush step that fails (deep storage or a Kafka broker away) is retried this long, then the archiver exits")


class SparkSettings(Section):
    master: str = Field("local[*]", description="Spark master of the batch and streaming jobs")
    shuffle_partitions: int = Field(4, description="spark.sql.shuffle.partitions")
    driver_memory: str = Field("2g", description="spark.driver.memory")
    conf: dict[str, Any] = Field(default_factory=dict, description="any other Spark settings")

    @property
    def is_local(self) -> bool:
        return self.master.startswith("local")


class BatchSettings(Section):
    partitions: int = Field(
        0, description="partitions of the rebuild's one shuffle on the rollup key (each writes one segment file per chunk); 0 → spark.shuffle_partitions")
    stale_job_seconds: int = Field(21600,
                                   description="an unfinished rebuild's files older than this are deleted by the next run")
    chunks_per_job: int = Field(
        1440, description="`radctl backfill --via local`: consecutive chunks rebuilt by one Spark job (one version, one publish)")
    deploy_mode: str = Field("client", description="spark-submit deploy mode on a cluster")
    py_files: str = Field("", description="wheel/zip of radstack for the executors; empty → built into {home}/dist")
    quick_jit_max_records: int = Field(250_000, ge=0, description=(
        "a local rebuild that may read at most this many archived records (counted from the archive's file "
        "names) starts its JVM with the C1 JIT only: an hourly job is done before C2's compiling pays off "
        "(100 k events: 20 s → 13 s; docs/benchmarks.md); 0 → always the full JIT"))


class AirflowSettings(Section):
    url: str = Field("", description="REST API of Airflow 3; empty → the embedded Airflow when it runs, else `radctl backfill` runs locally")
    embedded: bool = Field(False, description=(
        "`radctl up` also starts Airflow 3 from the checkout's .venv-airflow on 127.0.0.1:{airflow.port}, with "
        "radstack's DAGs, its database in {home}/airflow and a generated admin password (`radctl up --airflow` "
        "does it once without this)"))
    port: int = Field(8280, description="the embedded Airflow's API server and UI port (loopback only)")
    venv: str = Field("", description="the embedded Airflow's virtualenv; empty → .venv-airflow of the checkout (`make airflow`)")
    start_timeout_seconds: float = Field(300, description="how long `radctl up` waits for the embedded Airflow to be healthy")
    username: str = Field("", description="Airflow user")
    password: str = Field("", description="Airflow password")
    dag_prefix: str = Field("radstack_rebuild_", description="DAG id prefix, one DAG per datasource")
    schedule_delay: str = Field("PT30M",
                                description="scheduled runs start this long after a segment interval ends (windowPeriod + archiver lag)")
    run_granularity: str = Field(
        "hour", description="the shortest interval one scheduled run rebuilds: a datasource with finer segments "
        "(MINUTE) gets one run per hour for all its chunks (one Spark job), so waiting runs never fill "
        "max_active_runs and a manual trigger runs at once; coarser segments keep one run per segment")
    wait_timeout_seconds: float = Field(3600, description="how long `radctl backfill` waits for the DAG runs")
    task_retries: int = Field(1, ge=0, description="retries of a DAG's rebuild task before its run fails (clear it in the UI to run it again)")
    retry_delay_seconds: float = Field(120, ge=0, description="wait before such a retry")


class StreamingSettings(Section):
    trigger_seconds: float = Field(1.0, description="micro-batch trigger interval")
    checkpoint_location: str = Field(
        "", description="where the streaming checkpoints live (a URI Spark writes: hdfs://…, file://…); empty → "
        "{deep storage}/checkpoints with HDFS deep storage (shared by every host), else {home}/checkpoints")
    max_offsets_per_trigger: int = Field(1_000_000, description="Kafka records read per micro-batch at most")
    shuffle_partitions: int = Field(
        0, description="shuffle partitions of the dedup/join state, frozen into the checkpoint; 0 → one per local core")
    fail_on_data_loss: bool = Field(True, description="stop when Kafka deleted offsets the job had not read")
    starting_offsets: str = Field("earliest", description="where a new checkpoint starts reading")
    handoff: bool = Field(True, description="hand real-time segments off once their interval closed")
    handoff_check_seconds: float = Field(10.0, description="seconds between handoff checks")
    progress_seconds: float = Field(1.0, description="seconds between progress records")
    java_options: str = Field("", description=(
        "extra JVM options of the streaming job's Spark driver (and its executors), added to radstack's own; "
        "e.g. `-XX:TieredStopAtLevel=1` (the C1 JIT only: about a quarter less CPU at a few thousand events/s, "
        "a quarter less peak throughput — docs/benchmarks.md, real-time replicas)"))
    replicas: int = Field(1, ge=1, le=8, description=(
        "streaming jobs per datasource over the same topics (own checkpoints, consumer groups and copies of the "
        "real-time segments; the broker serves the copy furthest ahead): `radctl up` starts them all"))


class JvmSettings(Section):
    dir: str = Field("", description="where `make jvm` copies the Maven Central jars; empty → .jvm of the checkout")
    class_sharing: bool = Field(
        True, description="start Spark's driver JVM with the class-data sharing archive `make jvm` builds in {jvm.dir}/cds (≈3 s less per Spark start); false → a plain JVM")


class LocalInputSettings(Section):
    allowed_dirs: list[str] = Field(
        default_factory=list,
        description="directories `local` input sources may read (after symlinks and ..); empty → {home}/data and the checkout's examples/ (a local deep storage is always allowed)")
    base_dir: str = Field(
        "", description="what a relative `baseDir` or file of a `local` input source is relative to; empty → the "
        "checkout radstack runs from (so `examples/rollup-tutorial` works), as Druid reads them against its "
        "installation directory")


class HttpInputSettings(Section):
    allowed_protocols: list[str] = Field(default_factory=lambda: ["http", "https"],
                                         description="URI schemes `http` input sources may use")
    allow_private_addresses: bool = Field(
        False, description="let `http` inputs reach loopback, private, link-local and reserved addresses (off: no SSRF)")
    allowed_hosts: list[str] = Field(default_factory=list,
                                     description="host names or IPs `http` inputs may reach even when they are private")


class IngestionSettings(Section):
    local: LocalInputSettings = Field(default_factory=LocalInputSettings)
    http: HttpInputSettings = Field(default_factory=HttpInputSettings)
    s3_buckets: list[str] = Field(default_factory=list,
                                  description="buckets `s3` inputs may read (never the deep-storage prefix)")
    s3_endpoints: list[str] = Field(default_factory=list,
                                    description="endpointConfig.url values `s3` inputs may name besides deep_storage.endpoint_url")
    hdfs_paths: list[str] = Field(default_factory=list,
                                  description="HDFS path prefixes `hdfs` inputs may read (never under deep_storage.path)")
    password_env_variables: list[str] = Field(
        default_factory=list, description="environment variables an `environment` password provider may name (none by default)")


class DruidSettings(Section):
    """An Apache Druid cluster that serves some datasources too; radstack keeps it in step (docs/druid-cluster.md)."""

    datasources: list[str] = Field(
        default_factory=list, description="datasources Druid serves as well; empty → none (the Druid target is off)")
    overlord_url: str = Field("", description="the Overlord (or a Router): tasks and supervisors")
    coordinator_url: str = Field("", description="the Coordinator: load status, rules, compaction; empty → overlord_url")
    broker_url: str = Field("", description="the Broker (or a Router): Druid's answers and sys.segments; empty → overlord_url")
    user: str = Field("", description="Druid's basic-auth user (druid-basic-security); empty → no auth")
    password: str = Field("", description="its password (RADSTACK_DRUID__PASSWORD)")
    parquet_input: bool = Field(
        False, description="the cluster has druid-parquet-extensions: re-indexes read the segments' Parquet files; "
        "false → the batch job also writes each segment's rows as gzip JSON lines (data.json.gz) and Druid reads those")
    kafka_bootstrap_servers: str = Field(
        "", description="how Druid's supervisors reach Kafka; empty → the address radstack's own clients use")
    supervisor_task_duration: str = Field(
        "PT1H", description="the supervisors' taskDuration (at least PT1M: Druid 33's Kafka tasks fail on less)")
    reindex_timeout_seconds: float = Field(1800, description="how long one re-index may take, load included")
    sync_period_seconds: float = Field(
        30, description="how often the server posts supervisors, rules and compaction configs that changed")
    timeout_seconds: float = Field(30, description="one HTTP request to Druid")

    def serves(self, datasource: str) -> bool:
        return bool(self.overlord_url) and datasource in self.datasources

    @property
    def coordinator(self) -> str:
        return self.coordinator_url or self.overlord_url

    @property
    def broker(self) -> str:
        return self.broker_url or self.overlord_url

    @property
    def auth(self) -> tuple[str, str] | None:
        return (self.user, self.password) if self.user else None


class DatasourcesSettings(Section):
    dir: str = Field("", description="directory of datasource specs (*.yaml / *.json); empty → {home}/datasources")


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


# -- reading -------------------------------------------------------------------------------------


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


def _field_annotation(path: list[str]) -> Any:
    """The declared type of the key at ``path``, or None when no such key exists."""
    model: Any = Settings
    for i, part in enumerate(path):
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        ann = field.annotation
        if i == len(path) - 1:
            return ann
        model = ann
    return None


def env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """The nested overrides the ``RADSTACK_*`` variables of ``env`` set, each checked against its type."""
    out: dict[str, Any] = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name == "RADSTACK_CONFIG":
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX):].split("__")]
        ann = _field_annotation(path)
        if ann is None or (isinstance(ann, type) and issubclass(ann, BaseModel)):
            continue  # unknown keys are ignored (other tools share the prefix); docs list the known ones
        origin = getattr(ann, "__origin__", None)
        try:
            parsed: Any = yaml.safe_load(value) if origin in (list, dict) else value
            if isinstance(parsed, str) and ann is bool and not parsed.strip():
                parsed = False
            TypeAdapter(ann).validate_python(parsed)
        except (ValidationError, yaml.YAMLError) as e:
            why = e.errors()[0]["msg"] if isinstance(e, ValidationError) else str(e)
            raise ConfigError(f"{name}: cannot read {value!r} as {getattr(ann, '__name__', ann)}: {why}") from None
        node = out
        for p in path[:-1]:
            node = node.setdefault(p, {})
        node[path[-1]] = parsed
    return out


def find_config_file(explicit: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
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
    home = env.get("RADSTACK_HOME") or str(Settings.model_fields["home"].default)
    candidates = [Path.cwd() / "radstack.yaml", Path(os.path.expanduser(home)) / "radstack.yaml"]
    return next((c for c in candidates if c.exists()), None)


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults → the YAML file → ``RADSTACK_*`` variables → ``overrides``, validated once."""
    env = os.environ if env is None else env
    raw: dict[str, Any] = {}
    path = find_config_file(config_file, env)
    if path is not None:
        loaded = yaml.safe_load(path.read_text()) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping")
        _validate(loaded, where=str(path))  # errors name the file, not the merged result
        _merge(raw, loaded)
    _merge(raw, env_overrides(env))
    if overrides:
        _merge(raw, overrides)
    settings = _validate(raw, where=str(path) if path else "settings")
    settings._source = path
    return settings


# -- describing ----------------------------------------------------------------------------------


def _defaults(model: type[BaseModel]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out[name] = _defaults(ann)
        else:
            default = field.get_default(call_default_factory=True)
            out[name] = str(default) if isinstance(default, Path) else default
    return out


DEFAULTS: dict[str, Any] = _defaults(Settings)
"""Every key's default, nested like the YAML file (generated from the model)."""


def config_keys(model: type[BaseModel] = Settings, prefix: str = "") -> Iterator[tuple[str, Any, str]]:
    """``(dotted key, default, description)`` for every leaf key of the model, in declaration order."""
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from config_keys(ann, f"{prefix}{name}.")
        else:
            default = field.get_default(call_default_factory=True)
            yield f"{prefix}{name}", str(default) if isinstance(default, Path) else default, field.description or ""


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (lists and empty mappings are leaves)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def env_name(dotted: str) -> str:
    """The environment variable that overrides ``dotted`` (``server.port`` → ``RADSTACK_SERVER__PORT``)."""
    return ENV_PREFIX + "__".join(p.upper() for p in dotted.split("."))
