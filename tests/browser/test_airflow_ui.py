"""Reprocessing from the Airflow UI, in a real browser, against the embedded Airflow 3 that ``radctl up
--airflow`` runs (operations/airflow_local.py): sign in, open ``radstack_rebuild_web``, trigger it for a
closed hour; its rebuild fails (a corrupt file in the archive), the operator removes the file and clears
the failed task in the UI, the task runs again and the run succeeds. Then radstack's console timeline
shows the batch version serving that hour, the SQL answer equals the generator's truth, and the swap's
correction is in sys.corrections.

Screenshots (test-artifacts/browser/): ``airflow-failed.png``, ``airflow-cleared-success.png``,
``airflow-console-timeline.png``."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pyarrow as pa
import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from batch.airflow_api import AirflowClient
from operations import airflow_local, stack
from operations.processes import free_port
from radstack.config import Settings, load_settings
from radstack.spec import load_datasource_spec
from radstack.storage.indexer import index_partition
from radstack.storage.publish import publish
from radstack.storage.raw_archive import hour_dir
from radstack.time.intervals import Interval, format_instant, parse_instant
from tests.browser.test_console import css, open_view
from tests.fixtures.batch import WEB_SPEC, set_watermark, write_archive
from tests.fixtures.browser import open_chromium
from tests.fixtures.server import running_server

pytestmark = pytest.mark.slow

T0 = parse_instant("2026-11-20T00:00:00Z")
HOUR = 3_600_000
DAG = "radstack_rebuild_web"


def wait(cond: Callable[[], Any], timeout: float, what: str, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = cond()
        except Exception:  # noqa: BLE001 - not there yet, stale, an HTTP hiccup
            v = None
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


@pytest.fixture
def airflow(radstack_home: Path) -> Iterator[Settings]:
    """The embedded Airflow of this home (no retries: a failed task fails its run at once)."""
    (radstack_home / "radstack.yaml").write_text(
        f"airflow: {{embedded: true, port: {free_port()}, task_retries: 0}}\nspark: {{shuffle_partitions: 2}}\n")
    settings = load_settings(env={"RADSTACK_HOME": str(radstack_home)})
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env["RADSTACK_HOME"] = str(radstack_home)
    t0 = time.monotonic()
    up = subprocess.run([sys.executable, "-m", "operations", "airflow", "up"], env=env, capture_output=True,
                        text=True, timeout=600, check=False)  # fmt: skip
    assert up.returncode == 0, up.stdout + up.stderr
    print(f"radctl airflow up: healthy in {time.monotonic() - t0:.1f} s")
    try:
        yield settings
    finally:
        stack.down(settings, only=["airflow"])


def _task_state(api: AirflowClient, run_id: str, task: str) -> str | None:
    return api.request("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/{task}").get("state")


def _expect_state(api: AirflowClient, run_id: str, task: str, want: str, radstack_home: Path) -> None:
    """The task ended in ``want``; if not, the assertion carries the task's Airflow logs (the scheduler
    writes them under the embedded Airflow's home), so a failure in CI says why."""
    got = _task_state(api, run_id, task)
    if got == want:
        return
    logs = sorted((radstack_home / "airflow" / "logs").rglob(f"*{run_id}*/**/*{task}*/*"))
    text = "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-6000:]}" for p in logs if p.is_file())
    raise AssertionError(f"{task} of {run_id} is {got!r}, not {want!r}; its logs:\n{text or '(none found)'}")


def _events(n: int, start: int, seed: int, prefix: str) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [{"timestamp": format_instant(start + rng.randrange(0, HOUR)), "id": f"{prefix}{i}",
             "page": f"/p{rng.randrange(3)}"} for i in range(n)]  # fmt: skip


def _paste_json(driver: Any, text: str) -> None:
    """Replace the text of the trigger form's Monaco editor with ``text``: select all, delete, then paste
    (typed keys would meet Monaco's bracket and quote completion)."""
    def focus_editor() -> bool:  # the Advanced Options panel may still be opening: not interactable yet
        editor = css(driver, "[role=dialog] .monaco-editor")[-1]
        if not editor.is_displayed() or editor.size["height"] == 0:
            return False
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", editor)
        editor.click()
        return True

    wait(focus_editor, 15, "the trigger form's JSON editor")
    ActionChains(driver).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).send_keys(Keys.DELETE).perform()
    driver.execute_script(
        "const dt = new DataTransfer(); dt.setData('text/plain', arguments[0]);"
        "document.activeElement.dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true}));",
        text)
    shown = css(driver, "[role=dialog] .monaco-editor .view-lines")[-1].text
    assert json.loads(shown) == json.loads(text), shown


