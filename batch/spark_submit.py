"""Running radstack's Spark jobs on a cluster: the ``spark-submit`` commands (and SparkSubmitOperator kwargs).

The rebuild's driver runs ``batch/rebuild_job.py``; any other job — the streaming job, compaction — is
submitted as its ``radctl`` command, whose driver is ``deploy/spark/radctl_app.py`` (:func:`radctl_submit_command`).
The executors need radstack's Python packages, shipped as one zip (``--py-files``) built from this
checkout by :func:`build_package` (or ``batch.py_files`` when set: a wheel or zip built elsewhere).
Settings come from the same ``radstack.yaml`` (``--config``), so the cluster reads the same metadata
store and deep storage; deep-storage Spark settings (``s3a`` endpoint, ``fs.defaultFS``) and the
``hadoop-aws`` jars are added as ``--conf`` / ``--jars``; the streaming job also gets Spark's Kafka
connector jars as ``--jars``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

from batch.storage_conf import storage_spark_conf
from radstack.config import Settings
from radstack.jvm import jars as jvm_jars

__all__ = ["PACKAGES", "REPO_ROOT", "is_cluster_master", "build_package", "submit_args", "spark_submit_command",
           "radctl_submit_command", "run_submit"]

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("radstack", "realtime", "batch", "serving")
APPLICATION = REPO_ROOT / "batch" / "rebuild_job.py"
RADCTL_APPLICATION = REPO_ROOT / "deploy" / "spark" / "radctl_app.py"
#: radctl commands whose driver reads Kafka through Spark's connector (its jars go out with --jars)
KAFKA_COMMANDS = ("stream",)


def is_cluster_master(master: str | None) -> bool:
    """``local``/``local[*]``/``local[4]`` run embedded; anything else (``spark://``, ``yarn``, ``k8s://``)
    is a cluster."""
    m = (master or "local[*]").strip().lower()
    return not (m == "local" or m.startswith("local["))


def build_package(out_dir: Path) -> Path:
    """``radstack-py.zip`` with the Python packages the executors import (sources + package data)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "radstack-py.zip"
    tmp = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for pkg in PACKAGES:
            for f in sorted((REPO_ROOT / pkg).rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".yaml", ".json", ".html", ".js", ".css"):
                    zf.write(f, f.relative_to(REPO_ROOT).as_posix())
    tmp.replace(target)
    return target


def _common(settings: Settings, py_files: str | None) -> tuple[dict[str, str], str, str]:
    """Spark conf, extra jars (comma-separated) and the ``--py-files`` value every submission shares."""
    conf = {str(k): str(v) for k, v in dict(settings.spark.conf or {}).items()}
    storage_conf = storage_spark_conf(settings.deep_storage, settings.jvm_dir)
    jars = storage_conf.pop("spark.jars", "")
    conf.update(storage_conf)
    conf.setdefault("spark.sql.shuffle.partitions", str(settings.spark.shuffle_partitions))
    conf.setdefault("spark.sql.session.timeZone", "UTC")
    conf.setdefault("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    if py_files is None:
        py_files = str(settings.batch.py_files or "") or str(build_package(settings.home / "dist"))
    return conf, jars, py_files


def submit_args(
    settings: Settings,
    datasource: str,
    interval: str,
    *,
    force: bool = False,
    config_file: str | None = None,
    py_files: str | None = None,
) -> dict[str, Any]:
    """What SparkSubmitOperator takes (``application``, ``application_args``, ``conf``, ``jars``,
    ``py_files``, ``name``, ``deploy_mode``); :func:`spark_submit_command` renders it as a command."""
    conf, jars, py_files = _common(settings, py_files)
    args = ["--datasource", datasource, "--interval", interval]
    cfg = config_file or (str(settings.source) if settings.source else None)
    if cfg:
        args += ["--config", cfg]
    if force:
        args.append("--force")
    return {
        "application": str(APPLICATION),
        "application_args": args,
        "conf": conf,
        "jars": jars or None,
        "py_files": py_files,
        "name": f"radstack-rebuild-{datasource}",
        "deploy_mode": str(settings.batch.deploy_mode or "client"),
        "driver_memory": str(settings.spark.driver_memory or "2g"),
    }


def _render(settings: Settings, a: dict[str, Any], spark_submit: str) -> list[str]:
    cmd = [spark_submit, "--master", str(settings.spark.master or "local[*]"),
           "--deploy-mode", a["deploy_mode"], "--name", a["name"], "--driver-memory", a["driver_memory"],
           "--py-files", a["py_files"]]  # fmt: skip
    if a["jars"]:
        cmd += ["--jars", a["jars"]]
    for k, v in sorted(a["conf"].items()):
        cmd += ["--conf", f"{k}={v}"]
    return [*cmd, a["application"], *a["application_args"]]


def radctl_submit_command(settings: Settings, radctl_args: list[str], *, py_files: str | None = None,
                          spark_submit: str = "spark-submit") -> list[str]:  # fmt: skip
    """``spark-submit … deploy/spark/radctl_app.py ARGS``: ``radctl ARGS`` (e.g. ``stream -d ads``,
    ``compact -d ads --runner spark``) as the driver of an application on ``spark.master``; the job's
    own Spark session joins the one spark-submit started. Client mode (the driver keeps the command's
    terminal, logs and signals)."""
    if not radctl_args:
        raise ValueError("which radctl command? e.g. stream -d ads")
    conf, jars, py_files = _common(settings, py_files)
    if radctl_args[0] in KAFKA_COMMANDS:
        kafka = ",".join(str(p) for p in jvm_jars("spark-kafka", settings.jvm_dir))
        jars = ",".join(j for j in (jars, kafka) if j)
    a = {"application": str(RADCTL_APPLICATION), "application_args": list(radctl_args), "conf": conf,
         "jars": jars or None, "py_files": py_files, "name": f"radctl-{radctl_args[0]}", "deploy_mode": "client",
         "driver_memory": str(settings.spark.driver_memory or "2g")}  # fmt: skip
    return _render(settings, a, spark_submit)


def spark_submit_command(settings: Settings, datasource: str, interval: str, *, force: bool = False,
                         config_file: str | None = None, py_files: str | None = None,
                         spark_submit: str = "spark-submit") -> list[str]:  # fmt: skip
    """The full ``spark-submit`` command line for one rebuild on ``spark.master``."""
    a = submit_args(settings, datasource, interval, force=force, config_file=config_file, py_files=py_files)
    return _render(settings, a, spark_submit)


def run_submit(cmd: list[str], *, dry_run: bool = False) -> int:
    """What deploy/spark's wrappers do with a command: print it (``dry_run``), or replace this process
    with it; 2 when ``spark-submit`` is not found."""
    if dry_run:
        print(shlex.join(cmd))
        return 0
    if shutil.which(cmd[0]) is None:
        print(f"{cmd[0]} not found; set SPARK_SUBMIT or put Spark's bin/ on PATH", file=sys.stderr)
        return 2
    os.execvp(cmd[0], cmd)
    return 1  # not reached
