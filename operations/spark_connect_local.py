"""The warm Spark of ``radctl up`` (``spark.connect_server``): Spark's Connect server, started with the
settings every radstack batch session has (:func:`radstack.pipeline.spark_session.session_conf`, the deep
storage's Spark settings included), on 127.0.0.1:{spark.connect_port}, with a token generated at every
start. The rebuilds find it through :func:`radstack.pipeline.spark_connect.connect_session`."""

from __future__ import annotations

from batch.storage_conf import storage_spark_conf
from radstack.config import Settings
from radstack.pipeline.spark_connect import (
    new_endpoint,
    read_endpoint,
    server_command,
    server_environment,
    write_server_properties,
)
from radstack.pipeline.spark_session import session_conf

__all__ = ["prepare", "command", "environment", "enabled", "server_conf"]


def server_conf(settings: Settings) -> dict[str, str]:
    # the class-data sharing archive is made for the driver pyspark launches, not spark-submit's (another
    # class path); the server starts once, so it goes without
    return session_conf(settings, kafka=False, log_name="spark-connect", class_sharing=False,
                        extra_conf=storage_spark_conf(settings.deep_storage, settings.jvm_dir))  # fmt: skip


def enabled(settings: Settings) -> bool:
    return bool(settings.spark.connect_server) and not settings.spark.connect_url


def prepare(settings: Settings) -> None:
    """A new token and session id (the endpoint file) and the server's properties file, both 0600."""
    conf = server_conf(settings)
    write_server_properties(settings, conf, new_endpoint(settings, conf))


def command(settings: Settings) -> list[str]:
    return server_command(settings)


def environment(settings: Settings) -> dict[str, str]:
    ep = read_endpoint(settings)
    if ep is None:  # prepare() writes it; only a file removed in between gets here
        raise RuntimeError("the warm Spark's endpoint file is missing: run `radctl up` again")
    return server_environment(ep)
