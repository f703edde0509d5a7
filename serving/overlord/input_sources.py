"""Druid ``ioConfig.inputSource`` types: where a native batch task reads its input from.

Each source resolves to a list of :class:`InputEntity` (one file/object/URL), opened lazily as a
binary stream so files are read one at a time. Supported: ``local`` (``baseDir`` + ``filter`` glob,
recursive, or ``files``), ``inline`` (``data``), ``http`` (``uris``, optional basic auth), ``s3``
(``uris``, ``prefixes``, ``objects``; boto3 against the configured endpoint) and ``hdfs`` (``paths``
over WebHDFS with the ``hdfs`` package, using ``deep_storage.namenode_url``).

:func:`validate_input_source` checks the spec at submission time (a bad field is a 400);
:func:`resolve_input_source` lists the entities when the task runs.
"""

from __future__ import annotations

import fnmatch
import io
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlparse

import boto3
import httpx
from botocore.config import Config
from hdfs import InsecureClient

from radstack.config import Settings
from serving.overlord.input_policy import check_local_file, check_password, check_url, hdfs_path

SOURCE_TYPES = ("local", "inline", "http", "s3", "hdfs", "archive")  # archive: radstack's raw archive, via Spark (batch/)


class InputSpecError(ValueError):
    """A bad ``ioConfig`` field; the message starts with the field path."""


@dataclass(frozen=True)
class InputEntity:
    """One input file/object. ``open()`` returns a fresh binary stream (caller closes it)."""

    name: str
    opener: Callable[[], BinaryIO]
    size: int | None = None

    def open(self) -> BinaryIO:
        return self.opener()


def _field(prefix: str, name: str) -> str:
    return f"{prefix}.{name}"


def _str_list(value: Any, path: str) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputSpecError(f"{path}: expected a list of strings")
    return list(value)


def validate_input_source(spec: Any, path: str = "spec.ioConfig.inputSource") -> None:
    """Raise :class:`InputSpecError` naming the field when ``spec`` is not a usable input source."""
    if not isinstance(spec, Mapping):
        raise InputSpecError(f"{path}: required (an object with a 'type')")
    typ = spec.get("type")
    if typ not in SOURCE_TYPES:
        raise InputSpecError(f"{_field(path, 'type')}: unknown input source type {typ!r}; "
                             f"supported: {', '.join(SOURCE_TYPES)}")
    if typ == "local":
        files = spec.get("files")
        if files is not None:
            _str_list(files, _field(path, "files"))
        elif not spec.get("baseDir"):
            raise InputSpecError(f"{_field(path, 'baseDir')}: required unless 'files' is given")
        if spec.get("filter") is not None and not isinstance(spec.get("filter"), str):
            raise InputSpecError(f"{_field(path, 'filter')}: expected a glob string")
    elif typ == "inline":
        if not isinstance(spec.get("data"), str):
            raise InputSpecError(f"{_field(path, 'data')}: required (a string)")
    elif typ == "http":
        uris = _str_list(spec.get("uris") or [], _field(path, "uris"))
        if not uris:
            raise InputSpecError(f"{_field(path, 'uris')}: required (a non-empty list)")
        for u in uris:
            if urlparse(u).scheme not in ("http", "https"):
                raise InputSpecError(f"{_field(path, 'uris')}: not an http(s) URI: {u!r}")
    elif typ == "s3":
        given = [k for k in ("uris", "prefixes", "objects") if spec.get(k)]
        if len(given) != 1:
            raise InputSpecError(f"{path}: exactly one of 'uris', 'prefixes' or 'objects' is required")
        key = given[0]
        if key == "objects":
            objs = spec["objects"]
            if not isinstance(objs, list) or not all(
                isinstance(o, Mapping) and o.get("bucket") and o.get("path") for o in objs
            ):
                raise InputSpecError(f"{_field(path, 'objects')}: expected [{{'bucket', 'path'}}, …]")
        else:
            for u in _str_list(spec[key], _field(path, key)):
                if urlparse(u).scheme not in ("s3", "s3a", "s3n") or not urlparse(u).netloc:
                    raise InputSpecError(f"{_field(path, key)}: not an s3://bucket/key URI: {u!r}")
    elif typ == "hdfs" and not _str_list(spec.get("paths") or [], _field(path, "paths")):
        raise InputSpecError(f"{_field(path, 'paths')}: required")
    elif typ == "archive" and spec.get("topics") is not None:
        _str_list(spec["topics"], _field(path, "topics"))


