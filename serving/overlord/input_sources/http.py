"""``http``: ``uris`` over HTTP(S) with optional basic auth. Every hop (redirects included) must pass
:func:`serving.input_policy.check_url`: allowed protocols, public addresses only unless allowed."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import httpx

from radstack.config import Settings
from serving.input_policy import check_password, check_url
from serving.overlord.input_sources.base import InputEntity, InputSource, InputSpecError, password, str_list


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


class HttpSource(InputSource):
    type = "http"

    def validate(self, spec: Mapping[str, Any], path: str) -> None:
        uris = str_list(spec.get("uris") or [], f"{path}.uris")
        if not uris:
            raise InputSpecError(f"{path}.uris: required (a non-empty list)")
        for u in uris:
            if urlparse(u).scheme not in ("http", "https"):
                raise InputSpecError(f"{path}.uris: not an http(s) URI: {u!r}")

    def check(self, spec: Mapping[str, Any], settings: Settings) -> None:
        for u in str_list(spec.get("uris") or [], "uris"):
            check_url(u, settings)
        check_password(spec.get("httpAuthenticationPassword"), settings, "http input source: httpAuthenticationPassword")

    def resolve(self, spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:
        user = spec.get("httpAuthenticationUsername")
        secret = password(spec.get("httpAuthenticationPassword"), settings, "httpAuthenticationPassword")
        auth = (user, secret or "") if user else None
        return [
            InputEntity(u, lambda u=u: io.BufferedReader(_HttpStream(u, auth, settings), buffer_size=1 << 16))
            for u in str_list(spec["uris"], "uris")
        ]


SOURCE = HttpSource()
