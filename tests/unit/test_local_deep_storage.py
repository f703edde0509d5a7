"""Fast tests of the local deep storage and of ``open_deep_storage`` / ``fetch_load_spec``.
(The shared behaviour suite, run against local, S3 and HDFS, is tests/integration/test_deep_storage.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from radstack.config import load_settings
from radstack.storage.deep_storage import DeepStorageError, fetch_load_spec, normalize_key, open_deep_storage
from radstack.storage.deep_storage.hdfs import HdfsDeepStorage
from radstack.storage.deep_storage.local import LocalDeepStorage
from radstack.storage.deep_storage.s3 import S3DeepStorage


def test_default_settings_open_local_storage_under_home(settings, radstack_home: Path) -> None:  # type: ignore[no-untyped-def]
    storage = open_deep_storage(settings)
    assert isinstance(storage, LocalDeepStorage)
    assert storage.root == (radstack_home / "deep-storage").resolve()
    storage.put_bytes(b"x", "segments/a")
    assert (radstack_home / "deep-storage" / "segments" / "a").read_bytes() == b"x"


def test_open_from_mappings_and_env(tmp_path: Path) -> None:
    s3 = open_deep_storage({"type": "s3", "bucket": "b", "path": "p/q", "endpoint_url": "http://127.0.0.1:1"})
    assert isinstance(s3, S3DeepStorage)
    assert s3.uri("raw/x") == "s3a://b/p/q/raw/x"
    assert s3.load_spec("raw/x") == {"type": "s3", "bucket": "b", "key": "p/q/raw/x"}
    hdfs = open_deep_storage(
        {
            "deep_storage": {
                "type": "hdfs",
                "namenode_url": "http://nn:9870",
                "hdfs_fs_url": "hdfs://nn:8020",
                "path": "/druid/",
            }
        }
    )
    assert isinstance(hdfs, HdfsDeepStorage)
    assert hdfs.uri("segments/ds") == "hdfs://nn:8020/druid/segments/ds"
    assert (
        hdfs.key_for_load_spec({"type": "hdfs", "path": "hdfs://nn:8020/druid/segments/ds/0"})
        == "segments/ds/0"
    )
    with pytest.raises(DeepStorageError):
        hdfs.key_for_load_spec({"type": "hdfs", "path": "hdfs://nn:8020/elsewhere/x"})
    no_fs = open_deep_storage({"type": "hdfs", "namenode_url": "http://nn:9870"})
    assert no_fs.uri("a") == "webhdfs://nn:9870/radstack/a"
    env = {
        "RADSTACK_HOME": str(tmp_path),
        "RADSTACK_DEEP_STORAGE__TYPE": "s3",
        "RADSTACK_DEEP_STORAGE__BUCKET": "bk",
    }
    from_env = open_deep_storage(load_settings(env=env))
    assert isinstance(from_env, S3DeepStorage) and from_env.bucket == "bk"


@pytest.mark.parametrize(
    "cfg",
    [{"type": "gcs"}, {"type": "s3"}, {"type": "hdfs", "path": "/x"}, {"type": "local", "path": ""}],
)
def test_open_rejects_incomplete_settings(cfg: dict[str, str]) -> None:
    with pytest.raises(DeepStorageError):
        open_deep_storage(cfg)


def test_normalize_key() -> None:
    assert normalize_key("/a/b/") == "a/b"
    assert normalize_key("", allow_empty=True) == ""
    for bad in ["", "a/../b", "a/./b", "a\\b", ".x", "a/.x.tmp"]:
        with pytest.raises(DeepStorageError):
            normalize_key(bad)


def test_temp_files_of_a_crashed_writer_are_invisible(tmp_path: Path) -> None:
    storage = LocalDeepStorage(tmp_path)
    storage.put_bytes(b"ok", "segments/ds/0/data.parquet")
    # what a writer killed between write and rename leaves behind
    (tmp_path / "segments/ds/0/.descriptor.json.0123456789ab.tmp").write_bytes(b"{partial")
    (tmp_path / "segments/.staging.abc.tmp").mkdir()
    (tmp_path / "segments/.staging.abc.tmp/data.parquet").write_bytes(b"x")
    assert storage.list("") == ["segments/ds/0/data.parquet"]
    assert storage.list_dirs("segments") == ["segments/ds"]
    assert not storage.exists("segments/ds/0/descriptor.json")


def test_failed_upload_leaves_nothing(tmp_path: Path) -> None:
    storage = LocalDeepStorage(tmp_path / "deep")
    with pytest.raises(FileNotFoundError):
        storage.put_file(tmp_path / "no-such-file", "segments/x")
    assert storage.list("") == []
    with pytest.raises(IsADirectoryError):
        storage.put_file(tmp_path, "segments/x")  # reading a folder fails after the temp file exists
    assert [p.name for p in (tmp_path / "deep" / "segments").iterdir()] == []


def test_put_replaces_atomically_with_a_new_inode(tmp_path: Path) -> None:
    storage = LocalDeepStorage(tmp_path)
    storage.put_bytes(b"v1", "k/f")
    with (tmp_path / "k/f").open("rb") as reader:  # a reader holding the old file keeps the old bytes
        storage.put_bytes(b"v2-longer", "k/f")
        assert reader.read() == b"v1"
    assert storage.get_bytes("k/f") == b"v2-longer"


def test_empty_folders_are_pruned_but_not_the_root(tmp_path: Path) -> None:
    root = tmp_path / "deep"
    storage = LocalDeepStorage(root)
    storage.put_bytes(b"1", "segments/ds/i/v/0/data.parquet")
    storage.put_bytes(b"1", "segments/other/x")
    storage.delete("segments/ds/i/v/0/data.parquet")
    assert not (root / "segments/ds").exists()
    assert (root / "segments/other/x").exists()
    assert storage.delete_prefix("segments") == 1
    assert root.is_dir() and list(root.iterdir()) == []


def test_delete_of_a_folder_needs_delete_prefix(tmp_path: Path) -> None:
    storage = LocalDeepStorage(tmp_path)
    storage.put_bytes(b"1", "a/b/c")
    with pytest.raises(IsADirectoryError):
        storage.delete("a/b")
    assert storage.exists("a/b/c")


def test_load_spec_paths(tmp_path: Path) -> None:
    storage = LocalDeepStorage(tmp_path / "deep")
    spec = storage.load_spec("segments/ds/0/data.parquet")
    assert spec == {
        "type": "local",
        "path": str((tmp_path / "deep").resolve() / "segments/ds/0/data.parquet"),
    }
    assert storage.key_for_load_spec(spec) == "segments/ds/0/data.parquet"
    with pytest.raises(DeepStorageError):
        storage.key_for_load_spec({"type": "local", "path": str(tmp_path / "elsewhere/x")})
    with pytest.raises(DeepStorageError):
        storage.key_for_load_spec({"type": "s3", "bucket": "b", "key": "k"})
    assert storage.uri("") == "file://" + str((tmp_path / "deep").resolve())
    assert (
        storage.uri("raw/t/dt=2024-01-01")
        == "file://" + str((tmp_path / "deep").resolve()) + "/raw/t/dt=2024-01-01"
    )


def test_fetch_local_load_spec(tmp_path: Path) -> None:
    storage = LocalDeepStorage(tmp_path / "deep")
    storage.put_bytes(b"data", "segments/ds/v/0/data.parquet")
    storage.put_bytes(b"{}", "segments/ds/v/0/descriptor.json")
    settings = {"deep_storage": {"type": "local", "path": str(tmp_path / "other")}}  # spec path wins
    fetch_load_spec(storage.load_spec("segments/ds/v/0/data.parquet"), tmp_path / "cache/a.parquet", settings)
    assert (tmp_path / "cache/a.parquet").read_bytes() == b"data"
    fetch_load_spec(storage.load_spec("segments/ds/v/0"), tmp_path / "cache/seg", settings)
    assert sorted(p.name for p in (tmp_path / "cache/seg").iterdir()) == ["data.parquet", "descriptor.json"]
    with pytest.raises(FileNotFoundError):
        fetch_load_spec(storage.load_spec("segments/none"), tmp_path / "cache/none", settings)
    with pytest.raises(DeepStorageError):
        fetch_load_spec({"type": "google"}, tmp_path / "x", settings)