def resolve_input_source(spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:
    """List the entities of a (validated) input source, in a stable order."""
    typ = spec["type"]
    if typ == "local":
        return _local(spec, settings)
    if typ == "inline":
        data = spec["data"].encode("utf-8")
        return [InputEntity("inline", lambda: io.BytesIO(data), len(data))]
    if typ == "http":
        return _http(spec, settings)
    if typ == "s3":
        return _s3(spec, settings)
    if typ == "hdfs":
        return _hdfs(spec, settings)
    if typ == "archive":
        raise InputSpecError("spec.ioConfig.inputSource: the raw archive is read by the Spark batch job (batch/)")
    raise InputSpecError(f"spec.ioConfig.inputSource.type: unknown input source type {typ!r}")


# -- local ---------------------------------------------------------------------------------------


def _local(spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:
    """The files, each checked against ``ingestion.local.allowed_dirs`` after symlinks and ``..``."""
    paths: list[Path]
    if spec.get("files") is not None:
        paths = [check_local_file(p, settings) for p in _str_list(spec["files"], "files")]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"local input source: no such file(s): {', '.join(missing)}")
    else:
        base = check_local_file(spec["baseDir"], settings)
        if not base.is_dir():
            raise FileNotFoundError(f"local input source: baseDir {str(base)!r} is not a directory")
        pattern = spec.get("filter") or "*"
        # Druid matches the filter against file names, walking baseDir recursively.
        paths = sorted(
            check_local_file(p, settings) for p in base.rglob("*") if p.is_file() and fnmatch.fnmatchcase(p.name, pattern)
        )
    return [InputEntity(str(p), (lambda p=p: open(p, "rb")), p.stat().st_size) for p in paths]


# -- http ----------------------------------------------------------------------------------------


class _HttpStream(io.RawIOBase):
    """A readable stream over a streamed httpx response."""

    def __init__(self, url: str, auth: tuple[str, str] | None, settings: Settings) -> None:
        def check(request: httpx.Request) -> None:  # every hop, redirects included
            check_url(str(request.url), settings)

        self._client = httpx.Client(follow_redirects=True, timeout=httpx.Timeout(60.0),
                                    event_hooks={"request": [check]})
        self._cm = self._client.stream("GET", url, auth=auth)
        resp = self._cm.__enter__()
        if resp.status_code >= 400:
            self._cm.__exit__(None, None, None)
            self._client.close()
            raise OSError(f"http input source: GET {url} returned HTTP {resp.status_code}")
        self._iter = resp.iter_bytes()
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._iter)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def close(self) -> None:
        if not self.closed:
            self._cm.__exit__(None, None, None)
            self._client.close()
        super().close()


def _password(value: Any, settings: Settings, field: str) -> str | None:
    check_password(value, settings, field)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):  # Druid PasswordProvider: {"type":"default","password":…} or env
        if value.get("type") == "environment":
            return os.environ.get(str(value.get("variable", "")))
        return value.get("password")
    return str(value)


