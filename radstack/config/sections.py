"""The storage, streaming and batch sections of the settings, in the order of docs/configuration.md
(the server's are in :mod:`radstack.config.server_sections`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from radstack.config.section import Section
from radstack.config.server_sections import AuthSettings


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
    parsed_columns: bool = Field(True, description=(
        "also write each record's top-level JSON members as typed columns (the parsed archive the rebuild "
        "reads instead of parsing the JSON); false → the raw columns only, one JSON parse per record less"))
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
    connect_server: bool = Field(True, description=(
        "`radctl up` also starts a warm Spark: a Spark Connect server on 127.0.0.1:{spark.connect_port} with a "
        "generated token, which the rebuilds of `radctl backfill`, the Airflow DAGs and Overlord tasks run on "
        "(no JVM start per job); a job runs its own Spark when it is not running. false → every job starts its own"))
    connect_warm_up: bool = Field(True, description=(
        "once the warm Spark listens, run one generated hour's rebuild on it in the background "
        "(operations/spark_connect_warm_up.py), so that the first scheduled rebuild does not pay its cold JIT"))
    connect_port: int = Field(15002, description="the warm Spark's port (loopback only)")
    connect_url: str = Field("", description=(
        "a Spark Connect server elsewhere that the batch jobs use (sc://host:port/;token=…; it must reach the "
        "same deep storage); empty → the embedded one of spark.connect_server when it runs"))

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
    parsed_archive: bool = Field(True, description=(
        "the rebuild reads each archived record's fields from the parsed archive's typed columns (the "
        "archiver writes them beside the raw bytes) instead of parsing its JSON; records without them "
        "(older archives, nested values, new fields) are parsed as before. false → always parse the raw JSON"))


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
