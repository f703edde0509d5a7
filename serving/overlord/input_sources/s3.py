"""``s3``: ``uris``, ``prefixes`` or ``objects`` through boto3 against the configured endpoint; only the
buckets in ``ingestion.s3_buckets`` (and the deep-storage bucket outside radstack's prefix), never deep
storage itself, on the deep-storage endpoint unless ``ingestion.s3_endpoints`` lists more."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any, BinaryIO
from urllib.parse import urlparse

import boto3
from botocore.config import Config

from radstack.config import Settings
from serving.input_policy import OWN_STATE, InputForbidden, check_password, deep_storage_object
from serving.overlord.input_sources.base import InputEntity, InputSource, InputSpecError, password, str_list

_KEYS = ("uris", "prefixes", "objects")


def _s3_client(spec: Mapping[str, Any], settings: Settings) -> Any:

    ds = settings.deep_storage
    endpoint = (spec.get("endpointConfig") or {}).get("url") or ds.endpoint_url or None
    region = (spec.get("endpointConfig") or {}).get("signingRegion") or ds.region or "us-east-1"
    props = spec.get("properties") or {}
    kwargs: dict[str, Any] = {"endpoint_url": endpoint, "region_name": region}
    if props.get("accessKeyId"):
        kwargs["aws_access_key_id"] = password(props["accessKeyId"], settings, "properties.accessKeyId")
        kwargs["aws_secret_access_key"] = password(props.get("secretAccessKey"), settings,
                                                    "properties.secretAccessKey")

    return boto3.client("s3", config=Config(s3={"addressing_style": "path"}), **kwargs)


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


class S3Source(InputSource):
    type = "s3"
    spark = "optional"

    def validate(self, spec: Mapping[str, Any], path: str) -> None:
        given = [k for k in _KEYS if spec.get(k)]
        if len(given) != 1:
            raise InputSpecError(f"{path}: exactly one of 'uris', 'prefixes' or 'objects' is required")
        key = given[0]
        if key == "objects":
            objs = spec["objects"]
            if not isinstance(objs, list) or not all(
                isinstance(o, Mapping) and o.get("bucket") and o.get("path") for o in objs
            ):
                raise InputSpecError(f"{path}.objects: expected [{{'bucket', 'path'}}, …]")
        else:
            for u in str_list(spec[key], f"{path}.{key}"):
                if urlparse(u).scheme not in ("s3", "s3a", "s3n") or not urlparse(u).netloc:
                    raise InputSpecError(f"{path}.{key}: not an s3://bucket/key URI: {u!r}")

    def check(self, spec: Mapping[str, Any], settings: Settings) -> None:
        ds = settings.deep_storage
        buckets = {b for b in [ds.bucket, *settings.ingestion.s3_buckets] if b}
        named: list[tuple[str, str]] = []
        if isinstance(spec.get("objects"), list):
            named = [(str(o.get("bucket", "")), str(o.get("path", ""))) for o in spec["objects"] if isinstance(o, Mapping)]
        for key in ("uris", "prefixes"):
            if spec.get(key):
                named += [(urlparse(u).netloc, urlparse(u).path) for u in str_list(spec[key], key)]
        for bucket, key in named:
            if deep_storage_object(bucket, key, settings):
                raise InputForbidden(f"s3 input source: s3://{bucket}/{key.lstrip('/')} {OWN_STATE}")
            if bucket not in buckets:
                raise InputForbidden(f"s3 input source: bucket {bucket!r} is not one inputs may read; "
                                     "list it in ingestion.s3_buckets to allow it")
        ep = spec.get("endpointConfig")
        endpoint = ep.get("url") if isinstance(ep, Mapping) else None
        if endpoint and endpoint not in {e for e in [ds.endpoint_url, *settings.ingestion.s3_endpoints] if e}:
            raise InputForbidden(f"s3 input source: endpoint {endpoint!r} is not the deep-storage endpoint; "
                                 "list it in ingestion.s3_endpoints to allow it")
        props = spec.get("properties")
        if isinstance(props, Mapping):
            for k in ("accessKeyId", "secretAccessKey"):
                check_password(props.get(k), settings, f"s3 input source: properties.{k}")

    def resolve(self, spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:
        client = _s3_client(spec, settings)
        objects: list[tuple[str, str, int | None]] = []
        if spec.get("objects"):
            objects = [(o["bucket"], o["path"].lstrip("/"), None) for o in spec["objects"]]
        elif spec.get("uris"):
            for u in str_list(spec["uris"], "uris"):
                p = urlparse(u)
                objects.append((p.netloc, p.path.lstrip("/"), None))
        else:
            for u in str_list(spec["prefixes"], "prefixes"):
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

    def spark_uris(self, spec: Mapping[str, Any], settings: Settings) -> list[str] | None:
        out = ["s3a://" + u.split("://", 1)[1] for key in ("uris", "prefixes") for u in str_list(spec.get(key) or [], key)]
        return out + [f"s3a://{o['bucket']}/{o['path']}" for o in spec.get("objects") or []]


SOURCE = S3Source()