def _http(spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:
    user = spec.get("httpAuthenticationUsername")
    password = _password(spec.get("httpAuthenticationPassword"), settings, "httpAuthenticationPassword")
    auth = (user, password or "") if user else None
    return [
        InputEntity(u, lambda u=u: io.BufferedReader(_HttpStream(u, auth, settings), buffer_size=1 << 16))
        for u in _str_list(spec["uris"], "uris")
    ]


# -- s3 ------------------------------------------------------------------------------------------


def _s3_client(spec: Mapping[str, Any], settings: Settings) -> Any:

    ds = settings.deep_storage
    endpoint = (spec.get("endpointConfig") or {}).get("url") or ds.endpoint_url or None
    region = (spec.get("endpointConfig") or {}).get("signingRegion") or ds.region or "us-east-1"
    props = spec.get("properties") or {}
    kwargs: dict[str, Any] = {"endpoint_url": endpoint, "region_name": region}
    if props.get("accessKeyId"):
        kwargs["aws_access_key_id"] = _password(props["accessKeyId"], settings, "properties.accessKeyId")
        kwargs["aws_secret_access_key"] = _password(props.get("secretAccessKey"), settings,
                                                    "properties.secretAccessKey")

    return boto3.client("s3", config=Config(s3={"addressing_style": "path"}), **kwargs)


def _s3(spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:
    client = _s3_client(spec, settings)
    objects: list[tuple[str, str, int | None]] = []
    if spec.get("objects"):
        objects = [(o["bucket"], o["path"].lstrip("/"), None) for o in spec["objects"]]
    elif spec.get("uris"):
        for u in _str_list(spec["uris"], "uris"):
            p = urlparse(u)
            objects.append((p.netloc, p.path.lstrip("/"), None))
    else:
        for u in _str_list(spec["prefixes"], "prefixes"):
            p = urlparse(u)
            paginator = client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=p.netloc, Prefix=p.path.lstrip("/")):
                for obj in page.get("Contents", []):
                    if not obj["Key"].endswith("/"):
                        objects.append((p.netloc, obj["Key"], int(obj["Size"])))

    def opener(bucket: str, key: str) -> BinaryIO:
        body = client.get_object(Bucket=bucket, Key=key)["Body"]
        return io.BufferedReader(_BotoStream(body), buffer_size=1 << 16)

    return [
        InputEntity(f"s3://{b}/{k}", (lambda b=b, k=k: opener(b, k)), size)
        for b, k, size in objects
    ]


class _BotoStream(io.RawIOBase):
    def __init__(self, body: Any) -> None:
        self._body = body

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._body.read(len(b))
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._body.close()
        super().close()


# -- hdfs ----------------------------------------------------------------------------------------


def _hdfs(spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:

    ds = settings.deep_storage
    url = ds.namenode_url
    if not url:
        raise InputSpecError("spec.ioConfig.inputSource: hdfs input needs deep_storage.namenode_url (WebHDFS)")
    client = InsecureClient(url, user=ds.user or None)
    files: list[tuple[str, int]] = []
    for raw in _str_list(spec["paths"], "paths"):
        path = hdfs_path(raw)
        status = client.status(path, strict=False)
        if status is None:
            # a glob in the last component, as Druid accepts
            parent, pattern = path.rsplit("/", 1) if "/" in path else ("/", path)
            for name, st in client.list(parent or "/", status=True):
                if st["type"] == "FILE" and fnmatch.fnmatchcase(name, pattern):
                    files.append((f"{parent}/{name}", int(st["length"])))
        elif status["type"] == "DIRECTORY":
            for root, _dirs, names in client.walk(path):
                for name in sorted(names):
                    full = f"{root.rstrip('/')}/{name}"
                    files.append((full, int(client.status(full)["length"])))
        else:
            files.append((path, int(status["length"])))

    def opener(p: str) -> BinaryIO:
        data: Any = tempfile.SpooledTemporaryFile(max_size=16 << 20)  # noqa: SIM115 - returned open
        with client.read(p) as reader:
            while chunk := reader.read(1 << 20):
                data.write(chunk)
        data.seek(0)
        return data

    return [InputEntity(f"hdfs:{p}", (lambda p=p: opener(p)), size) for p, size in files]
