"""The JVM components fetched from Maven Central (``deploy/jvm/pom.xml`` → ``.jvm/<module>/``).

Modules: ``kafka`` (the Apache Kafka broker), ``spark-kafka`` (Spark's Kafka connector for
``spark.jars``), ``hadoop`` (NameNode/DataNode for a single-node HDFS). ``make jvm`` fetches them;
:func:`ensure_fetched` does the same on demand for a process started outside ``make``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
POM = REPO_ROOT / "deploy" / "jvm" / "pom.xml"
DEFAULT_DIR = REPO_ROOT / ".jvm"


class JvmError(RuntimeError):
    """A JVM component is missing and cannot be fetched."""


def module_dir(module: str, jvm_dir: Path | None = None) -> Path:
    return (jvm_dir or DEFAULT_DIR) / module


def ensure_fetched(module: str, jvm_dir: Path | None = None) -> Path:
    """The folder of ``module``'s jars, running Maven once if it is empty."""
    d = module_dir(module, jvm_dir)
    if d.is_dir() and any(d.glob("*.jar")):
        return d
    if not POM.exists():
        raise JvmError(f"{d} has no jars and {POM} is not there to fetch them; run `make jvm`")
    if shutil.which("mvn") is None:
        raise JvmError("Maven (mvn) is not installed; run `make jvm` (it installs it from Debian)")
    subprocess.run(
        ["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies"],
        check=True,
        cwd=REPO_ROOT,
    )
    if not any(d.glob("*.jar")):
        raise JvmError(f"Maven ran but {d} still has no jars")
    return d


def jars(module: str, jvm_dir: Path | None = None) -> list[Path]:
    return sorted(ensure_fetched(module, jvm_dir).glob("*.jar"))


def classpath(module: str, jvm_dir: Path | None = None) -> str:
    """A ``java -cp`` value for ``module`` (a wildcard, so the command line stays short)."""
    return str(ensure_fetched(module, jvm_dir) / "*")


def java_bin() -> str:
    java = shutil.which("java")
    if java is None:
        raise JvmError("java is not installed; run `make jvm` (it installs OpenJDK 17 from Debian)")
    return java
