"""POST /radstack/v1/backfill (the console's backfill button): checked like `radctl backfill`, run as a
task in a child `radctl backfill` process, its summary the task report."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import orjson
import pytest

from radstack.time.intervals import format_instant, parse_instant
from tests.fixtures.batch import WEB_SPEC as SPEC
from tests.fixtures.batch import set_watermark, write_archive
from tests.fixtures.server import running_server

pytestmark = pytest.mark.slow

T0 = parse_instant("2026-11-20T00:00:00Z")
HOUR = 3_600_000


def test_backfill_button_endpoint(radstack_home: Path) -> None:
    (radstack_home / "datasources").mkdir()
    (radstack_home / "datasources" / "web.yaml").write_text(SPEC)
    with running_server(radstack_home) as srv:
        ctx = srv.ctx
        events = [{"timestamp": format_instant(T0 + i * 1000), "id": f"e{i}", "page": "/a"} for i in range(300)]
        write_archive(ctx.deep_storage, "web", [orjson.dumps(e) for e in events + events[:20]])  # 20 re-sends
        url = srv.url + "/radstack/v1/backfill"

        assert httpx.get(srv.url + "/radstack/v1/capabilities").json()["backfill"] is True
        bad = httpx.post(url, json={"dataSource": "web", "interval": "yesterday"})
        assert bad.status_code == 400 and bad.json()["error"] == "druidException"
        unknown = httpx.post(url, json={"dataSource": "nope", "interval": "2026-11-20/PT1H"})
        assert unknown.status_code == 400 and "nope" in unknown.json()["errorMessage"]
        open_ = httpx.post(url, json={"dataSource": "web", "interval": "2026-11-20/PT1H"})
        assert open_.status_code == 400 and "watermark" in open_.json()["errorMessage"]

        set_watermark(ctx.metadata, "web", T0 + 2 * HOUR)
        r = httpx.post(url, json={"dataSource": "web", "interval": "2026-11-20/PT1H"})
        assert r.status_code == 200, r.text
        task = r.json()["task"]
        deadline = time.monotonic() + 300
        while True:
            st = httpx.get(f"{srv.url}/druid/indexer/v1/task/{task}/status").json()["status"]
            if st["status"] != "RUNNING" or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert st["status"] == "SUCCESS", st
        ctx.broker.refresh(force=True)
        total = httpx.post(srv.url + "/druid/v2/sql", json={"query": 'SELECT SUM("count") AS n FROM web'}).json()
        assert total == [{"n": 300}], "the rebuild dedups the re-sends exactly"
