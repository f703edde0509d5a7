"""The JVM components fetched from Maven Central (``deploy/jvm/pom.xml`` → ``.jvm/<module>/``).

Modules: ``kafka`` (the Apache Kafka broker), ``spark-kafka`` (Spark's Kafka connector for
``spark.jars``), ``hadoop`` (NameNode/DataNode for a single-node HDFS). ``make jvm`` fetches them;
:func:`ensure_fetched` does the same on demand for a process started outside ``make``.

Also where the Spark driver's class-data sharing archive lives (:func:`class_sharing_archive`, built by
``operations.class_sharing_build``) and the JVM options that use or dump it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
from importlib import metadata
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


# ---- class-data sharing (CDS) for the Spark driver ---------------------------------------------

CLASS_SHARING_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""Without these the JVM warns on every start whose archive it cannot use (another JDK build, another
class path) — it then simply runs without it; and while dumping it lists every class it leaves out."""


def spark_java() -> Path | None:
    """The ``java`` Spark's launcher runs (``$JAVA_HOME/bin/java``, else the first on ``PATH``), resolved."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(os.path.realpath(java)) if java and os.path.exists(java) else None


def class_sharing_archive(jvm_dir: Path | None = None) -> Path | None:
    """The class-data sharing archive for the JDK Spark runs on and the installed PySpark (its jars are
    the driver's class path): ``<jvm dir>/cds/spark-<key>.jsa``, whether it exists or not; None without
    a JDK. The key changes with the JDK's ``libjvm.so``, PySpark's version and place, and ``SPARK_HOME``, so an
    archive is never offered to a JVM it was not made for (and the JVM checks again: a mismatch only
    turns sharing off)."""
    java = spark_java()
    if java is None:
        return None
    libjvm = java.parent.parent / "lib" / "server" / "libjvm.so"
    st = libjvm.stat() if libjvm.exists() else java.stat()
    try:
        pyspark = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        pyspark = ""
    found = importlib.util.find_spec("pyspark")  # where its jars are: another virtualenv, another class path
    where = os.path.dirname(found.origin) if found is not None and found.origin else ""
    ident = f"{java}|{st.st_size}|{st.st_mtime_ns}|{pyspark}|{where}|{os.environ.get('SPARK_HOME', '')}"
    key = hashlib.sha256(ident.encode()).hexdigest()[:16]
    return (jvm_dir or DEFAULT_DIR) / "cds" / f"spark-{key}.jsa"


def class_sharing_options(jvm_dir: Path | None = None) -> str:
    """JVM options that map the archive into the driver (about 3 s less per Spark start, measured in
    docs/benchmarks.md); empty when it has not been built (a missing archive given to the JVM would
    turn off the JDK's own default archive too)."""
    path = class_sharing_archive(jvm_dir)
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {CLASS_SHARING_QUIET}"


def class_sharing_dump_options(path: Path) -> str:
    """JVM options that write, when the JVM exits, every class it loaded (beyond the JDK's default
    archive) into the archive ``path``."""
    return f"-XX:ArchiveClassesAtExit={path} {CLASS_SHARING_QUIET}"
