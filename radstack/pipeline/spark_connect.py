"""The warm Spark of the batch jobs: a long-lived Spark Connect server (Spark's own
``SparkConnectServer``, from the pyspark distribution) that a rebuild submits to instead of starting a
JVM of its own. ``radctl up`` starts it (``spark.connect_server``; :mod:`operations.stack`), bound to
127.0.0.1 and refusing every client without the token it was started with (Spark's pre-shared-key
authentication); :func:`connect_session` is how a job reaches it, and answers ``None`` (the job then
starts a local session as before) when none runs, the client libraries are missing, or the server was
started for other deep storage.

The endpoint file ``{home}/run/spark-connect.json`` (0600: it holds the token) says where it listens and
with which static settings it started; the settings ``spark.connect_url`` name a server elsewhere
instead (``sc://host:port/;token=…``).

Every job opens the same server-side session (its id is in the endpoint file): Spark keeps one set of
Python workers per session (they are started with the session's artifact id), so one session is what lets
the workers — and the modules they imported — serve job after job; a session per job would leave one idle
set of workers behind per job. So, unlike a session of one's own: the Python workers are the server's
(its interpreter, the code they imported when they started: restart the server after changing radstack's
code); jobs running at once share the session (radstack's jobs keep no state in it: no temporary views,
no caches); and a job's settings are the server's except the runtime SQL settings of
:data:`RUNTIME_KEYS`, which every job sets to the same values from the same settings. Only radstack's own
jobs, holding the token, reach the server, so artifact isolation is off.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radstack.config import Settings
from radstack.private_files import write_private
from radstack.process_state import port_open

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

__all__ = [
    "ConnectEndpoint", "connect_session", "close_session", "endpoint_file", "read_endpoint", "new_endpoint",
    "write_server_properties", "server_command", "server_environment",
    "RUNTIME_KEYS", "SERVER_CLASS",
]  # fmt: skip

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

RUNTIME_KEYS = (
    "spark.sql.shuffle.partitions",
    "spark.sql.session.timeZone",
    "spark.sql.parquet.outputTimestampType",
    "spark.sql.execution.arrow.pyspark.enabled",
    "spark.sql.execution.arrow.maxBytesPerBatch",
    "spark.sql.execution.arrow.maxRecordsPerBatch",
)
"""The settings a job sets on its own Spark Connect session (runtime SQL settings); every other one is
the server's, fixed when it started."""

STATIC_PREFIXES = ("spark.hadoop.", "spark.jars")
"""The static settings a job needs the server to have started with: those of its deep storage (the
S3/HDFS client settings and jars of :mod:`batch.storage_conf`). A server started with others cannot
read that job's archive: the job runs locally."""


@dataclass(frozen=True)
class ConnectEndpoint:
    """Where the embedded server listens, its token, the static settings it started with, and the one
    session every job opens (see :func:`connect_session`)."""

    port: int
    token: str
    conf: dict[str, str]
    session: str

    @property
    def url(self) -> str:
        # "localhost": Spark's client sends a token only over TLS or, on localhost, over gRPC's local
        # credentials (a loopback TCP connection); an address would ask for TLS
        return f"sc://localhost:{self.port}/;token={self.token};session_id={self.session}"

    def to_json(self) -> dict[str, Any]:
        return {"port": self.port, "token": self.token, "conf": self.conf, "session": self.session}


def endpoint_file(settings: Settings) -> Path:
    return Path(settings.run_dir) / "spark-connect.json"


def new_endpoint(settings: Settings, conf: dict[str, str]) -> ConnectEndpoint:
    """A fresh token for a server about to start with ``conf``, written to :func:`endpoint_file` (0600)."""
    ep = ConnectEndpoint(int(settings.spark.connect_port), secrets.token_urlsafe(24),
                         {k: v for k, v in conf.items() if k.startswith(STATIC_PREFIXES)}, str(uuid.uuid4()))  # fmt: skip
    f = endpoint_file(settings)
    f.parent.mkdir(parents=True, exist_ok=True)
    write_private(f, json.dumps(ep.to_json()))
    return ep


def read_endpoint(settings: Settings) -> ConnectEndpoint | None:
    try:
        raw = json.loads(endpoint_file(settings).read_text())
        return ConnectEndpoint(int(raw["port"]), str(raw["token"]), {str(k): str(v) for k, v in raw["conf"].items()},
                               str(uuid.UUID(str(raw["session"]))))  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_server_properties(settings: Settings, conf: dict[str, str], endpoint: ConnectEndpoint) -> Path:
    """The server's settings (``conf`` plus where and how it serves) in a 0600 properties file beside the
    endpoint file, which :func:`server_command` hands to ``spark-submit``: deep-storage credentials and
    secrets never show in a process list."""
    server_conf = {
        **conf,
        "spark.master": str(settings.spark.master or "local[*]"),
        "spark.app.name": "radstack-spark-connect",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(endpoint.port),
        # one session for every job (see connect_session), never timed out: its Python workers stay
        "spark.sql.artifact.isolation.enabled": "false",
        "spark.connect.session.manager.defaultSessionTimeout": "3650d",
    }
    if str(server_conf["spark.master"]).startswith("local"):
        # the driver's own RPC and block-manager ports (loopback) ask for a secret too: the server lives
        # long, and another local user must not reach its JVM around the Connect token
        server_conf |= {"spark.authenticate": "true", "spark.authenticate.secret": endpoint.token}
    return write_private(_properties_file(settings), "".join(f"{k} {_escaped(v)}\n" for k, v in server_conf.items()))


