"""The deep-storage registry (radstack/storage/deep_storage/backends/): one module per backend, one line
in BACKENDS, each entry owning its settings, load specs, Spark settings and Druid location (#52)."""

from __future__ import annotations

import subprocess
import sys
import typing
from pathlib import Path

import pytest

from radstack.config import DeepStorageSettings
from radstack.storage.deep_storage import DeepStorageError, fetch_load_spec, open_deep_storage
from radstack.storage.deep_storage.backends import BACKENDS, backend_for_load_spec, backend_named

ROOT = Path(__file__).resolve().parents[2]


def test_the_settings_name_exactly_the_registered_backends() -> None:
    names = typing.get_args(DeepStorageSettings.model_fields["type"].annotation)
    assert [b.type for b in BACKENDS] == list(names)
    assert len({t for b in BACKENDS for t in b.load_spec_types}) == sum(len(b.load_spec_types) for b in BACKENDS)


def test_building_spark_settings_loads_no_client_library() -> None:
    """The Airflow venv (no boto3, no hdfs, no pyarrow) imports batch/storage_conf.py for spark-submit."""
    code = ("import sys; from batch.storage_conf import storage_spark_conf; "
            "from radstack.config import DeepStorageSettings as D; "
            "c = storage_spark_conf(D(type='s3', bucket='b', endpoint_url='http://127.0.0.1:1')); "
            "assert c['spark.hadoop.fs.s3a.endpoint'] == 'http://127.0.0.1:1', c; "
            "assert storage_spark_conf(D(type='hdfs', hdfs_fs_url='hdfs://nn:9000'))"
            "['spark.hadoop.fs.defaultFS'] == 'hdfs://nn:9000'; "
            "assert storage_spark_conf(D(type='local', path='/x')) == {}; "
            "loaded = sorted(m for m in ('boto3', 'botocore', 'hdfs', 'requests', 'pyarrow') if m in sys.modules); "
            "assert not loaded, loaded")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_an_unknown_kind_is_a_deep_storage_error() -> None:
    with pytest.raises(DeepStorageError, match="unknown deep_storage.type 'ftp'"):
        backend_named("ftp")
    with pytest.raises(DeepStorageError, match="loadSpec type 'ftp'"):
        backend_for_load_spec({"type": "ftp"})
    with pytest.raises(DeepStorageError, match="loadSpec type 'ftp'"):
        fetch_load_spec({"type": "ftp"}, Path("/nonexistent"), DeepStorageSettings())


@pytest.mark.parametrize(("cfg", "message"), [
    ({"type": "local"}, "deep_storage.path is required"),
    ({"type": "s3"}, "deep_storage.bucket is required"),
    ({"type": "hdfs"}, "deep_storage.namenode_url"),
])
def test_each_backend_names_the_setting_it_misses(cfg: dict[str, str], message: str) -> None:
    with pytest.raises(DeepStorageError, match=message):
        open_deep_storage(cfg)


def test_each_backend_says_where_druid_reads_its_files() -> None:
    cfg = DeepStorageSettings(type="hdfs", hdfs_fs_url="hdfs://nn:9000/")
    cases = [({"type": "local", "path": "/d/seg/data.parquet"}, "/d/seg/data.parquet", {"type": "local", "files": ["x"]}),
             ({"type": "s3_zip", "bucket": "b", "key": "/p/k.zip"}, "s3://b/p/k.zip", {"type": "s3", "uris": ["x"]}),
             ({"type": "hdfs", "path": "/radstack/seg"}, "hdfs://nn:9000/radstack/seg", {"type": "hdfs", "paths": ["x"]})]
    for spec, location, source in cases:
        backend = backend_for_load_spec(spec)
        assert backend.druid_location(spec, cfg) == location
        assert backend.druid_input_source(["x"]) == source
    with pytest.raises(DeepStorageError, match="hdfs_fs_url is empty"):
        backend_named("hdfs").druid_location({"type": "hdfs", "path": "/radstack/seg"}, DeepStorageSettings())


def test_a_local_load_spec_below_a_hidden_folder_is_fetched(tmp_path: Path) -> None:
    """A local segment is read by its absolute path: ~/.radstack-like folders above it are not keys."""
    src = tmp_path / ".home" / "seg"
    (src / "sub").mkdir(parents=True)
    (src / "a.bin").write_bytes(b"a")
    (src / "sub" / "b.bin").write_bytes(b"b")
    (src / ".tmp-inflight").write_bytes(b"no")
    fetch_load_spec({"type": "local", "path": str(src)}, tmp_path / "out", DeepStorageSettings())
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file()) \
        == ["a.bin", "sub/b.bin"]
