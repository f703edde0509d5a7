"""Where the Spark driver's class-data sharing archive lives and the JVM options that use or dump it."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

import pytest

from radstack.jvm import (
    CLASS_SHARING_QUIET,
    class_sharing_archive,
    class_sharing_dump_options,
    class_sharing_options,
)
from radstack.pipeline.spark_session import driver_jvm_options


def test_no_archive_built_means_no_options(tmp_path: Path) -> None:
    # a SharedArchiveFile that does not exist would turn off the JDK's own default archive too
    assert class_sharing_options(tmp_path) == ""


def test_a_built_archive_is_offered_quietly(tmp_path: Path) -> None:
    path = class_sharing_archive(tmp_path)
    assert path is not None and path.parent == tmp_path / "cds" and path.name.startswith("spark-")
    path.parent.mkdir()
    path.write_bytes(b"x")
    assert class_sharing_options(tmp_path) == f"-XX:SharedArchiveFile={path} {CLASS_SHARING_QUIET}"
    assert "-Xlog:cds=off" in CLASS_SHARING_QUIET and "-Xlog:cds+dynamic=off" in CLASS_SHARING_QUIET


def test_the_archive_key_follows_the_spark_installation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    first = class_sharing_archive(tmp_path)
    assert class_sharing_archive(tmp_path) == first  # stable
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "other-spark"))
    assert class_sharing_archive(tmp_path) != first
    monkeypatch.delenv("SPARK_HOME")
    assert class_sharing_archive(tmp_path) == first
    real = importlib.util.find_spec

    def elsewhere(name: str, *args: object) -> object:  # the same PySpark in another virtualenv
        spec = real(name, *args)
        if name == "pyspark" and spec is not None:
            spec = importlib.machinery.ModuleSpec(name, None, origin=str(tmp_path / "venv2" / "pyspark" / "__init__.py"))
        return spec

    monkeypatch.setattr(importlib.util, "find_spec", elsewhere)
    assert class_sharing_archive(tmp_path) != first


def test_no_jdk_no_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert class_sharing_archive(tmp_path) is None
    assert class_sharing_options(tmp_path) == ""


def test_driver_options(tmp_path: Path) -> None:
    log = tmp_path / "log4j2.properties"
    archive = class_sharing_archive(tmp_path)
    assert archive is not None
    assert "SharedArchiveFile" not in driver_jvm_options(log, "-Xmx1g", tmp_path)  # not built yet
    archive.parent.mkdir()
    archive.write_bytes(b"x")
    opts = driver_jvm_options(log, "-Xmx1g", tmp_path)
    assert opts.startswith(f"-Dlog4j2.configurationFile=file:{log} ")  # radstack's own first
    assert f"-XX:SharedArchiveFile={archive}" in opts and opts.endswith(" -Xmx1g")
    assert "SharedArchiveFile" not in driver_jvm_options(log, "-Xmx1g", tmp_path, class_sharing=False)
    dump = driver_jvm_options(log, class_sharing_dump_options(tmp_path / "new.jsa"), tmp_path)
    assert f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}" in dump and "SharedArchiveFile" not in dump
