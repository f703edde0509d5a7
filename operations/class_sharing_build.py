"""Build the Spark driver's class-data sharing archive (``make jvm``; ``python -m operations.class_sharing_build``).

A JVM that starts from a class-data sharing (CDS) archive maps the classes it lists already parsed and
verified instead of loading them from the jars: Spark's driver starts in ≈3 s instead of ≈5 s here and its
first query runs ≈1.3 s sooner (docs/benchmarks.md). The archive is written by a training run — a child
process that starts Spark with :func:`radstack.jvm.class_sharing_dump_options`, rebuilds one hour of
generated ``ads`` impressions through the real batch job (:mod:`operations.training_job`: the archive
read as the archiver wrote it, validation, the rollup shuffle and sort, the Arrow writer on the
executors, the publish) and exits; the JVM then writes every class it loaded. The archive goes to a temporary name and is renamed into place only after the JVM
exited cleanly, so a Spark start never sees half an archive. Sessions pick it up through
:func:`radstack.pipeline.spark_session.build_spark_session`; a JVM it does not fit (another JDK build,
another class path) just runs without it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from radstack.config import load_settings
from radstack.jvm import REPO_ROOT, class_sharing_archive, class_sharing_dump_options

__all__ = ["build_archive", "train"]

def build_archive(jvm_dir: Path | None = None, *, force: bool = False, timeout: float = 600.0) -> Path | None:
    """Build the archive for this JDK and PySpark unless it is there (``force``: build it again); returns
    its path (None without a JDK)."""
    target = class_sharing_archive(jvm_dir)
    if target is None or (target.is_file() and not force):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        subprocess.run([sys.executable, "-m", "operations.class_sharing_build", "--train", str(tmp)],
                       check=True, cwd=REPO_ROOT, timeout=timeout)  # fmt: skip
        if not tmp.is_file() or tmp.stat().st_size == 0:
            raise RuntimeError(f"the training JVM exited without writing {tmp}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    for old in target.parent.glob("spark-*.jsa"):  # archives of a former JDK or PySpark
        if old != target:
            old.unlink(missing_ok=True)
    return target


def train(dump_to: Path) -> None:
    """The training run (in its own process: the archive is written when its JVM exits)."""
    from pyspark import SparkContext  # lazy: the build process itself needs no Spark

    from operations.training_job import rebuild_generated_hour
    from radstack.pipeline.spark_session import build_spark_session

    settings = load_settings(env={"RADSTACK_HOME": tempfile.mkdtemp(prefix="radstack-cds-")})
    proc = None
    try:
        spark = build_spark_session(settings, app_name="radstack-cds-training", kafka=False, log_name="cds",
                                    java_options=class_sharing_dump_options(dump_to))  # fmt: skip
        proc = getattr(SparkContext._gateway, "proc", None)  # type: ignore[attr-defined]
        rebuild_generated_hour(spark)
        spark.stop()
    except BaseException:
        if proc is not None:  # a failed training run leaves no archive: the JVM must not get to dump one
            proc.kill()
            proc.wait()
        raise
    finally:
        shutil.rmtree(settings.home, ignore_errors=True)
    if proc is not None:  # the JVM exits when its stdin closes, and dumps the archive on its way out
        proc.stdin.close()
        proc.wait(timeout=300)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="build it again even if it is there")
    ap.add_argument("--train", type=Path, help=argparse.SUPPRESS)  # the child process
    a = ap.parse_args(argv)
    if a.train:
        train(a.train)
        return 0
    t = time.monotonic()
    path = build_archive(load_settings().jvm_dir, force=a.force)
    if path is None:
        print("no JDK found: nothing to build", file=sys.stderr)
        return 1
    print(f"class-data sharing archive: {path} ({path.stat().st_size / 1e6:.0f} MB, {time.monotonic() - t:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
