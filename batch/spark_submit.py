"""Running the rebuild on a Spark cluster: the ``spark-submit`` command (and SparkSubmitOperator kwargs).

The driver runs ``batch/rebuild_job.py``; the executors need radstack's Python packages, shipped as one
zip (``--py-files``) built from this checkout by :func:`build_package` (or ``batch.py_files`` when set:
a wheel or zip built elsewhere). Settings come from the same ``radstack.yaml`` (``--config``), so the
cluster reads the same metadata store and deep storage; deep-storage Spark settings (``s3a`` endpoint,
``fs.defaultFS``) and the ``hadoop-aws`` jars are added as ``--conf`` / ``--jars``.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from batch.storage_conf import storage_spark_conf
from radstack.config import Settings

__all__ = ["PACKAGES", "REPO_ROOT", "is_cluster_master", "build_package", "submit_args", "spark_submit_command"]

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("radstack", "realtime", "batch", "serving")
APPLICATION = REPO_ROOT / "batch" / "rebuild_job.py"


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
    conf = {str(k): str(v) for k, v in dict(settings.spark.conf or {}).items()}
    storage_conf = storage_spark_conf(settings.deep_storage, settings.jvm_dir)
    jars = storage_conf.pop("spark.jars", "")
    conf.update(storage_conf)
    conf.setdefault("spark.sql.shuffle.partitions", str(settings.spark.shuffle_partitions))
    conf.setdefault("spark.sql.session.timeZone", "UTC")
    conf.setdefault("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    if py_files is None:
        py_files = str(settings.batch.py_files or "") or str(build_package(settings.home / "dist"))
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


def spark_submit_command(settings: Settings, datasource: str, interval: str, *, force: bool = False,
                         config_file: str | None = None, py_files: str | None = None,
                         spark_submit: str = "spark-submit") -> list[str]:  # fmt: skip
    """The full ``spark-submit`` command line for one rebuild on ``spark.master``."""
    a = submit_args(settings, datasource, interval, force=force, config_file=config_file, py_files=py_files)
    cmd = [spark_submit, "--master", str(settings.spark.master or "local[*]"),
           "--deploy-mode", a["deploy_mode"], "--name", a["name"], "--driver-memory", a["driver_memory"],
           "--py-files", a["py_files"]]  # fmt: skip
    if a["jars"]:
        cmd += ["--jars", a["jars"]]
    for k, v in sorted(a["conf"].items()):
        cmd += ["--conf", f"{k}={v}"]
    return [*cmd, a["application"], *a["application_args"]]
