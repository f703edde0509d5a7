#!/usr/bin/env python3
"""Submit a ``radctl`` command as a Spark application to the cluster named by ``spark.master`` — the
streaming job, compaction, … — with ``spark-submit`` (client mode; the rebuild has its own
``submit-rebuild.py``).

    deploy/spark/submit-radctl.py --config /etc/radstack/radstack.yaml -- stream -d ads
    deploy/spark/submit-radctl.py -- compact -d ads --runner spark
    deploy/spark/submit-radctl.py --dry-run -- stream -d ads      # print the command only

The command comes from :func:`batch.spark_submit.radctl_submit_command`: radstack's packages as
``--py-files``, deep-storage settings as ``--conf``, and for ``stream`` Spark's Kafka connector jars
(``.jvm/spark-kafka``) as ``--jars``. The settings file is passed on as ``RADSTACK_CONFIG``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # run from a checkout: the packages sit beside deploy/

from batch.spark_submit import is_cluster_master, radctl_submit_command, run_submit  # noqa: E402
from radstack.config import load_settings  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", "-c", help="radstack.yaml (default: $RADSTACK_CONFIG, ./radstack.yaml)")
    p.add_argument("--py-files", help="wheel/zip to ship (default: batch.py_files, else built)")
    p.add_argument("--spark-submit", default=os.environ.get("SPARK_SUBMIT", "spark-submit"))
    p.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    p.add_argument("radctl", nargs=argparse.REMAINDER, help="-- the radctl command and its options")
    a = p.parse_args(argv)
    args = a.radctl[1:] if a.radctl[:1] == ["--"] else a.radctl
    if not args:
        p.error("give the radctl command after --, e.g. -- stream -d ads")
    settings = load_settings(a.config)
    if not is_cluster_master(str(settings.spark.master or "")):
        print(f"spark.master is {settings.spark.master!r}: run `radctl {args[0]}` directly", file=sys.stderr)
        return 2
    cmd = radctl_submit_command(settings, args, py_files=a.py_files, spark_submit=a.spark_submit)
    if a.config:
        os.environ["RADSTACK_CONFIG"] = str(Path(a.config).resolve())
    return run_submit(cmd, dry_run=a.dry_run)


if __name__ == "__main__":
    raise SystemExit(main())
