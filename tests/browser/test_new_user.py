"""A new user's path (#51): the quickstart's stack, then the console — its Tasks view shows the
quickstart's rebuild with its log, the Query view lists ``ads`` and its columns, and the history holds the
query just run. The quickstart runs as ``radctl quickstart --short`` on a fresh home with its own ports."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.browser.test_console import css, open_view, table_rows, wait_for
from tests.integration.test_readme_tour import Shell, _env

pytestmark = pytest.mark.slow

QUERY = 'SELECT publisher, SUM("count") AS events FROM ads GROUP BY 1 ORDER BY 2 DESC LIMIT 3'


def test_a_new_users_path_through_the_console(chrome: Any, tmp_path: Path, console_artifacts: Path) -> None:
    env, port = _env(tmp_path / "home")
    sh = Shell(env, port, tmp_path / "session.log")
    try:
        sh.run("radctl quickstart --short", timeout=900)  # leaves the stack running
        url = f"http://127.0.0.1:{port}"

        # Tasks: the quickstart's rebuild, started by it, with its log
        open_view(chrome, url, "ingestion")
        rows = wait_for(chrome, lambda: [r for r in table_rows(chrome, "#task-table") if r[3] == "radctl quickstart"],
                        what="the quickstart's rebuild in the task table")
        assert rows[0][1] == "radstack_backfill" and rows[0][2] == "ads" and rows[0][4] == "SUCCESS"
        row = next(tr for tr in css(chrome, "#task-table tbody tr")
                   if tr.find_elements(By.TAG_NAME, "td")[3].text == "radctl quickstart")
        row.click()
        log = wait_for(chrome, lambda: css(chrome, "#task-log")[0].text, what="the rebuild's log")
        assert "started by radctl quickstart" in log and "SUCCESS" in log and "published" in log
        chrome.save_screenshot(str(console_artifacts / "new-user-task-log.png"))
        chrome.find_element(By.ID, "modal-close").click()

        # Query: ads and its columns, then a query, which the history keeps
        open_view(chrome, url, "query")
        ads = wait_for(chrome, lambda: css(chrome, "#schema details[data-datasource='ads']")[0], what="ads listed")
        ads.find_element(By.TAG_NAME, "summary").click()
        columns = wait_for(chrome, lambda: [li.get_attribute("data-column") for li in css(chrome, "#schema li[data-column]")],
                           what="ads's columns")
        assert {"__time", "publisher", "count"} <= set(columns)
        ta = css(chrome, ".editor textarea")[0]
        ta.send_keys(Keys.CONTROL, "a")
        ta.send_keys(Keys.DELETE)
        ta.send_keys(QUERY)
        ta.send_keys(Keys.CONTROL, Keys.ENTER)
        wait_for(chrome, lambda: css(chrome, "#results"), what="the query's result")
        assert 1 <= len(table_rows(chrome, "#results")) <= 3
        history = wait_for(chrome, lambda: css(chrome, "#history ol.history li"), what="the history")
        assert QUERY in history[0].text
        chrome.save_screenshot(str(console_artifacts / "new-user-query.png"))
    finally:
        with contextlib.suppress(AssertionError):
            sh.run("radctl down", timeout=300)
