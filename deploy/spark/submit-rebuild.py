#!/usr/bin/env python3
"""Submit one batch rebuild to the Spark cluster named by ``spark.master`` (``spark://…``, ``yarn``,
``k8s://…``) with ``spark-submit``, the radstack packages shipped as ``--py-files``.

    deploy/spark/submit-rebuild.py --config /etc/radstack/radstack.yaml -d ads -i 2026-01-01T00/PT1H
    deploy/spark/submit-rebuild.py ... --dry-run      # print the command only

The command comes from :func:`batch.spark_submit.spark_submit_command` (the same one the Airflow DAG
uses): ``--py-files`` is ``batch.py_files`` (build it with ``deploy/spark/build-package.sh``) or a zip
built from this checkout; deep-storage settings (``s3a`` endpoint, ``fs.defaultFS``) and jars come from
the same ``deep_storage`` keys the services read.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # run from a checkout: the packages sit beside deploy/

from batch.spark_submit import is_cluster_master, run_submit, spark_submit_command  # noqa: E402
from radstack.config import load_settings  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", "-c", help="radstack.yaml (default: $RADSTACK_CONFIG, ./radstack.yaml)")
    p.add_argument("--datasource", "-d", required=True)
    p.add_argument("--interval", "-i", required=True, help="ISO interval, START/END or START/PERIOD")
    p.add_argument("--force", action="store_true", help="rebuild even if the interval is not closed")
    p.add_argument("--py-files", help="wheel/zip to ship (default: batch.py_files, else built)")
    p.add_argument("--spark-submit", default=os.environ.get("SPARK_SUBMIT", "spark-submit"))
    p.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    a = p.parse_args(argv)

    settings = load_settings(a.config)
    master = str(settings.spark.master or "")
    if not is_cluster_master(master):
        print(f"spark.master is {master!r}: a local master runs the rebuild in-process; "
              "use `radctl backfill --via local` instead", file=sys.stderr)
        return 2
    cmd = spark_submit_command(settings, a.datasource, a.interval, force=a.force, config_file=a.config,
                               py_files=a.py_files, spark_submit=a.spark_submit)
    return run_submit(cmd, dry_run=a.dry_run)


if __name__ == "__main__":
    raise SystemExit(main())
