"""Waiting until the serving layer answers from a rebuild: ``radctl backfill --wait``.

A rebuild is published to the metadata store; the server's broker picks the new version up on its next
timeline refresh (``server.poll_seconds``), so a query right after the publish can still read the old
one. A chunk is *served* when ``sys.segments`` lists a segment of the chunk with the chunk's new
version, available and not overshadowed — asked of the running server itself, as a client would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx

from batch.backfill import ChunkResult
from operations.stack import probe_host
from radstack.config import Settings
from radstack.time.intervals import format_instant


def server_url(settings: Settings) -> str:
    """The local server's base URL (a wildcard bind is reached on loopback)."""
    return f"http://{probe_host(settings.server.host)}:{settings.server.port}"


class ServingUnreachable(RuntimeError):
    """The server does not answer (not running), or refuses the check (authentication on)."""


@dataclass(frozen=True)
class _Segment:
    start: str
    version: str
    live: bool  # available and not overshadowed


def _segments(http: httpx.Client, url: str, datasource: str, start: str, end: str) -> list[_Segment]:
    query = ('SELECT "start", version, is_available, is_overshadowed FROM sys.segments '
             'WHERE datasource = ? AND "start" >= ? AND "end" <= ?')
    params = [{"type": "VARCHAR", "value": v} for v in (datasource, start, end)]
    try:
        r = http.post(f"{url}/druid/v2/sql", json={"query": query, "parameters": params})
    except httpx.HTTPError as e:
        raise ServingUnreachable(f"the server at {url} does not answer ({e.__class__.__name__})") from e
    if r.status_code in (401, 403):
        raise ServingUnreachable(f"the server at {url} refuses the check ({r.status_code}: authentication on)")
    if r.status_code != 200:
        raise ServingUnreachable(f"the server at {url} answered {r.status_code}: {r.text[:200]}")
    rows: list[dict[str, Any]] = r.json()
    return [_Segment(str(x["start"]), str(x["version"]), bool(x["is_available"]) and not x["is_overshadowed"])
            for x in rows]


def unserved(http: httpx.Client, url: str, results: Iterable[ChunkResult]) -> list[ChunkResult]:
    """The published chunks whose new version the server does not serve yet."""
    published = [r for r in results if r.status in ("published", "success") and r.version]
    waiting: list[ChunkResult] = []
    by_ds: dict[str, list[ChunkResult]] = {}
    for r in published:
        by_ds.setdefault(r.datasource, []).append(r)
    for ds, chunks in by_ds.items():
        start = format_instant(min(c.interval.start for c in chunks))
        end = format_instant(max(c.interval.end for c in chunks))
        live = {(s.start, s.version) for s in _segments(http, url, ds, start, end) if s.live}
        for c in chunks:
            versions = {v.strip() for v in c.version.split(",")}
            if not any((format_instant(c.interval.start), v) in live for v in versions):
                waiting.append(c)
    return waiting


def wait_served(settings: Settings, results: list[ChunkResult], *, timeout_s: float = 120.0,
                poll_s: float = 0.5, on_poll: Callable[[int, int], None] | None = None) -> list[ChunkResult]:
    """Poll until the server serves every published chunk's new version; the chunks still not served
    when ``timeout_s`` ran out (empty: all served). ``on_poll(served, total)`` reports progress.
    Raises :class:`ServingUnreachable` when the server cannot be asked."""
    url = server_url(settings)
    total = sum(1 for r in results if r.status in ("published", "success") and r.version)
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=30) as http:
        while True:
            waiting = unserved(http, url, results)
            if on_poll is not None:
                on_poll(total - len(waiting), total)
            if not waiting or time.monotonic() >= deadline:
                return waiting
            time.sleep(poll_s)
