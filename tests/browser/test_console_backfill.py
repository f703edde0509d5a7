"""The console's Lambda picture made by a real backfill: real-time segments (the streaming job's
convention: version = interval start, appended partitions, written by the shared indexer), raw events
in the archive, then the Ingestion view's Backfill button → the Spark rebuild publishes a newer version
→ the Timeline shows the batch version serving and the real-time partitions overshadowed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pyarrow as pa
import pytest

from radstack.spec import load_datasource_spec
from radstack.storage.indexer import index_partition
from radstack.storage.publish import publish
from radstack.time.intervals import Interval, format_instant, parse_instant
from tests.browser.test_console import css, open_view, wait_for
from tests.fixtures.batch import WEB_SPEC as SPEC
from tests.fixtures.batch import set_watermark, write_archive
from tests.fixtures.server import running_server

pytestmark = pytest.mark.slow

T0 = parse_instant("2026-11-20T00:00:00Z")
HOUR = 3_600_000


def _sum(url: str) -> int:
    r = httpx.post(url + "/druid/v2/sql", json={"query": 'SELECT SUM("count") AS n FROM web'})
    return int(r.json()[0]["n"] or 0)


def test_backfill_button_overshadows_realtime(chrome: Any, radstack_home: Path, console_artifacts: Path) -> None:
    (radstack_home / "datasources").mkdir()
    spec_file = radstack_home / "datasources" / "web.yaml"
    spec_file.write_text(SPEC)
    schema = load_datasource_spec(spec_file).data_schema
    events = [{"timestamp": format_instant(T0 + i * 7000), "id": f"e{i}", "page": f"/p{i % 3}"} for i in range(400)]
    with running_server(radstack_home) as srv:
        ctx = srv.ctx
        # real time: two micro-batches appended to the hour's real-time version; the late tail is missing
        hour = Interval(T0, T0 + HOUR)
        version = format_instant(hour.start)
        offsets: dict[Interval, int] = {}
        for batch in (events[:200], events[200:350]):
            res = index_partition(pa.Table.from_pylist(batch), schema, version=version, deep_storage=ctx.deep_storage,
                                  shard="append", partition_offset=dict(offsets))
            publish(ctx.metadata, ctx.deep_storage, res.segments)
            offsets[hour] = offsets.get(hour, 0) + len(res.segments)
        ctx.broker.refresh(force=True)
        assert _sum(srv.url) == 350
        # the archive has every event, some twice
        write_archive(ctx.deep_storage, "web", [orjson.dumps(e) for e in events + events[:30]], per_file=120)
        set_watermark(ctx.metadata, "web", T0 + 2 * HOUR)

        open_view(chrome, srv.url, "ingestion")
        btn = wait_for(chrome, lambda: css(chrome, "#backfill-submit")[0], what="backfill button")
        css(chrome, "#backfill-datasource")[0].send_keys("web")
        css(chrome, "#backfill-interval")[0].send_keys("2026-11-20T00:00:00Z/PT1H")
        btn.click()
        text = wait_for(chrome, lambda: "radstack_backfill" in (t := css(chrome, "#backfill-result")[0].text) and t,
                        what="the backfill task id")
        task = next(tok.strip('",') for tok in text.split() if tok.strip('",').startswith("radstack_backfill"))
        deadline = time.monotonic() + 300
        while (st := httpx.get(f"{srv.url}/druid/indexer/v1/task/{task}/status").json()["status"])["status"] == "RUNNING":
            assert time.monotonic() < deadline, "backfill did not finish"
            time.sleep(1)
        assert st["status"] == "SUCCESS", st
        ctx.broker.refresh(force=True)
        assert _sum(srv.url) == 400, "the batch version serves every event once"

        open_view(chrome, srv.url, "timeline/web")
        wait_for(chrome, lambda: css(chrome, "#timeline g.served-piece"), what="timeline")
        served = {g.get_attribute("data-kind") for g in css(chrome, "#timeline g.served-piece")}
        assert served == {"batch"}
        rt = {g.get_attribute("data-state") for g in css(chrome, "#timeline g.seg[data-kind='realtime']")}
        assert rt and rt <= {"overshadowed", "unused"}, rt
        chrome.save_screenshot(str(console_artifacts / "timeline-after-backfill.png"))
