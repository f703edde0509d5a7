"""One behaviour suite for every deep-storage backend: a local directory, S3 (a real moto server) and
HDFS (a real single-node NameNode + DataNode). The local run is fast; s3/hdfs are marked slow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from radstack.storage.deep_storage import DeepStorage, DeepStorageError, fetch_load_spec, open_deep_storage
from radstack.storage.deep_storage.hdfs import HdfsDeepStorage
from radstack.storage.deep_storage.local import LocalDeepStorage
from radstack.storage.deep_storage.s3 import S3DeepStorage

BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("s3", id="s3", marks=pytest.mark.slow),
    pytest.param("hdfs", id="hdfs", marks=pytest.mark.slow),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    name = request.param
    if name == "local":
        cfg: dict[str, Any] = {"type": "local", "path": str(tmp_path / "deep")}
    elif name == "s3":
        cfg = dict(request.getfixturevalue("s3_deep_storage_settings"))
    else:
        cfg = dict(request.getfixturevalue("hdfs_deep_storage_settings"))
    return name, cfg


@pytest.fixture
def storage(backend: tuple[str, dict[str, Any]]) -> DeepStorage:
    return open_deep_storage({"deep_storage": backend[1]})


def test_is_a_deep_storage(storage: DeepStorage, backend: tuple[str, dict[str, Any]]) -> None:
    assert isinstance(storage, DeepStorage)
    assert storage.type == backend[0]


def test_put_get_exists(storage: DeepStorage) -> None:
    key = "segments/ds/2024-01-01T00_00_00.000Z_2024-01-02T00_00_00.000Z/v1/0/descriptor.json"
    assert not storage.exists(key)
    storage.put_bytes(b'{"a": 1}', key)
    assert storage.exists(key)
    assert storage.get_bytes(key) == b'{"a": 1}'
    # a folder is not a key
    assert not storage.exists("segments/ds")
    storage.put_bytes(b"second", key)
    assert storage.get_bytes(key) == b"second"
    with pytest.raises(FileNotFoundError):
        storage.get_bytes("segments/missing.json")


def test_put_file_and_download(storage: DeepStorage, tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    src = tmp_path / "data.parquet"
    src.write_bytes(data)
    spec = storage.put_file(src, "segments/ds/x/data.parquet")
    assert spec == storage.load_spec("segments/ds/x/data.parquet")
    dst = tmp_path / "out" / "nested" / "copy.parquet"
    storage.download("segments/ds/x/data.parquet", dst)
    assert dst.read_bytes() == data
    assert [p.name for p in dst.parent.iterdir()] == ["copy.parquet"]  # no temp file left behind
    with pytest.raises(FileNotFoundError):
        storage.download("segments/ds/x/nope", tmp_path / "nope")
    assert not (tmp_path / "nope").exists()


def test_empty_object(storage: DeepStorage) -> None:
    storage.put_bytes(b"", "raw/t/_SUCCESS")
    assert storage.exists("raw/t/_SUCCESS")
    assert storage.get_bytes("raw/t/_SUCCESS") == b""
    assert storage.list("raw") == ["raw/t/_SUCCESS"]


def test_list_is_recursive_sorted_and_folder_scoped(storage: DeepStorage) -> None:
    keys = [
        "segments/ds/b/0/data.parquet",
        "segments/ds/a/0/data.parquet",
        "segments/ds/a/0/descriptor.json",
        "segments/ds2/a/0/data.parquet",
        "raw/topic/dt=2024-01-01/hour=00/part-0.jsonl",
    ]
    for k in keys:
        storage.put_bytes(k.encode(), k)
    assert storage.list("") == sorted(keys)
    assert storage.list("segments/ds") == sorted(k for k in keys if k.startswith("segments/ds/"))
    assert storage.list("segments/ds/") == storage.list("segments/ds")
    assert storage.list("segments/d") == []  # folder semantics, not a string prefix
    assert storage.list("segments/ds/a/0/data.parquet") == ["segments/ds/a/0/data.parquet"]
    assert storage.list("nothing/here") == []
    assert storage.list_dirs("segments") == ["segments/ds", "segments/ds2"]
    assert storage.list_dirs("") == ["raw", "segments"]
    assert storage.list_dirs("segments/ds/a/0") == []
    assert storage.list_dirs("missing") == []


def test_delete_and_delete_prefix(storage: DeepStorage) -> None:
    for k in ["s/ds/a/0/x", "s/ds/a/1/x", "s/ds/b/0/x", "s/other/0/x"]:
        storage.put_bytes(b"1", k)
    storage.delete("s/ds/b/0/x")
    assert not storage.exists("s/ds/b/0/x")
    storage.delete("s/ds/b/0/x")  # deleting a missing key is not an error
    assert storage.delete_prefix("s/ds/a") == 2
    assert storage.list("s") == ["s/other/0/x"]
    assert storage.delete_prefix("s/ds") == 0
    assert storage.delete_prefix("never/there") == 0
    assert storage.delete_prefix("") == 1
    assert storage.list("") == []


def test_modified_ms(storage: DeepStorage) -> None:
    before = int(time.time() * 1000)
    storage.put_bytes(b"x", "m/one")
    after = int(time.time() * 1000)
    # S3 reports whole seconds; allow clock granularity on every backend
    assert before - 2000 <= storage.modified_ms("m/one") <= after + 2000
    with pytest.raises(FileNotFoundError):
        storage.modified_ms("m/two")


def test_rename_file_and_folder(storage: DeepStorage) -> None:
    storage.put_bytes(b"new", "tmp/seg/data")
    storage.put_bytes(b"old", "final/seg/data")
    storage.rename("tmp/seg/data", "final/seg/data")  # replaces
    assert storage.get_bytes("final/seg/data") == b"new"
    assert not storage.exists("tmp/seg/data")

    storage.put_bytes(b"1", "staging/v2/0/data.parquet")
    storage.put_bytes(b"2", "staging/v2/0/descriptor.json")
    storage.rename("staging/v2", "segments/ds/v2")
    assert storage.list("segments/ds/v2") == [
        "segments/ds/v2/0/data.parquet",
        "segments/ds/v2/0/descriptor.json",
    ]
    assert storage.list("staging") == []
    assert storage.get_bytes("segments/ds/v2/0/descriptor.json") == b"2"

    storage.put_bytes(b"3", "staging/v3/0/data.parquet")
    with pytest.raises(FileExistsError):
        storage.rename("staging/v3", "segments/ds/v2")
    with pytest.raises(FileNotFoundError):
        storage.rename("staging/none", "segments/ds/none")


def test_bad_keys_are_rejected(storage: DeepStorage) -> None:
    for bad in ["../escape", "a/../b", "a//b", ".hidden", "a/.tmp/b", ""]:
        with pytest.raises(DeepStorageError):
            storage.put_bytes(b"x", bad)


def test_load_spec_round_trip(
    storage: DeepStorage, backend: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    name, cfg = backend
    key = "segments/ds/2024-01-01T00_00_00.000Z_2024-01-02T00_00_00.000Z/2024-01-03T00_00_00.000Z/0/data.parquet"
    spec = storage.put_bytes(b"PAR1", key)
    assert storage.key_for_load_spec(spec) == key
    json.dumps(spec)  # the payload column stores it as JSON
    if name == "local":
        assert spec == {"type": "local", "path": str(Path(cfg["path"]).resolve() / key)}
    elif name == "s3":
        assert spec == {"type": "s3", "bucket": cfg["bucket"], "key": f"{cfg['path']}/{key}"}
        assert storage.key_for_load_spec({**spec, "type": "s3_zip"}) == key
    else:
        assert spec == {"type": "hdfs", "path": f"{cfg['hdfs_fs_url']}{cfg['path']}/{key}"}
    with pytest.raises(DeepStorageError):
        storage.key_for_load_spec({"type": "nope", "path": "/x"})

    # fetch what a loadSpec names: one file, or a whole segment folder
    fetch_load_spec(spec, tmp_path / "one.parquet", {"deep_storage": cfg})
    assert (tmp_path / "one.parquet").read_bytes() == b"PAR1"
    storage.put_bytes(b"{}", key.replace("data.parquet", "descriptor.json"))
    folder_spec = storage.load_spec(key.rsplit("/", 1)[0])
    fetch_load_spec(folder_spec, tmp_path / "seg", {"deep_storage": cfg})
    assert sorted(p.name for p in (tmp_path / "seg").iterdir()) == ["data.parquet", "descriptor.json"]
    assert (tmp_path / "seg" / "descriptor.json").read_bytes() == b"{}"


def test_uri_forms(storage: DeepStorage, backend: tuple[str, dict[str, Any]]) -> None:
    name, cfg = backend
    uri = storage.uri("raw/topic/dt=2024-01-01")
    if name == "local":
        assert uri == "file://" + str(Path(cfg["path"]).resolve()) + "/raw/topic/dt=2024-01-01"
    elif name == "s3":
        assert uri == f"s3a://{cfg['bucket']}/{cfg['path']}/raw/topic/dt=2024-01-01"
    else:
        assert cfg["hdfs_fs_url"].startswith("hdfs://127.0.0.1:")
        assert uri == f"{cfg['hdfs_fs_url']}{cfg['path']}/raw/topic/dt=2024-01-01"


# --------------------------------------------------------------------------- atomic uploads
WRITER = """
import json, sys
from pathlib import Path
from radstack.storage.deep_storage import open_deep_storage
storage = open_deep_storage(json.loads(sys.argv[1]))
storage.put_file(Path(sys.argv[2]), sys.argv[3])
print("done", flush=True)
"""

CHUNK = 1024 * 1024


def _start_writer(cfg: dict[str, Any], fifo: Path, key: str, log: Path) -> subprocess.Popen[bytes]:
    """A separate process uploading from a named pipe: the test controls how far the upload gets."""
    os.mkfifo(fifo)
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-c", WRITER, json.dumps({"deep_storage": cfg}), str(fifo), key],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=Path(__file__).resolve().parents[2],
        )


def _visible_state(storage: DeepStorage) -> list[str]:
    keys = storage.list("")
    assert all(not any(p.startswith(".") for p in k.split("/")) for k in keys), keys
    return keys


def test_killed_writer_leaves_no_partial_file(
    storage: DeepStorage, backend: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    key = "segments/ds/x/v1/0/data.parquet"
    storage.put_bytes(b"previous complete version", key)
    writer = _start_writer(backend[1], tmp_path / "pipe", key, tmp_path / "writer.log")
    try:
        with (tmp_path / "pipe").open("wb") as pipe:
            # 20 MiB: more than the S3 multipart threshold, so parts are already uploaded when killed.
            # Writing into a pipe blocks until the writer has read it, so the upload is under way.
            for _ in range(20):
                pipe.write(os.urandom(CHUNK))
            pipe.flush()
            time.sleep(1.0)
            assert writer.poll() is None, (tmp_path / "writer.log").read_text()
            os.killpg(writer.pid, signal.SIGKILL)
            writer.wait(timeout=10)
    except BrokenPipeError:
        pass
    finally:
        if writer.poll() is None:
            os.killpg(writer.pid, signal.SIGKILL)
            writer.wait(timeout=10)
    assert writer.returncode == -signal.SIGKILL
    assert storage.get_bytes(key) == b"previous complete version"
    assert _visible_state(storage) == [key]
    assert _partial_upload_left(storage, key) > 0  # the kill really happened mid-upload


def _partial_upload_left(storage: DeepStorage, key: str) -> int:
    """Bytes of the interrupted upload the backend still holds out of sight (proves it was under way)."""
    parent, name = key.rsplit("/", 1)
    if isinstance(storage, LocalDeepStorage):
        temps = [p for p in (storage.root / parent).iterdir() if p.name.startswith(f".{name}.")]
        return sum(p.stat().st_size for p in temps)
    if isinstance(storage, S3DeepStorage):
        uploads = storage.client.list_multipart_uploads(Bucket=storage.bucket).get("Uploads", [])
        mine = [u for u in uploads if u["Key"] == f"{storage.prefix}/{key}"]
        total = 0
        for u in mine:
            parts = storage.client.list_parts(Bucket=storage.bucket, Key=u["Key"], UploadId=u["UploadId"])
            total += sum(p["Size"] for p in parts.get("Parts", []))
        return total
    assert isinstance(storage, HdfsDeepStorage)
    listing = storage.client.list(f"{storage.base_path}/{parent}", status=True)
    return sum(st["length"] for n, st in listing if n.startswith(f".{name}."))


def test_key_appears_only_when_upload_completes(
    storage: DeepStorage, backend: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    key = "raw/topic/dt=2024-01-01/part-0.jsonl"
    payload = [os.urandom(CHUNK) for _ in range(12)]
    writer = _start_writer(backend[1], tmp_path / "pipe", key, tmp_path / "writer.log")
    try:
        with (tmp_path / "pipe").open("wb") as pipe:
            for chunk in payload[:10]:
                pipe.write(chunk)
            pipe.flush()
            time.sleep(0.5)
            assert writer.poll() is None
            assert not storage.exists(key)
            assert _visible_state(storage) == []
            for chunk in payload[10:]:
                pipe.write(chunk)
        assert writer.wait(timeout=120) == 0, (tmp_path / "writer.log").read_text()
    finally:
        if writer.poll() is None:
            os.killpg(writer.pid, signal.SIGKILL)
            writer.wait(timeout=10)
    assert _visible_state(storage) == [key]
    assert storage.get_bytes(key) == b"".join(payload)


# --------------------------------------------------------------------------- Spark reads uri()
@pytest.fixture(scope="module")
def spark(spark_session):  # type: ignore[no-untyped-def]
    return spark_session  # the run's shared session (tests/fixtures/spark.py)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "hdfs"], indirect=True)  # s3a:// needs hadoop-aws jars
def test_spark_reads_and_writes_uri(storage: DeepStorage, spark) -> None:  # type: ignore[no-untyped-def]
    storage.put_bytes(b"a\nb\n", "raw/t/dt=2024-01-01/part-0.txt")
    storage.put_bytes(b"c\n", "raw/t/dt=2024-01-02/part-0.txt")
    rows = spark.read.text(storage.uri("raw/t")).collect()
    assert sorted((r.value, str(r.dt)) for r in rows) == [
        ("a", "2024-01-01"),
        ("b", "2024-01-01"),
        ("c", "2024-01-02"),
    ]
    spark.createDataFrame([(1, "x")], "n INT, s STRING").write.parquet(storage.uri("segments/out"))
    written = storage.list("segments/out")
    assert "segments/out/_SUCCESS" in written
    assert any(k.endswith(".parquet") for k in written)


@pytest.mark.slow
def test_hdfs_write_asks_again_when_the_datanode_is_gone(hdfs_deep_storage_settings: dict[str, str], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """WebHDFS sends an upload to the DataNode the NameNode picked; one that just died is still picked
    until the NameNode sees it stale, and the connection to it fails (the rebuild's publish failed that
    way on the simulated hosts, #36). The real HDFS here; the dead DataNode is the first connections to
    a DataNode failing, as they do when its host is gone. Asked again, the write lands; a DataNode that
    never answers ends in DeepStorageError after every attempt, with no temp file left."""
    import requests
    from requests.adapters import HTTPAdapter

    from radstack.storage.deep_storage import hdfs as hdfs_module

    storage = open_deep_storage({"deep_storage": hdfs_deep_storage_settings})
    assert isinstance(storage, HdfsDeepStorage)
    namenode_port = storage.namenode_url.rsplit(":", 1)[1]
    failures = {"left": 2, "seen": 0}

    class DeadDataNode(HTTPAdapter):
        def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            if f":{namenode_port}/" not in request.url and failures["left"] > 0:  # to a DataNode
                failures["left"] -= 1
                failures["seen"] += 1
                raise requests.ConnectionError(f"no route to the DataNode of {request.url[:60]}")
            return super().send(request, *args, **kwargs)

    storage.client._session.mount("http://", DeadDataNode())
    monkeypatch.setattr(hdfs_module.time, "sleep", lambda _s: None)
    storage.put_bytes(b"segment bytes", "seg/a/index.bin")
    assert failures["seen"] == 2 and storage.get_bytes("seg/a/index.bin") == b"segment bytes"
    src = tmp_path / "file.bin"
    src.write_bytes(b"x" * 100_000)
    failures["left"] = 3
    storage.put_file(src, "seg/b/index.bin")
    assert failures["seen"] == 5 and storage.get_bytes("seg/b/index.bin") == b"x" * 100_000

    failures["left"] = 10**6  # a DataNode that never answers
    with pytest.raises(DeepStorageError, match="failed 6 times"):
        storage.put_bytes(b"lost", "seg/c/index.bin")
    assert not storage.exists("seg/c/index.bin")
    assert storage.list("seg/") == ["seg/a/index.bin", "seg/b/index.bin"]
    assert storage.client.status(storage._path("seg/c"), strict=False) is None  # no hidden temp file either
