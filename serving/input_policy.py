"""Which places a task's ``inputSource`` may read: the server's side of Druid's input-source security.

Druid guards its ingestion with ``druid.ingestion.http.allowedProtocols`` and input-source permissions;
radstack is stricter by default, because a task is read by the server process with the server's own
rights:

- never radstack's own state, whatever the settings below allow: deep storage (segments and the raw
  archive), the segment cache, the metadata store, the spool — the home but ``{home}/data``. Re-indexing
  a datasource goes through the ``druid`` input source, which needs READ on it.
- ``local``: only files under ``ingestion.local.allowed_dirs`` (default ``{home}/data`` and the checkout's
  ``examples/``), checked on the resolved path, after symlinks and ``..``, both when the task is submitted
  and again for every file when it runs; a refusal names the path as given, never its resolution.
- ``http``: only ``ingestion.http.allowed_protocols``, and never a loopback, private, link-local, multicast
  or reserved address (every address the host resolves to, and every redirect hop) unless
  ``ingestion.http.allow_private_addresses`` or the host is in ``ingestion.http.allowed_hosts``.
- ``s3``: the buckets in ``ingestion.s3_buckets`` (and the deep-storage bucket outside its prefix), on the
  deep-storage endpoint or one in ``ingestion.s3_endpoints``.
- ``hdfs``: the prefixes in ``ingestion.hdfs_paths`` on the deep-storage NameNode, never under ``deep_storage.path``.
- ``environment`` password providers: only variables listed in ``ingestion.password_env_variables``.

Each type applies its part in its own module (``serving/overlord/input_sources/``); the shared checks are
here. A refusal is :class:`InputForbidden` (the API answers Druid's error JSON with 403) whose message names the
setting that would allow it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from radstack.config import Settings

__all__ = [
    "InputForbidden",
    "check_local_file",
    "check_password",
    "check_url",
    "deep_storage_hdfs_path",
    "deep_storage_object",
    "hdfs_path",
]


class InputForbidden(PermissionError):
    """An input source names a place this server may not read; the message says which setting allows it."""


# -- local ----------------------------------------------------------------------------------------


def _resolved(path: str | Path, base: Path) -> Path:
    try:
        p = Path(path).expanduser()
        return (p if p.is_absolute() else base / p).resolve(strict=False)
    except (OSError, RuntimeError, ValueError) as e:  # a symlink loop, an embedded NUL
        raise InputForbidden(f"local input source: cannot resolve {str(path)!r}: {e}") from None


def check_local_file(path: str | Path, settings: Settings) -> Path:
    """The resolved ``path`` when it lies under an allowed directory and outside radstack's own state,
    else :class:`InputForbidden`. The message names the path as given, never what it resolves to (a
    symlink's target is not the client's to learn)."""
    real = _resolved(path, settings.local_input_base)  # a relative path: against ingestion.local.base_dir
    data = settings.data_dir.resolve()
    for own in settings.own_state_paths:
        if (real == own or real.is_relative_to(own)) and not (real == data or real.is_relative_to(data)):
            raise InputForbidden(f"local input source: {str(path)!r} is radstack's own state (deep storage, "
                                 "the segment cache, the raw archive, the metadata store); re-index a datasource "
                                 "with the 'druid' input source instead")
    for allowed in settings.local_input_dirs:
        if real == allowed or real.is_relative_to(allowed):
            return real
    dirs = ", ".join(str(d) for d in settings.local_input_dirs)
    raise InputForbidden(f"local input source: {str(path)!r} is outside the allowed directories ({dirs}); "
                         "add its directory to ingestion.local.allowed_dirs to allow it")


def _under(key: str, prefix: str) -> bool:
    """Whether ``key`` (a path or object key) lies under ``prefix`` or would list it (a parent of it)."""
    key, prefix = key.strip("/"), prefix.strip("/")
    if not prefix:
        return True
    return key == prefix or key.startswith(prefix + "/") or prefix.startswith(key + "/") or not key


def deep_storage_object(bucket: str, key: str, settings: Settings) -> bool:
    """Whether s3 ``bucket``/``key`` (an object or a listing prefix) reaches radstack's deep storage."""
    ds = settings.deep_storage
    return ds.type == "s3" and bucket == ds.bucket and _under(key, ds.path)


def deep_storage_hdfs_path(path: str, settings: Settings) -> bool:
    """Whether the HDFS ``path`` (a file or a directory walked) reaches radstack's deep storage."""
    ds = settings.deep_storage
    return ds.type == "hdfs" and _under(path, ds.path or "/radstack")


OWN_STATE = ("is radstack's deep storage (segments and the raw archive); re-index a datasource with the "
             "'druid' input source instead")


# -- http -----------------------------------------------------------------------------------------


def _addresses(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        return [ipaddress.ip_address(host.strip("[]").split("%")[0])]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError, OSError) as e:
        raise InputForbidden(f"http input source: cannot resolve host {host!r}: {e}") from None
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def _is_public(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_global and not addr.is_multicast


def check_url(url: str, settings: Settings) -> None:
    """Refuse ``url`` unless its scheme is allowed and its host is public (or explicitly allowed)."""
    http = settings.ingestion.http
    try:
        parsed = urlparse(url)
        host = parsed.hostname or ""
    except ValueError as e:
        raise InputForbidden(f"http input source: not a URL: {url!r} ({e})") from None
    if parsed.scheme.lower() not in {p.lower() for p in http.allowed_protocols}:
        raise InputForbidden(f"http input source: protocol {parsed.scheme!r} is not allowed "
                             f"(allowed: {', '.join(http.allowed_protocols) or 'none'}; ingestion.http.allowed_protocols)")
    if not host:
        raise InputForbidden(f"http input source: {url!r} names no host")
    if http.allow_private_addresses or host.lower() in {h.lower() for h in http.allowed_hosts}:
        return
    for addr in _addresses(host):
        if not _is_public(addr):
            raise InputForbidden(
                f"http input source: {host} resolves to {addr}, a loopback, private, link-local or reserved "
                "address; list the host in ingestion.http.allowed_hosts (or set "
                "ingestion.http.allow_private_addresses) to allow it")


# -- passwords ------------------------------------------------------------------------------------


def check_password(value: Any, settings: Settings, field: str) -> None:
    """An ``environment`` password provider may only name an allow-listed variable."""
    if isinstance(value, Mapping) and value.get("type") == "environment":
        var = str(value.get("variable", ""))
        if var not in settings.ingestion.password_env_variables:
            raise InputForbidden(f"{field}: the environment variable {var!r} is not one a task may read; "
                                 "list it in ingestion.password_env_variables to allow it")


# -- hdfs -----------------------------------------------------------------------------------------


def hdfs_path(raw: str) -> str:
    """The path of an ``hdfs`` input entry (``hdfs://host:port/`` and ``webhdfs://`` prefixes stripped)."""
    return urlparse(raw).path if raw.startswith(("hdfs://", "webhdfs://")) else raw
