"""The console's server side: static files, its JSON endpoints, and the Timeline view model."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from radstack.passwords import hash_password
from radstack.storage.metadata import SegmentRow
from radstack.storage.segments import DataSegment, ShardSpec
from radstack.time.intervals import Interval, format_instant, parse_instant
from serving.console.timeline_view import segment_kind, timeline_view

DAY = 86_400_000
D1 = parse_instant("2024-01-01T00:00:00Z")


def seg(start: int, end: int, version: str, pn: int = 0, parts: int = 1, typ: str = "numbered",
        compaction: dict[str, Any] | None = None, rows: int = 10) -> DataSegment:
    return DataSegment("wiki", Interval(start, end), version, shard_spec=ShardSpec(typ, pn, parts),
                       num_rows=rows, size=100, last_compaction_state=compaction)


def row(s: DataSegment, used: bool = True) -> SegmentRow:
    return SegmentRow(s, used, D1 + 5 * DAY, None)


def test_segment_kinds() -> None:
    assert segment_kind(seg(D1, D1 + DAY, format_instant(D1), parts=0)) == "realtime"
    assert segment_kind(seg(D1, D1 + DAY, "2024-01-02T03:00:00.000Z", parts=3)) == "batch"
    assert segment_kind(seg(D1, D1 + DAY, "v", compaction={"partitionsSpec": {}})) == "compacted"
    assert segment_kind(seg(D1, D1 + DAY, "v", compaction={"type": "handoff"})) == "handed-off"
    assert segment_kind(seg(D1, D1 + DAY, "v", typ="tombstone")) == "tombstone"


def test_timeline_view_realtime_overshadowed_by_batch() -> None:
    rt_v = [format_instant(D1 + i * DAY) for i in range(3)]
    rt = [seg(D1 + i * DAY, D1 + (i + 1) * DAY, rt_v[i], pn=p, parts=0) for i in range(3) for p in range(2)]
    batch = [seg(D1, D1 + 2 * DAY, "2024-01-03T03:00:00.000Z", pn=p, parts=2) for p in range(2)]
    # a newer re-run of the first 12 hours only: the batch set stays visible, clipped, after it
    rerun = seg(D1, D1 + DAY // 2, "2024-01-05T09:00:00.000Z")
    incomplete = seg(D1 + 2 * DAY, D1 + 3 * DAY, "2024-01-06T00:00:00.000Z", pn=0, parts=2)  # 1 of 2
    old = seg(D1, D1 + DAY, "2023-12-31T00:00:00.000Z")
    rows = [row(s) for s in [*rt, *batch, rerun, incomplete]] + [row(old, used=False)]
    view = timeline_view("wiki", rows)
    assert (view["start"], view["end"]) == ("2024-01-01T00:00:00.000Z", "2024-01-04T00:00:00.000Z")
    served = [(p["start"][:13], p["end"][:13], p["kind"], p["version"][:10]) for p in view["served"]]
    assert served == [("2024-01-01T00", "2024-01-01T12", "batch", "2024-01-05"),
                      ("2024-01-01T12", "2024-01-03T00", "batch", "2024-01-03"),
                      ("2024-01-03T00", "2024-01-04T00", "realtime", "2024-01-03")]
    by_id = {s["id"]: s for s in view["segments"]}
    for s in rt[:4]:
        assert by_id[s.identifier]["overshadowed"] and not by_id[s.identifier]["visible"]
    for s in rt[4:]:
        assert not by_id[s.identifier]["overshadowed"]
        assert by_id[s.identifier]["visible"] == [["2024-01-03T00:00:00.000Z", "2024-01-04T00:00:00.000Z"]]
    assert by_id[batch[1].identifier]["visible"] == [["2024-01-01T12:00:00.000Z", "2024-01-03T00:00:00.000Z"]]
    assert not by_id[batch[0].identifier]["overshadowed"]
    inc = by_id[incomplete.identifier]
    assert (inc["visible"], inc["overshadowed"], inc["kind"]) == ([], False, "batch")
    assert by_id[old.identifier]["used"] is False and by_id[old.identifier]["overshadowed"] is False
    c = view["counts"]
    assert (c["total"], c["used"], c["unused"], c["overshadowed"], c["visible"]) == (11, 10, 1, 4, 5)
    assert (c["realtime"], c["batch"]) == (6, 5)


def test_timeline_view_window_clips_served_pieces() -> None:
    day = seg(D1, D1 + DAY, "2024-01-02T00:00:00.000Z")
    view = timeline_view("wiki", [row(day)], Interval(D1 + DAY // 4, D1 + DAY // 2))
    assert view["interval"] == "2024-01-01T06:00:00.000Z/2024-01-01T12:00:00.000Z"
    assert [(p["start"], p["end"]) for p in view["served"]] == [("2024-01-01T06:00:00.000Z", "2024-01-01T12:00:00.000Z")]
    assert timeline_view("wiki", [])["segments"] == []


@pytest.fixture
def console_client(radstack_home: Path) -> Iterator[Callable[[dict[str, Any] | None], TestClient]]:
    from operations.server import create_server_app as create_app
    from tests.fixtures.server import server_settings

    clients: list[TestClient] = []

    def make(overrides: dict[str, Any] | None = None) -> TestClient:
        c = TestClient(create_app(server_settings(radstack_home, overrides)), raise_server_exceptions=False)
        c.__enter__()
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.__exit__(None, None, None)


def test_static_files(console_client: Any) -> None:
    c = console_client(None)
    r = c.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/console/js/app.js">' in r.text
    for path, ctype in [("/console/js/app.js", "text/javascript"), ("/console/style.css", "text/css"),
                        ("/console/favicon.svg", "image/svg+xml")]:
        r = c.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith(ctype), path
    # every module the app imports is served (no CDN, no build step)
    import re

    for name in re.findall(r'from "\./([\w-]+\.js)"', c.get("/console/js/app.js").text):
        assert c.get(f"/console/js/{name}").status_code == 200, name
    assert c.get("/console/").text == c.get("/").text
    assert c.get("/console/nope.js").json()["category"] == "NOT_FOUND"
    assert c.get("/console/..%2F..%2Fapp.py").status_code == 404
    assert c.get("/console/../router.py").status_code == 404


def test_capabilities_ingestion_and_datasources(console_client: Any) -> None:
    c = console_client({"coordinator": {"overshadowed_unused_delay_seconds": 3600}})  # keep overshadowed used
    caps = c.get("/radstack/v1/capabilities").json()
    assert caps["auth"] is False and caps["backfill"] is True and caps["backfillEndpoint"] == "/radstack/v1/backfill"
    assert c.get("/radstack/v1/whoami").json()["role"] == "admin"
    meta = c.app.state.ctx.metadata
    meta.put_state("archiver.watermark.raw", {"watermark": D1, "partitions": {"0": D1}, "updated": D1})
    meta.put_state("archiver.stats.g1", {"records": 5})
    meta.put_state("streaming.wiki", {"processed": 7, "thrownAway": 1})
    meta.put_state("other.key", {"x": 1})
    ing = c.get("/radstack/v1/ingestion").json()
    assert [(s["dataSource"], s["value"]) for s in ing["streaming"]] == [("wiki", {"processed": 7, "thrownAway": 1})]
    assert [(s["group"], s["value"]) for s in ing["archiver"]["stats"]] == [("g1", {"records": 5})]
    wm = ing["archiver"]["watermarks"]
    assert [(w["topic"], w["watermark"]) for w in wm] == [("raw", "2024-01-01T00:00:00.000Z")] and wm[0]["behindMs"] > 0
    assert ing["tasks"] == []
    assert c.get("/radstack/v1/datasources").json() == []
    rt = seg(D1, D1 + DAY, format_instant(D1), parts=0, rows=3)
    batch = seg(D1 + DAY, D1 + 2 * DAY, "2024-01-03T00:00:00.000Z", rows=4)
    over = seg(D1 + DAY, D1 + 2 * DAY, format_instant(D1 + DAY), parts=0, rows=9)
    meta.publish([rt, batch, over])
    (ds,) = c.get("/radstack/v1/datasources").json()
    assert (ds["name"], ds["rows"], ds["segments"], ds["overshadowed"]) == ("wiki", 7, 2, 1)
    assert (ds["minTime"], ds["maxTime"]) == ("2024-01-01T00:00:00.000Z", "2024-01-03T00:00:00.000Z")
    assert ds["kinds"] == {"realtime": 1, "batch": 1} and ds["streaming"] == {"processed": 7, "thrownAway": 1}
    tl = c.get("/radstack/v1/timeline/wiki", params={"interval": "2024-01-02/2024-01-03"}).json()
    assert {s["id"]: s["overshadowed"] for s in tl["segments"]} == {batch.identifier: False, over.identifier: True}
    bad = c.get("/radstack/v1/timeline/wiki", params={"interval": "yesterday"})
    assert bad.status_code == 400 and bad.json()["category"] == "INVALID_INPUT"


def _basic(name: str, pw: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{pw}".encode()).decode()}


def test_auth_leaves_the_console_shell_open(console_client: Any) -> None:
    users = [{"name": "a", "password_hash": hash_password("pa"), "role": "admin"}, {"name": "r", "password_hash": hash_password("pr"), "role": "read"}]
    c = console_client({"server": {"auth": {"enabled": True, "users": users}}})
    for path in ("/", "/console/js/app.js", "/radstack/v1/capabilities"):
        assert c.get(path).status_code == 200, path
    assert c.get("/radstack/v1/capabilities").json()["auth"] is True
    assert c.get("/radstack/v1/datasources").status_code == 401
    assert c.get("/radstack/v1/datasources", headers=_basic("r", "pr")).status_code == 200
    for anonymous in (c.get("/radstack/v1/whoami"), c.get("/radstack/v1/whoami", headers=_basic("r", "bad"))):
        # whoami needs credentials (#34); no WWW-Authenticate, so a browser shows the console's own form
        assert anonymous.status_code == 401 and "www-authenticate" not in anonymous.headers
    assert c.get("/radstack/v1/whoami", headers=_basic("r", "pr")).json()["role"] == "read"
    assert c.get("/radstack/v1/whoami", headers=_basic("a", "pa")).json()["role"] == "admin"
