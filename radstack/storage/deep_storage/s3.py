"""Deep storage in an S3 bucket (AWS, MinIO, moto) through boto3.

Path-style addressing and an optional ``endpoint_url`` make it work with S3-compatible servers.
Credentials come from boto3's usual chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``,
``~/.aws``, instance roles).

Atomicity: an S3 PUT — and a multipart upload, which becomes visible only on
``CompleteMultipartUpload`` — is all-or-nothing, so uploads go straight to the key: a writer that dies
mid-upload leaves no object (at most an incomplete multipart upload, which a bucket lifecycle rule
``AbortIncompleteMultipartUpload`` cleans up). ``rename`` is copy + delete per object and therefore
NOT atomic: readers may briefly see both copies, and a folder rename is not all-or-nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

from radstack.storage.deep_storage.base import DeepStorageError, is_hidden, join_key, normalize_key, temp_name

TRANSFER = TransferConfig(multipart_threshold=8 * 1024 * 1024, multipart_chunksize=8 * 1024 * 1024)


def _is_missing(e: ClientError) -> bool:
    code = str(e.response.get("Error", {}).get("Code", ""))
    return code in ("404", "NoSuchKey", "NotFound")


class S3DeepStorage:
    """Keys live under ``prefix`` (may be empty) in ``bucket``."""

    type = "s3"

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str = "us-east-1",
        client: Any | None = None,
    ) -> None:
        self.bucket = bucket
        self.prefix = normalize_key(prefix, allow_empty=True) if prefix else ""
        self.endpoint_url = endpoint_url
        self.region = region
        self.client = client or boto3.client(
            "s3",
            endpoint_url=endpoint_url,
            region_name=region,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 5, "mode": "standard"}),
        )

    def __repr__(self) -> str:
        return f"S3DeepStorage(bucket={self.bucket!r}, prefix={self.prefix!r}, endpoint_url={self.endpoint_url!r})"

    def _obj(self, key: str, *, allow_empty: bool = False) -> str:
        return join_key(self.prefix, normalize_key(key, allow_empty=allow_empty))

    def _folder(self, prefix: str) -> str:
        """The S3 prefix of the folder ``prefix`` ('' or ending in '/')."""
        p = self._obj(prefix, allow_empty=True)
        return p + "/" if p else ""

    def _rel(self, obj: str) -> str:
        return obj[len(self.prefix) + 1 :] if self.prefix else obj

    def _iter_objects(self, folder: str) -> Iterator[dict[str, Any]]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=folder)
        for page in pages:
            yield from page.get("Contents", [])

    # ------------------------------------------------------------------ writes
    def put_file(self, local_path: Path, key: str) -> dict[str, Any]:
        obj = self._obj(key)
        # a file object (not a name) so pipes and files still being produced are streamed, not sized
        with open(local_path, "rb") as f:
            self.client.upload_fileobj(f, self.bucket, obj, Config=TRANSFER)
        return self.load_spec(key)

    def put_bytes(self, data: bytes, key: str) -> dict[str, Any]:
        self.client.put_object(Bucket=self.bucket, Key=self._obj(key), Body=bytes(data))
        return self.load_spec(key)

    def rename(self, src_key: str, dst_key: str) -> None:
        """Copy + delete (S3 has no rename): not atomic, see the module docstring."""
        if self.exists(src_key):
            self._copy(self._obj(src_key), self._obj(dst_key))
            self.delete(src_key)
            return
        keys = self.list(src_key)
        if not keys:
            raise FileNotFoundError(src_key)
        if self.list(dst_key):
            raise FileExistsError(f"rename {src_key!r}: destination {dst_key!r} exists")
        src = normalize_key(src_key)
        for k in keys:
            self._copy(self._obj(k), self._obj(join_key(normalize_key(dst_key), k[len(src) + 1 :])))
        self.delete_prefix(src_key)

    def _copy(self, src_obj: str, dst_obj: str) -> None:
        self.client.copy({"Bucket": self.bucket, "Key": src_obj}, self.bucket, dst_obj, Config=TRANSFER)

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._obj(key))

    def delete_prefix(self, prefix: str) -> int:
        folder = self._folder(prefix)
        objs = [o["Key"] for o in self._iter_objects(folder)]
        if prefix and self.exists(prefix):
            objs.append(self._obj(prefix))
        n = 0
        for i in range(0, len(objs), 1000):
            batch = objs[i : i + 1000]
            resp = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
            )
            errors = resp.get("Errors", [])
            if errors:
                raise DeepStorageError(f"S3 delete failed for {len(errors)} object(s): {errors[:3]}")
            n += sum(1 for k in batch if not is_hidden(self._rel(k)))
        return n

    # ------------------------------------------------------------------ reads
    def get_bytes(self, key: str) -> bytes:
        try:
            resp = self.client.get_object(Bucket=self.bucket, Key=self._obj(key))
        except ClientError as e:
            if _is_missing(e):
                raise FileNotFoundError(key) from None
            raise
        return bytes(resp["Body"].read())

    def download(self, key: str, local_path: Path) -> None:
        local_path = Path(local_path)
        local_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = local_path.parent / temp_name(local_path.name)
        try:
            with tmp.open("wb") as f:
                self.client.download_fileobj(self.bucket, self._obj(key), f, Config=TRANSFER)
            os.replace(tmp, local_path)
        except ClientError as e:
            if _is_missing(e):
                raise FileNotFoundError(key) from None
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def _head(self, key: str) -> dict[str, Any] | None:
        try:
            return dict(self.client.head_object(Bucket=self.bucket, Key=self._obj(key)))
        except ClientError as e:
            if _is_missing(e):
                return None
            raise

    def exists(self, key: str) -> bool:
        return self._head(key) is not None

    def list(self, prefix: str = "") -> list[str]:
        k = normalize_key(prefix, allow_empty=True)
        out = [self._rel(o["Key"]) for o in self._iter_objects(self._folder(k))]
        out = [r for r in out if not is_hidden(r)]
        if not out and k and self.exists(k):
            return [k]
        return sorted(out)

    def list_dirs(self, prefix: str = "") -> list[str]:
        folder = self._folder(prefix)
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=folder, Delimiter="/"
        )
        out: list[str] = []
        for page in pages:
            for cp in page.get("CommonPrefixes", []):
                rel = self._rel(cp["Prefix"].rstrip("/"))
                if not is_hidden(rel):
                    out.append(rel)
        return sorted(out)

    def modified_ms(self, key: str) -> int:
        head = self._head(key)
        if head is None:
            raise FileNotFoundError(key)
        return int(head["LastModified"].timestamp() * 1000)

    # ------------------------------------------------------------------ addressing
    def load_spec(self, key: str) -> dict[str, Any]:
        # Druid writes {"type": "s3_zip", ...} for zipped segments; radstack segments are plain files.
        return {"type": "s3", "bucket": self.bucket, "key": self._obj(key)}

    def key_for_load_spec(self, load_spec: Mapping[str, Any]) -> str:
        if load_spec.get("type") not in ("s3", "s3_zip"):
            raise DeepStorageError(f"not an s3 loadSpec: {dict(load_spec)}")
        if load_spec.get("bucket") != self.bucket:
            raise DeepStorageError(f"loadSpec bucket {load_spec.get('bucket')!r} is not {self.bucket!r}")
        obj = str(load_spec["key"]).strip("/")
        if self.prefix:
            if not obj.startswith(self.prefix + "/"):
                raise DeepStorageError(f"{obj!r} is outside prefix {self.prefix!r}")
            obj = obj[len(self.prefix) + 1 :]
        return normalize_key(obj)

    def uri(self, key: str) -> str:
        obj = self._obj(key, allow_empty=True)
        return f"s3a://{self.bucket}/{obj}"