def _properties_file(settings: Settings) -> Path:
    return endpoint_file(settings).with_suffix(".conf")


def server_command(settings: Settings) -> list[str]:
    """The server's command line: pyspark's ``spark-submit`` running :data:`SERVER_CLASS` in the
    foreground with the settings :func:`write_server_properties` wrote."""
    from pyspark.find_spark_home import _find_spark_home  # lazy: only Spark code paths load pyspark

    submit = Path(_find_spark_home()) / "bin" / "spark-submit"
    return [str(submit), "--properties-file", str(_properties_file(settings)), "--class", SERVER_CLASS, "spark-internal"]


def server_environment(endpoint: ConnectEndpoint) -> dict[str, str]:
    """What the server needs on top of the stack's environment: the token, loopback, and radstack's
    Python (this interpreter, the virtualenv's) for its workers."""
    return {"SPARK_CONNECT_AUTHENTICATE_TOKEN": endpoint.token, "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}  # fmt: skip


def _escaped(value: str) -> str:
    """``value`` as a Java properties file reads it back (backslashes, and line breaks, escaped)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def _speaks_grpc(port: int, timeout: float = 5.0) -> bool:
    """Whether a gRPC server answers on ``port`` within ``timeout`` (the HTTP/2 handshake; no call). Spark's
    client retries a connection for minutes: a port held by something else, or a server hung, must not
    hold a job that long before it runs its own Spark."""
    import grpc  # lazy: only the warm Spark's path needs the gRPC client

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
        return True
    except grpc.FutureTimeoutError:
        return False
    finally:
        channel.close()


def connect_session(settings: Settings, *, app_name: str, conf: dict[str, str]) -> SparkSession | None:
    """A new session on the warm Spark for a job whose local session would have ``conf``
    (:func:`radstack.pipeline.spark_session.session_conf`), or ``None`` (logged) when the job should
    start its own: no server runs (or ``spark.connect_server`` is off), the client libraries (grpcio) are missing, the server's deep-storage
    settings are not the job's, or the server does not take the session."""
    url = str(settings.spark.connect_url or "")
    if not url:
        if not settings.spark.connect_server:
            return None
        ep = read_endpoint(settings)
        if ep is None or not port_open("127.0.0.1", ep.port, 0.3):
            return None
        wanted = {k: v for k, v in conf.items() if k.startswith(STATIC_PREFIXES)}
        if wanted != ep.conf:
            log.info("the warm Spark started with other deep-storage settings: %s runs its own Spark", app_name)
            return None
        if not _speaks_grpc(ep.port):
            log.warning("port %d of the warm Spark does not answer gRPC: %s runs its own Spark", ep.port, app_name)
            return None
        url = ep.url
    mode_was_set = "SPARK_CONNECT_MODE_ENABLED" in os.environ
    try:
        from pyspark.sql import SparkSession  # lazy: only Spark code paths load pyspark

        # a builder of its own: SparkSession.builder is one object per process, and the remote URL left on
        # it would turn a later local session (the fallback) into a Connect one
        b = SparkSession.Builder().remote(url).appName(app_name)
        for k in RUNTIME_KEYS:
            if k in conf:
                b = b.config(k, conf[k])
        spark = b.create()
        if not settings.spark.connect_url:
            spark.release_session_on_close = False  # stop() closes this client; the session stays for the next job
        return spark
    except Exception as e:  # noqa: BLE001 - any failure to connect means: run locally, as without a server
        if not mode_was_set:  # pyspark marks the whole process as Connect's: the local fallback must not be
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        status = getattr(e, "getGrpcStatusCode", None) or getattr(e, "code", None)
        why = status() if callable(status) else (str(e).splitlines() or [""])[0][:200]
        log.warning("the warm Spark at %s did not take %s (%s: %s): it runs its own Spark", url.split(";")[0],
                    app_name, type(e).__name__, why)  # fmt: skip
        return None


def close_session(spark: SparkSession) -> None:
    """Close a job's client of the warm Spark (the server-side session stays for the next job), and take
    back pyspark's process-wide "this process speaks Spark Connect" mark, so a local session after it in
    the same process is a local one again."""
    try:
        spark.stop()
    finally:
        if "SPARK_REMOTE" not in os.environ:  # a process the user put in Connect mode stays in it
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
