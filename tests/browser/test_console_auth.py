"""The console with ``server.auth`` on, in a real browser: sign-in with Basic credentials, reads for
``read`` users, the admin-only backfill button.

The button posts to the batch layer's ``POST /radstack/v1/backfill`` (shown only when
``/radstack/v1/capabilities`` says backfill is available, and only to admins); here the datasource has
no spec with topics, so the real endpoint refuses it and the console shows Druid's error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By

from radstack.passwords import hash_password
from tests.browser.console_data import DAYS, events, run_task, task
from tests.browser.test_console import css, open_view, run_sql, table_rows, wait_for
from tests.fixtures.server import running_server

pytestmark = pytest.mark.slow

USERS = [{"name": "admin", "password_hash": hash_password("s3cret"), "role": "admin"},
         {"name": "reader", "password_hash": hash_password("r3ad"), "role": "read"}]
ADMIN = ("admin", "s3cret")


@pytest.fixture
def auth_server(radstack_home: Path) -> Iterator[tuple[Any, list[dict[str, Any]]]]:
    with running_server(radstack_home, {"server": {"auth": {"enabled": True, "users": USERS}}}) as srv:
        run_task(srv.url, task("wiki", events(DAYS[:2], added=1), append=False), auth=ADMIN)
        yield srv, []



def sign_in(driver: Any, url: str, name: str, password: str) -> None:
    driver.get(url + "/#/datasources")
    form = wait_for(driver, lambda: css(driver, "#signin")[0], what="sign-in form")
    form.find_element(By.ID, "signin-name").send_keys(name)
    form.find_element(By.ID, "signin-password").send_keys(password)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()


def test_console_needs_credentials_and_hides_admin_actions(chrome: Any, auth_server: Any, console_artifacts: Path) -> None:
    srv, received = auth_server
    assert httpx.get(f"{srv.url}/radstack/v1/datasources").status_code == 401
    assert httpx.get(f"{srv.url}/radstack/v1/capabilities").json()["backfill"] is True

    # wrong password: refused, the form stays
    sign_in(chrome, srv.url, "reader", "wrong")
    wait_for(chrome, lambda: "Wrong user name or password" in css(chrome, "#signin")[0].text, what="refusal")
    chrome.save_screenshot(str(console_artifacts / "auth-signin.png"))

    # a reader can look and query, but sees no backfill button
    chrome.find_element(By.ID, "signin-name").clear()
    chrome.find_element(By.ID, "signin-password").clear()
    chrome.find_element(By.ID, "signin-name").send_keys("reader")
    chrome.find_element(By.ID, "signin-password").send_keys("r3ad")
    chrome.find_element(By.CSS_SELECTOR, "#signin button[type=submit]").click()
    wait_for(chrome, lambda: chrome.execute_script("return document.body.dataset.ready") == "1", what="start")
    assert css(chrome, "#user-name")[0].text == "reader (read)"
    assert wait_for(chrome, lambda: table_rows(chrome, "#datasources"), what="datasources")[0][0] == "wiki"
    open_view(chrome, srv.url, "query")
    run_sql(chrome, "SELECT COUNT(*) AS n FROM wiki")
    assert table_rows(chrome, "#results") == [[str(2 * 12 * 4)]]
    open_view(chrome, srv.url, "ingestion")
    wait_for(chrome, lambda: table_rows(chrome, "#task-table"), what="tasks")
    assert not css(chrome, "#backfill-submit")[0].is_displayed()
    chrome.save_screenshot(str(console_artifacts / "auth-reader-ingestion.png"))

    # an admin sees the button; it sends the interval to the batch layer's endpoint
    chrome.find_element(By.XPATH, "//button[text()='Sign out']").click()
    sign_in(chrome, srv.url, "admin", "s3cret")
    wait_for(chrome, lambda: css(chrome, "#user-name")[0].text == "admin (admin)", what="admin signed in")
    open_view(chrome, srv.url, "ingestion")
    btn = wait_for(chrome, lambda: css(chrome, "#backfill-submit")[0], what="backfill button")
    assert btn.is_displayed()
    css(chrome, "#backfill-datasource")[0].send_keys("wiki")
    css(chrome, "#backfill-interval")[0].send_keys("2024-01-01/2024-01-02")
    btn.click()
    wait_for(chrome, lambda: "wiki" in css(chrome, "#backfill-result")[0].text, what="backfill answer")
    assert "unknown datasource" in css(chrome, "#backfill-result")[0].text.lower()
    chrome.save_screenshot(str(console_artifacts / "auth-admin-backfill.png"))
