"""The warm Spark's endpoint and command line (radstack/pipeline/spark_connect.py): the token only in 0600
files and the environment, never in a process list; a job falls back to its own Spark whenever the server
cannot be its Spark (not running, switched off, another deep storage) without trying to connect."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from radstack.config import load_settings
from radstack.pipeline import spark_connect
from radstack.pipeline.spark_connect import (
    connect_session,
    endpoint_file,
    new_endpoint,
    read_endpoint,
    server_command,
    server_environment,
    write_server_properties,
)

SECRET = "AKIA-not-for-ps"


def _settings(home: Path, **env: str):  # type: ignore[no-untyped-def]
    return load_settings(env={"RADSTACK_HOME": str(home), **env})


@pytest.fixture
def listener() -> Iterator[int]:
    """A port something listens on (what a job sees of a running server before it talks to it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_the_endpoint_is_the_owners_only_and_reads_back(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    conf = {"spark.hadoop.fs.s3a.secret.key": SECRET, "spark.sql.shuffle.partitions": "4", "spark.jars": "a.jar"}
    ep = new_endpoint(settings, conf)
    f = endpoint_file(settings)
    assert f.stat().st_mode & 0o777 == 0o600
    assert read_endpoint(settings) == ep
    assert ep.conf == {"spark.hadoop.fs.s3a.secret.key": SECRET, "spark.jars": "a.jar"}  # the static ones only
    assert uuid.UUID(ep.session).version == 4 and len(ep.token) >= 32
    assert ep.url == f"sc://localhost:{settings.spark.connect_port}/;token={ep.token};session_id={ep.session}"
    assert new_endpoint(settings, conf).token != ep.token  # a new token at every start
    f.write_text("{not json")
    assert read_endpoint(settings) is None


def test_the_command_line_holds_no_secret(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    conf = {"spark.hadoop.fs.s3a.secret.key": SECRET, "spark.executor.extraJavaOptions": "-Da=1\n-Db=c:\\d"}
    ep = new_endpoint(settings, conf)
    props = write_server_properties(settings, conf, ep)
    argv, env = server_command(settings), server_environment(ep)
    assert SECRET not in " ".join(argv) and ep.token not in " ".join(argv)
    assert env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] == ep.token and env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert Path(argv[argv.index("--properties-file") + 1]) == props
    assert props.stat().st_mode & 0o777 == 0o600
    lines = dict(ln.split(" ", 1) for ln in props.read_text().splitlines())
    assert lines["spark.hadoop.fs.s3a.secret.key"] == SECRET
    assert lines["spark.executor.extraJavaOptions"] == "-Da=1\\n-Db=c:\\\\d"  # one property line, escaped
    assert lines["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert lines["spark.connect.grpc.binding.port"] == str(ep.port)
    assert argv[-3:] == ["--class", spark_connect.SERVER_CLASS, "spark-internal"]


def _never_connects(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyspark.sql

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("connect_session tried to connect")

    monkeypatch.setattr(pyspark.sql.SparkSession, "Builder", refuse)


def test_no_server_no_connect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listener: int) -> None:
    _never_connects(monkeypatch)
    conf = {"spark.hadoop.fs.defaultFS": "hdfs://nn:8020"}
    # no endpoint file
    assert connect_session(_settings(tmp_path), app_name="t", conf=conf) is None
    # an endpoint whose port nobody listens on (a server that died)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    new_endpoint(_settings(tmp_path, RADSTACK_SPARK__CONNECT_PORT=str(dead)), conf)
    assert connect_session(_settings(tmp_path, RADSTACK_SPARK__CONNECT_PORT=str(dead)), app_name="t", conf=conf) is None
    # listening, but started for another deep storage
    live = _settings(tmp_path, RADSTACK_SPARK__CONNECT_PORT=str(listener))
    new_endpoint(live, {"spark.hadoop.fs.defaultFS": "hdfs://other:8020"})
    assert connect_session(live, app_name="t", conf=conf) is None
    # listening, the same storage, but switched off in the settings
    new_endpoint(live, conf)
    off = _settings(tmp_path, RADSTACK_SPARK__CONNECT_PORT=str(listener), RADSTACK_SPARK__CONNECT_SERVER="false")
    assert connect_session(off, app_name="t", conf=conf) is None
    assert json.loads(endpoint_file(live).read_text())["conf"] == conf


def test_a_port_that_speaks_no_grpc_is_given_up_quickly(tmp_path: Path, listener: int) -> None:
    """Something accepts connections but never answers (Spark's client would retry for minutes)."""
    import time

    settings = _settings(tmp_path, RADSTACK_SPARK__CONNECT_PORT=str(listener))
    new_endpoint(settings, {})
    t0 = time.monotonic()
    assert connect_session(settings, app_name="t", conf={}) is None
    assert time.monotonic() - t0 < 10


def test_a_server_that_refuses_leaves_the_process_local(tmp_path: Path) -> None:
    """A gRPC server that is not Spark Connect: the job gets None, and pyspark's process-wide Connect mark
    is taken back (a local session after it must be a local one)."""
    import os
    from concurrent import futures

    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_secure_port("127.0.0.1:0", grpc.local_server_credentials(grpc.LocalConnectionType.LOCAL_TCP))
    server.start()
    settings = _settings(tmp_path, RADSTACK_SPARK__CONNECT_PORT=str(port))
    new_endpoint(settings, {})
    before = os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    try:
        assert spark_connect._speaks_grpc(port)
        assert connect_session(settings, app_name="t", conf={}) is None
        assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ
    finally:
        server.stop(0)
        if before is not None:
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = before
