"""The server's sections of the settings: ``server`` (with its ``auth``), ``coordinator`` (retention,
compaction, kill, self-metrics) and ``tasks``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from radstack.config.section import Section
from radstack.sql_text import DEFAULT_MAX_VALUE_BYTES


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


class KillTaskLogsSettings(Section):
    on: bool = Field(False, description="delete the logs of finished tasks after duration_to_retain (off by default)")
    period_seconds: float = Field(3600, description="seconds between passes of the task-log cleaner")
    duration_to_retain: str = Field("P7D", description="keep the log of a task that finished less than this long ago")


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
    kill_task_logs: KillTaskLogsSettings = Field(default_factory=KillTaskLogsSettings)
    self_metrics: SelfMetricsSettings = Field(default_factory=SelfMetricsSettings)


class TasksSettings(Section):
    max_running: int = Field(2, description="Overlord tasks run at once")
    spark_min_bytes: int = Field(256 * 1024 * 1024,
                                 description="hdfs/s3 JSON inputs at least this big run as a Spark job (the raw archive always does)")
