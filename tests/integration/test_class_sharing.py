"""The class-data sharing archive, built by its real training run and mapped by a real Spark driver."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from operations.class_sharing_build import build_archive
from radstack.jvm import REPO_ROOT, class_sharing_archive

pytestmark = pytest.mark.slow

SESSION = textwrap.dedent("""
    import sys
    from radstack.config import load_settings
    from radstack.pipeline.spark_session import build_spark_session
    settings = load_settings(env={"RADSTACK_HOME": sys.argv[1]},
                             overrides={"jvm": {"dir": sys.argv[2], "class_sharing": sys.argv[3] == "on"}})
    spark = build_spark_session(settings, kafka=False, java_options=f"-Xlog:class+load=info:file={sys.argv[4]}")
    assert spark.range(10).count() == 10
    spark.stop()
""")


def _class_sources(tmp_path: Path, jvm_dir: Path, sharing: str) -> dict[str, str]:
    log = tmp_path / f"classes-{sharing}.log"
    home = tmp_path / f"home-{sharing}"
    out = subprocess.run([sys.executable, "-c", SESSION, str(home), str(jvm_dir), sharing, str(log)],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "cds" not in out.stdout.lower() and "[warning]" not in out.stdout  # quiet, even when dumping
    sources = {}
    for line in log.read_text().splitlines():  # "[…][info][class,load] org.x.Y source: …"
        name, _, source = line.partition(" source: ")
        sources[name.rsplit(" ", 1)[-1]] = source
    return sources


def test_the_training_run_builds_an_archive_the_driver_maps(tmp_path: Path) -> None:
    jvm_dir = tmp_path / "jvm"
    stale = jvm_dir / "cds" / "spark-0000000000000000.jsa"  # a former JDK's or PySpark's
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    path = build_archive(jvm_dir)
    assert path == class_sharing_archive(jvm_dir) and path is not None
    assert path.stat().st_size > 10_000_000 and not stale.exists()
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    mtime = path.stat().st_mtime_ns
    assert build_archive(jvm_dir) == path and path.stat().st_mtime_ns == mtime  # built once

    shared = _class_sources(tmp_path, jvm_dir, "on")
    # Spark's classes that come from a file (lambdas and generated code are defined at run time)
    spark_classes = {c: s for c, s in shared.items() if c.startswith("org.apache.spark.")
                     and (s.endswith(".jar") or s.startswith("shared objects file"))}  # fmt: skip
    from_archive = [c for c, s in spark_classes.items() if s == "shared objects file (top)"]
    assert "org.apache.spark.sql.SparkSession" in from_archive
    assert len(from_archive) > 0.9 * len(spark_classes), (len(from_archive), len(spark_classes))

    plain = _class_sources(tmp_path, jvm_dir, "off")
    assert plain["org.apache.spark.sql.SparkSession"].endswith(".jar")
    assert not any(s == "shared objects file (top)" for s in plain.values())


def test_a_start_without_the_archive_is_silent_and_works(tmp_path: Path) -> None:
    assert not (tmp_path / "cds").exists()
    sources = _class_sources(tmp_path, tmp_path, "on")
    assert sources["org.apache.spark.sql.SparkSession"].endswith(".jar")
    assert os.path.isdir(tmp_path / "home-on")
