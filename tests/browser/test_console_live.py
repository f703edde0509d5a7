"""The console's Live view in headless Chromium against the real server: subscribe to a top-k query,
see its answer, publish a segment, see the pushed answer replace it, delete the subscription."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from radstack.spec import parse_data_schema
from radstack.storage.indexer import index_partition
from radstack.storage.publish import publish
from tests.browser.test_console import css, open_view, table_rows, wait_for
from tests.fixtures.broker import WIKI_SCHEMA, wiki_table
from tests.fixtures.server import running_server

pytestmark = pytest.mark.slow

TOPK = "SELECT page, SUM(added) AS added FROM wiki GROUP BY 1 ORDER BY 2 DESC LIMIT 3"


def _publish(srv: Any, table: pa.Table, version: str) -> None:
    ctx = srv.ctx
    result = index_partition(table, parse_data_schema(WIKI_SCHEMA), version=version, deep_storage=ctx.deep_storage)
    publish(ctx.metadata, ctx.deep_storage, result.segments)


def test_live_view_shows_pushed_answers(chrome: Any, radstack_home: Path, console_artifacts: Path) -> None:
    with running_server(radstack_home) as srv:
        day1 = wiki_table().filter(pa.compute.starts_with(wiki_table().column("ts"), "2024-01-01"))
        _publish(srv, day1, "2024-02-01T00:00:00.000Z")
        wait_for(chrome, lambda: httpx.post(f"{srv.url}/druid/v2/sql", json={"query": TOPK}).status_code == 200,
                 what="wiki served")
        open_view(chrome, srv.url, "live")
        ta = wait_for(chrome, lambda: css(chrome, ".editor textarea")[0], what="editor")
        ta.send_keys(Keys.CONTROL, "a")
        ta.send_keys(Keys.DELETE)
        ta.send_keys(TOPK)
        chrome.find_element(By.ID, "subscribe").click()
        wait_for(chrome, lambda: table_rows(chrome, "#live-results") == [["Main", "16"], ["Talk", "7"]], what="first answer")
        assert len(httpx.get(f"{srv.url}/radstack/v1/subscriptions").json()) == 1
        assert len(css(chrome, "#live-subscriptions tbody tr")) == 1

        _publish(srv, wiki_table(), "2024-03-01T00:00:00.000Z")  # both days, a newer version
        wait_for(chrome, lambda: table_rows(chrome, "#live-results") == [["Main", "38"], ["Talk", "15"], ["Help", "3"]],
                 what="pushed answer")
        assert int(chrome.find_element(By.ID, "live-output").get_attribute("data-pushes")) >= 2
        assert "answer #" in chrome.find_element(By.ID, "live-status").text
        chrome.save_screenshot(str(console_artifacts / "live.png"))

        chrome.find_element(By.ID, "unsubscribe").click()
        wait_for(chrome, lambda: httpx.get(f"{srv.url}/radstack/v1/subscriptions").json() == [], what="deleted")
