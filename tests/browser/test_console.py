"""The web console in a real browser: Debian's headless Chromium driven by Selenium against the real
server (uvicorn + SQLite metadata + local deep storage) with data loaded through the task API.

Screenshots go to test-artifacts/browser/. The Lambda picture (real-time partitions overshadowed by a
newer batch version) is made with task-API loads (see console_data); the same view after the batch
layer's own backfill belongs to the batch issue.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from batch.rebuild_tasks import RebuildTask
from radstack.time.intervals import Interval, parse_instant
from tests.browser.console_data import DAYS, PAGES, events, load_lambda_picture, run_task, sql, task
from tests.fixtures.server import running_server

pytestmark = pytest.mark.slow

KEEP_OVERSHADOWED = {"coordinator": {"overshadowed_unused_delay_seconds": 3600}}


def wait_for(driver: Any, cond: Callable[[], Any], timeout: float = 20, what: str = "condition") -> Any:
    def check(_d: Any) -> Any:
        try:
            return cond()
        except Exception:  # noqa: BLE001 - element not there yet, stale, …
            return False

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(check, message=f"waiting for {what}")


def css(driver: Any, selector: str) -> list[Any]:
    return driver.find_elements(By.CSS_SELECTOR, selector)


def open_view(driver: Any, url: str, view: str) -> None:
    driver.get(f"{url}/#/{view}")
    wait_for(driver, lambda: driver.execute_script("return document.body.dataset.ready") == "1", what="console start")


def run_sql(driver: Any, query: str) -> None:
    ta = wait_for(driver, lambda: css(driver, ".editor textarea")[0], what="editor")
    ta.send_keys(Keys.CONTROL, "a")
    ta.send_keys(Keys.DELETE)
    ta.send_keys(query)
    ta.send_keys(Keys.CONTROL, Keys.ENTER)
    wait_for(driver, lambda: css(driver, "#results") or css(driver, "#query-output .error-box"), what="query result")


def table_rows(driver: Any, selector: str) -> list[list[str]]:
    return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in css(driver, f"{selector} tbody tr")]


@pytest.fixture
def lambda_server(radstack_home: Path) -> Iterator[tuple[Any, dict[str, Any]]]:
    with running_server(radstack_home, KEEP_OVERSHADOWED) as srv:
        info = load_lambda_picture(srv.url)
        # one overshadowed real-time partition of day 1 is then marked unused, to show that state too
        unused = next(s for s in info["realtime"] if s["interval"].startswith(DAYS[0]) and s["shardSpec"]["partitionNum"] == 1)
        r = httpx.delete(f"{srv.url}/druid/coordinator/v1/datasources/wiki/segments/{unused['identifier']}")
        assert r.status_code == 200, r.text
        info["unused"] = unused["identifier"]
        yield srv, info


def test_datasources_view(chrome: Any, lambda_server: Any, console_artifacts: Path) -> None:
    srv, _ = lambda_server
    served = sql(srv.url, "SELECT SUM(num_rows) AS n, SUM(\"size\") AS b, COUNT(*) AS c FROM sys.segments "
                          "WHERE datasource = 'wiki' AND is_overshadowed = 0")[0]
    open_view(chrome, srv.url, "datasources")
    row = wait_for(chrome, lambda: table_rows(chrome, "#datasources")[0], what="datasource row")
    chrome.save_screenshot(str(console_artifacts / "datasources.png"))
    assert row[0] == "wiki"
    assert row[1] == f"{served['n']:,}"
    assert row[3].startswith(f"{served['c']} ") and "(+3 overshadowed)" in row[3]
    assert row[4] == "2024-01-01 00:00 → 2024-01-04 00:00"
    assert [b.text for b in css(chrome, "#datasources tbody tr td .badge")] == ["batch 2", "real-time 2"]
    assert row[7].endswith(" ago")


def test_query_table_chart_csv_and_errors(chrome: Any, lambda_server: Any, console_artifacts: Path) -> None:
    srv, info = lambda_server
    open_view(chrome, srv.url, "query")
    query = "SELECT TIME_FLOOR(__time, 'P1D') AS \"day\", SUM(added) AS added FROM wiki GROUP BY 1 ORDER BY 1"
    run_sql(chrome, query)
    # syntax highlighting of what was typed
    kws = [e.text for e in css(chrome, ".editor pre .tok-kw")]
    assert kws[:1] == ["SELECT"] and "FROM" in kws and "GROUP" in kws
    assert [e.text for e in css(chrome, ".editor pre .tok-fn")][:2] == ["TIME_FLOOR", "SUM"]
    assert [e.text for e in css(chrome, ".editor pre .tok-str")] == ["'P1D'"]
    # the table: the batch truth for days 1-2, both real-time partitions for day 3
    rows = table_rows(chrome, "#results")
    assert rows == [[f"{d}T00:00:00.000Z", f"{info['added_by_day'][d]:,}"] for d in DAYS]
    assert [th.text for th in css(chrome, "#results thead th")] == ["day", "added"]
    info_text = css(chrome, "#query-info")[0].text
    assert info_text.startswith("3 rows in ") and info_text.endswith(" ms"), info_text
    # the chart: a time series with one point per day
    chart = css(chrome, "#chart")[0]
    assert chart.get_attribute("data-kind") == "timeseries"
    assert len(chart.find_elements(By.CSS_SELECTOR, "g.series circle")) == 3
    assert len(chart.find_elements(By.CSS_SELECTOR, "g.series polyline")) == 1
    chrome.save_screenshot(str(console_artifacts / "query-timeseries.png"))

    # CSV download of the same rows
    css(chrome, "#csv")[0].click()
    files = wait_for(chrome, lambda: [p for p in chrome.download_dir.glob("*.csv")], what="CSV download")
    got = list(csv.reader(io.StringIO(files[0].read_text())))
    assert got == [["day", "added"]] + [[f"{d}T00:00:00.000Z", str(info["added_by_day"][d])] for d in DAYS]

    # top N as bars
    run_sql(chrome, "SELECT page, SUM(added) AS added FROM wiki GROUP BY 1 ORDER BY 2 DESC LIMIT 3")
    chart = css(chrome, "#chart")[0]
    assert chart.get_attribute("data-kind") == "bars"
    assert len(chart.find_elements(By.CSS_SELECTOR, "rect.bar")) == 3
    assert [r[0] for r in table_rows(chrome, "#results")] == list(reversed(PAGES))[:3]
    chrome.save_screenshot(str(console_artifacts / "query-bars.png"))

    # errors exactly as Druid returns them
    bad = "SELECT no_such_column FROM wiki"
    expected = httpx.post(f"{srv.url}/druid/v2/sql", json={"query": bad}).json()
    run_sql(chrome, bad)
    box = css(chrome, "#query-output .error-box")[0]
    assert box.find_element(By.CSS_SELECTOR, ".msg").text == expected["errorMessage"]
    assert json.loads(box.find_element(By.CSS_SELECTOR, "pre.json").text) == expected
    assert not css(chrome, "#results")
    chrome.save_screenshot(str(console_artifacts / "query-error.png"))


def test_query_schema_browser_history_explain_and_cancel_only_while_running(
        chrome: Any, lambda_server: Any, console_artifacts: Path) -> None:
    """#51: the Query view lists datasources and their columns (click inserts), keeps a local history,
    EXPLAINs, and offers Cancel only while a query runs."""
    srv, _ = lambda_server
    open_view(chrome, srv.url, "query")
    chrome.execute_script("localStorage.removeItem('radstack.queryHistory')")
    open_view(chrome, srv.url, "query")
    assert not css(chrome, "#cancel")[0].is_displayed()  # idle: nothing to cancel
    ds = wait_for(chrome, lambda: css(chrome, "#schema details[data-datasource='wiki']")[0], what="the wiki datasource")
    ds.find_element(By.TAG_NAME, "summary").click()
    cols = wait_for(chrome, lambda: [li.get_attribute("data-column") for li in css(chrome, "#schema li[data-column]")],
                    what="wiki's columns")
    assert cols[0] == "__time" and "page" in cols and "added" in cols
    assert "TIMESTAMP" in css(chrome, "#schema li[data-column='__time']")[0].text
    ta = css(chrome, ".editor textarea")[0]
    ta.send_keys(Keys.CONTROL, "a")
    ta.send_keys(Keys.DELETE)
    ta.send_keys("SELECT COUNT(DISTINCT ")
    css(chrome, "#schema li[data-column='page']")[0].click()  # inserted at the cursor
    ta.send_keys(") AS pages FROM ")
    css(chrome, "#schema details[data-datasource='wiki'] .ds-name")[0].click()
    assert ta.get_attribute("value") == "SELECT COUNT(DISTINCT page) AS pages FROM wiki"
    ta.send_keys(Keys.CONTROL, Keys.ENTER)
    wait_for(chrome, lambda: css(chrome, "#results"), what="query result")
    assert table_rows(chrome, "#results") == [[str(len(PAGES))]]
    history = wait_for(chrome, lambda: css(chrome, "#history ol.history li"), what="history")
    assert "SELECT COUNT(DISTINCT page) AS pages FROM wiki" in history[0].text and "1 rows" in history[0].text
    css(chrome, "#explain")[0].click()
    plan = wait_for(chrome, lambda: css(chrome, "#explain-output pre")[0].text, what="the plan")
    assert '"queryType"' in plan and "wiki" in plan
    chrome.save_screenshot(str(console_artifacts / "query-schema-history-explain.png"))
    # history survives a reload and loads a statement back into the editor
    open_view(chrome, srv.url, "query")
    wait_for(chrome, lambda: css(chrome, "#history ol.history li"), what="history after reload")[0].click()
    assert css(chrome, ".editor textarea")[0].get_attribute("value") == "SELECT COUNT(DISTINCT page) AS pages FROM wiki"


def test_timeline_shows_realtime_overshadowed_by_batch(chrome: Any, lambda_server: Any, console_artifacts: Path) -> None:
    srv, info = lambda_server
    open_view(chrome, srv.url, "timeline/wiki")
    wait_for(chrome, lambda: css(chrome, "#timeline svg g.seg"), what="timeline segments")
    chrome.save_screenshot(str(console_artifacts / "timeline.png"))
    served = [(g.get_attribute("data-kind"), g.get_attribute("data-version")) for g in css(chrome, "#timeline g.served-piece")]
    batch_version = info["batch"][0]["version"]
    rt_version = info["realtime"][0]["version"]
    assert served == [("batch", batch_version), ("batch", batch_version), ("realtime", rt_version)]

    def states(kind: str) -> dict[str, str]:
        return {g.get_attribute("data-segment-id"): g.get_attribute("data-state")
                for g in css(chrome, f"#timeline g.seg[data-kind='{kind}']")}

    rt, batch = states("realtime"), states("batch")
    assert set(batch.values()) == {"visible"} and set(batch) == {s["identifier"] for s in info["batch"]}
    assert set(rt) == {s["identifier"] for s in info["realtime"]}
    for s in info["realtime"]:
        want = ("unused" if s["identifier"] == info["unused"] else
                "visible" if s["interval"].startswith(DAYS[2]) else "overshadowed")
        assert rt[s["identifier"]] == want, s["identifier"]
    summary = css(chrome, "#tl-summary")[0].text
    assert "8 segments: 4 serving, 3 overshadowed, 1 unused" in summary, summary

    # a click shows the segment's DataSegment JSON, as the coordinator API has it
    sid = info["batch"][0]["identifier"]
    css(chrome, f"#timeline g.seg[data-segment-id='{sid}']")[0].click()
    text = wait_for(chrome, lambda: sid in (t := css(chrome, "#segment-detail pre.json")[0].text) and t,
                    what="segment JSON")
    want = httpx.get(f"{srv.url}/druid/coordinator/v1/metadata/datasources/wiki/segments/{sid}").json()
    assert json.loads(text) == want
    assert "serving" in css(chrome, "#segment-detail")[0].text
    chrome.save_screenshot(str(console_artifacts / "timeline-segment.png"))
    chrome.find_element(By.ID, "modal-close").click()

    # an unused segment opens too (the coordinator API needs includeUnused for it)
    css(chrome, f"#timeline g.seg[data-segment-id='{info['unused']}']")[0].click()
    # read the text inside the wait: the modal re-renders once the segment's JSON has arrived
    text = wait_for(chrome, lambda: info["unused"] in (t := css(chrome, "#segment-detail pre.json")[0].text) and t,
                    what="unused segment JSON")
    assert json.loads(text)["identifier"] == info["unused"]
    chrome.find_element(By.ID, "modal-close").click()

    # a time range: only day 3 → one served piece, real-time
    open_view(chrome, srv.url, "timeline/wiki?interval=2024-01-03/2024-01-04")
    wait_for(chrome, lambda: len(css(chrome, "#timeline g.served-piece")) == 1, what="windowed timeline")
    assert css(chrome, "#timeline g.served-piece")[0].get_attribute("data-kind") == "realtime"
    assert {g.get_attribute("data-state") for g in css(chrome, "#timeline g.seg")} == {"visible"}


def test_ingestion_view_tasks_and_state(chrome: Any, lambda_server: Any, console_artifacts: Path) -> None:
    srv, _ = lambda_server
    # what the archiver and the streaming job store in the metadata store's state table
    meta = srv.ctx.metadata
    now = int(time.time() * 1000)
    meta.put_state("archiver.stats.radstack-archiver", {"records": 1234, "bytes": 987654, "files": 7, "flushes": 7,
                                                        "invalid_json": 2, "updated": now})
    meta.put_state("archiver.watermark.wiki-raw", {"watermark": now - 90_000, "partitions": {"0": now - 90_000}, "updated": now})
    meta.put_state("streaming.wiki", {"status": "RUNNING", "processed": 5000, "thrownAway": 12, "unparseable": 3,
                                      "deadLettered": 1, "lag": 40, "processedRowsPerSecond": 812.5, "updated": now,
                                      "lastError": "batch 17: deep storage write timed out"})
    # a rebuild run by the quickstart is a task too, with its own log (#51)
    rebuild = RebuildTask(srv.settings, meta, "wiki", Interval(parse_instant(DAYS[0]), parse_instant(DAYS[1])),
                          chunks=24, force=False, started_by="radctl quickstart")
    rebuild.line("rebuilding the day in one Spark job")
    rebuild.finish_chunks([{"interval": DAYS[0], "status": "published"}])
    open_view(chrome, srv.url, "ingestion")
    wait_for(chrome, lambda: table_rows(chrome, "#task-table"), what="task table")
    chrome.save_screenshot(str(console_artifacts / "ingestion.png"))

    def counters(panel: str) -> dict[str, str]:
        return {c.get_attribute("data-counter"): c.find_element(By.CSS_SELECTOR, ".v").text
                for c in css(chrome, f"#{panel} .card")}

    def read(f: Callable[[], Any]) -> Any:  # the view re-renders as it polls: read again after a stale element
        return wait_for(chrome, lambda: (f(),), what="a read between two renders")[0]

    s = read(lambda: counters("streaming"))
    assert (s["processed"], s["thrownAway"], s["unparseable"], s["deadLettered"], s["lag"]) == ("5,000", "12", "3", "1", "40")
    assert "warn" in read(lambda: css(chrome, "#streaming .card[data-counter='thrownAway']")[0].get_attribute("class"))
    assert read(lambda: css(chrome, "#streaming .error-box .msg")[0].text) == "batch 17: deep storage write timed out"
    assert "null" not in read(lambda: css(chrome, "#streaming")[0].text)
    # an instant reads as a time and keys as words, not 1,795,875,657,997 and processedRowsPerSecond (#51)
    streaming_text = read(lambda: css(chrome, "#streaming")[0].text)
    assert not re.search(r"\d{1,3}(,\d{3}){4}", streaming_text) and "processed rows per second" in streaming_text
    a = read(lambda: counters("archiver"))
    assert (a["records"], a["bytes"], a["invalid_json"]) == ("1,234", "964.5 KB", "2")
    wm = read(lambda: table_rows(chrome, "#watermarks"))
    assert wm[0][0] == "wiki-raw" and wm[0][2].startswith("1 min")
    # tasks, newest first, with the row counters of their reports
    tasks = httpx.get(f"{srv.url}/druid/indexer/v1/tasks").json()
    rows = read(lambda: table_rows(chrome, "#task-table"))
    assert [r[4] for r in rows] == ["SUCCESS"] * 4
    assert [r[3] for r in rows] == ["radctl quickstart"] + ["task API"] * 3
    want_processed = [len(events(DAYS[:2], added=100)), len(events(DAYS, added=10, hours=range(1, 24, 2))),
                      len(events(DAYS, added=1))]
    assert [int(r[7].replace(",", "")) for r in rows[1:]] == want_processed
    assert read(lambda: [r.get_attribute("data-task-id") for r in css(chrome, "#task-table tbody tr")]) == [t["id"] for t in tasks]
    # backfill: the batch layer's endpoint is there, so (auth off) the button is offered
    assert css(chrome, "#backfill-submit") and not css(chrome, "#backfill-unavailable")
    css(chrome, "#task-table tbody tr")[1].click()
    wait_for(chrome, lambda: "ingestionStatsAndErrors" in css(chrome, "#modal-body")[0].text, what="task report")
    chrome.find_element(By.ID, "modal-close").click()
    css(chrome, "#task-table tbody tr")[0].click()  # the rebuild: its log opens with it
    log = wait_for(chrome, lambda: css(chrome, "#task-log")[0].text, what="the rebuild's log")
    assert "started by radctl quickstart" in log and "SUCCESS: 1 of 1 chunk(s) published" in log


def test_cancel_a_running_query(chrome: Any, lambda_server: Any, console_artifacts: Path) -> None:
    srv, _ = lambda_server
    open_view(chrome, srv.url, "query")
    ta = wait_for(chrome, lambda: css(chrome, ".editor textarea")[0], what="editor")
    ta.send_keys(Keys.CONTROL, "a")
    ta.send_keys(Keys.DELETE)
    # 192^5 rows: minutes of work, so it is still running when Cancel is pressed
    ta.send_keys("SELECT COUNT(*) FROM wiki a CROSS JOIN wiki b CROSS JOIN wiki c CROSS JOIN wiki d CROSS JOIN wiki e")
    css(chrome, "#run")[0].click()
    wait_for(chrome, lambda: css(chrome, "#query-info")[0].text == "running…", what="running")
    cancel = css(chrome, "#cancel")[0]
    assert cancel.is_displayed() and cancel.is_enabled()
    time.sleep(0.5)
    started = time.monotonic()
    cancel.click()
    box = wait_for(chrome, lambda: css(chrome, "#query-output .error-box")[0], timeout=30, what="cancelled")
    assert time.monotonic() - started < 10
    body = json.loads(box.find_element(By.CSS_SELECTOR, "pre.json").text)
    assert body["category"] == "CANCELED" and body["errorMessage"].endswith("was cancelled"), body
    assert not css(chrome, "#cancel")[0].is_displayed() and css(chrome, "#run")[0].is_enabled()  # idle again
    chrome.save_screenshot(str(console_artifacts / "query-cancelled.png"))
    assert sql(srv.url, "SELECT COUNT(*) AS n FROM wiki")[0]["n"] == 192  # the server is fine afterwards


def test_timeline_realtime_partitions_per_hour(chrome: Any, radstack_home: Path, console_artifacts: Path) -> None:
    """Hourly real-time sets with three appended partitions each; a DAY batch set over the first day."""
    def hourly(spec: dict[str, Any]) -> dict[str, Any]:
        spec = copy.deepcopy(spec)
        spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "hour"
        return spec

    days = ("2024-01-01", "2024-01-02")
    with running_server(radstack_home, KEEP_OVERSHADOWED) as srv:
        for k in range(3):
            run_task(srv.url, hourly(task("ads", events(days, added=k + 1, hours=range(24)), append=True)))
        run_task(srv.url, task("ads", events(days[:1], added=100, hours=range(24)), append=False))
        open_view(chrome, srv.url, "timeline/ads")
        wait_for(chrome, lambda: css(chrome, "#timeline svg g.seg"), what="timeline segments")
        chrome.save_screenshot(str(console_artifacts / "timeline-hourly-partitions.png"))
        served = [g.get_attribute("data-kind") for g in css(chrome, "#timeline g.served-piece")]
        assert served == ["batch"] + ["realtime"] * 24
        rt = css(chrome, "#timeline g.seg[data-kind='realtime']")
        assert len(rt) == 144
        states = [g.get_attribute("data-state") for g in rt]
        assert states.count("overshadowed") == 72 and states.count("visible") == 72
        # each hour's partitions p0, p1, p2 are stacked in three rows, the same three for every hour
        rows_of: dict[str, set[float]] = {}
        for g in rt:
            label = g.find_element(By.TAG_NAME, "text").text
            rows_of.setdefault(label, set()).add(float(g.find_element(By.CSS_SELECTOR, "rect.body").get_attribute("y")))
        assert sorted(rows_of) == ["p0", "p1", "p2"] and all(len(ys) == 1 for ys in rows_of.values())
        assert len({next(iter(ys)) for ys in rows_of.values()}) == 3