def test_rebuild_from_the_airflow_ui(airflow: Settings, radstack_home: Path, console_artifacts: Path) -> None:
    settings = airflow
    (radstack_home / "datasources").mkdir()
    (radstack_home / "datasources" / "web.yaml").write_text(WEB_SPEC)
    schema = load_datasource_spec(radstack_home / "datasources" / "web.yaml").data_schema
    hour = Interval(T0, T0 + HOUR)
    on_time, late = _events(400, T0, 1, "e"), _events(30, T0, 2, "late")
    api = AirflowClient(airflow_local.url(settings), airflow_local.USER, str(airflow_local.admin_password(settings)))
    wait(lambda: api.dag(DAG), 120, "the DAG processor to parse radstack_rebuild_web")

    with running_server(radstack_home) as srv:
        ctx = srv.ctx
        # real time served the hour without its late events; the archive has them all (and copies)
        res = index_partition(pa.Table.from_pylist(on_time), schema, version=format_instant(T0),
                              deep_storage=ctx.deep_storage, shard="append")  # fmt: skip
        publish(ctx.metadata, ctx.deep_storage, res.segments)
        write_archive(ctx.deep_storage, "web", [orjson.dumps(e) for e in on_time + late + on_time[:25]], per_file=200)
        set_watermark(ctx.metadata, "web", T0 + 2 * HOUR)
        corrupt = Path(ctx.deep_storage.root) / hour_dir("web", T0) / "zz-disk-error.parquet"
        corrupt.write_bytes(b"PAR1 this is not a parquet file")
        ctx.broker.refresh(force=True)
        sql = lambda q: httpx.post(srv.url + "/druid/v2/sql", json={"query": q}).json()  # noqa: E731
        assert sql('SELECT SUM("count") AS n FROM web')[0]["n"] == 400

        d = open_chromium()
        try:
            # sign in with the generated admin credential
            d.get(api.url + "/")
            wait(lambda: css(d, "input[name=username]"), 30, "the sign-in form")
            css(d, "input[name=username]")[0].send_keys(airflow_local.USER)
            css(d, "input[name=password]")[0].send_keys(str(airflow_local.admin_password(settings)))
            css(d, "button[type=submit]")[0].click()
            wait(lambda: "/auth/login" not in d.current_url, 30, "sign-in")

            # trigger the DAG for the closed hour, with a run id we choose
            d.get(f"{api.url}/dags/{DAG}")
            wait(lambda: css(d, "[data-testid=trigger-dag-button]"), 30, "the Trigger button")[0].click()
            wait(lambda: d.find_element(By.XPATH, "//*[text()='Advanced Options']"), 15, "the trigger form").click()
            _paste_json(d, json.dumps({"interval": hour.iso()}))
            run_id = f"ui_rebuild_{int(time.time())}"  # typed after the JSON: the editor applies it when it loses focus
            wait(lambda: css(d, "input[name=dagRunId]"), 15, "the run id field")[0].send_keys(run_id)
            submit = css(d, "[data-testid=trigger-dag-submit]")[0]
            d.execute_script("arguments[0].scrollIntoView({block: 'center'})", submit)
            submit.click()
            wait(lambda: api.run_state(DAG, run_id), 30, "the triggered run")

            # the rebuild fails on the corrupt archive file
            wait(lambda: api.run_state(DAG, run_id) == "failed", 300, "the run to fail", every=2)
            _expect_state(api, run_id, "wait_for_archive", "success", radstack_home)
            _expect_state(api, run_id, "rebuild", "failed", radstack_home)
            d.get(f"{api.url}/dags/{DAG}/runs/{run_id}/tasks/rebuild")
            wait(lambda: "failed" in d.find_element(By.TAG_NAME, "body").text.lower(), 30, "the failed task page")
            d.save_screenshot(str(console_artifacts / "airflow-failed.png"))

            # the operator removes the bad file and clears the failed task: it runs again
            corrupt.unlink()
            wait(lambda: css(d, "button[aria-label$='to clear']"), 30, "the task's Clear button")[0].click()
            # the dialog lists the task and what runs after it (downstream: verify), then Confirm
            confirm = wait(lambda: [b for b in css(d, "[role=dialog] button") if b.text.strip() == "Confirm"], 15,
                           "the Clear dialog")  # fmt: skip
            d.save_screenshot(str(console_artifacts / "airflow-clear-dialog.png"))
            confirm[-1].click()
            wait(lambda: api.run_state(DAG, run_id) == "success", 300, "the cleared run to succeed", every=2)
            assert _task_state(api, run_id, "rebuild") == "success" and _task_state(api, run_id, "verify") == "success"
            tries = api.request("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/rebuild")["try_number"]
            assert tries == 2, "the cleared task ran a second time"
            d.get(f"{api.url}/dags/{DAG}/runs/{run_id}")
            wait(lambda: "success" in d.find_element(By.TAG_NAME, "body").text.lower(), 30, "the run page")
            time.sleep(1)
            d.save_screenshot(str(console_artifacts / "airflow-cleared-success.png"))

            # radstack serves the batch version now: the console timeline and the SQL answer say so
            ctx.broker.refresh(force=True)
            open_view(d, srv.url, "timeline/web")
            wait(lambda: css(d, "#timeline g.served-piece"), 30, "the timeline")
            assert {g.get_attribute("data-kind") for g in css(d, "#timeline g.served-piece")} == {"batch"}
            d.save_screenshot(str(console_artifacts / "airflow-console-timeline.png"))
        finally:
            d.quit()
            api.close()
        assert sql('SELECT SUM("count") AS n FROM web')[0]["n"] == len(on_time) + len(late)
        [fix] = sql("SELECT realtime_events, batch_events, late_recovered, duplicates_removed FROM sys.corrections")
        assert fix == {"realtime_events": 400, "batch_events": 430, "late_recovered": 30, "duplicates_removed": 25}
