"""Caps per user, not only per server (#34): subscriptions, open event streams, the size of one
subscription answer, supervisors (and TOPIC READ on the topic a supervisor reads), queued backfills.
Each limit answers a 4xx/429 naming its setting."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from operations.backfill_api import BackfillSlots
from operations.server import create_server_app
from radstack.passwords import hash_password
from serving.errors import DruidError
from tests.fixtures.broker import WIKI_SCHEMA, index_and_publish, wiki_table
from tests.fixtures.server import server_settings

PW = {"ana": "ana-password-1", "bob": "bob-password-1", "sam": "sam-password-1", "ops": "ops-password-1"}
ROLES = {
    "loader": [{"resource": {"type": "DATASOURCE", "name": ".*"}, "action": "WRITE"},
               {"resource": {"type": "DATASOURCE", "name": ".*"}, "action": "READ"}],
    "streamer": [{"resource": {"type": "DATASOURCE", "name": ".*"}, "action": "WRITE"},
                 {"resource": {"type": "TOPIC", "name": "clicks.*"}, "action": "READ"}],
}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    users = [{"name": "ana", "password_hash": hash_password(PW["ana"]), "roles": ["read"]},
             {"name": "bob", "password_hash": hash_password(PW["bob"]), "roles": ["read", "loader"]},
             {"name": "sam", "password_hash": hash_password(PW["sam"]), "roles": ["streamer"]},
             {"name": "ops", "password_hash": hash_password(PW["ops"]), "roles": ["admin"]}]
    settings = server_settings(tmp_path / "home", {"server": {
        "auth": {"enabled": True, "users": users, "roles": ROLES},
        "max_subscriptions_per_user": 2, "max_streams_per_user": 1, "max_subscription_answer_bytes": 400,
        "max_supervisors_per_user": 1}})
    app = create_server_app(settings)
    with TestClient(app, raise_server_exceptions=False) as c:
        ctx = app.state.ctx
        index_and_publish(ctx.metadata, ctx.deep_storage, wiki_table(), WIKI_SCHEMA)
        ctx.broker.refresh(force=True)
        yield c


def _as(name: str) -> tuple[str, str]:
    return (name, PW[name])


def _subscribe(c: TestClient, user: str, sql: str = "SELECT COUNT(*) AS n FROM wiki") -> Any:
    return c.post("/radstack/v1/subscriptions", json={"query": sql}, auth=_as(user))


def test_subscriptions_per_user(client: TestClient) -> None:
    assert _subscribe(client, "ana").status_code == 200
    assert _subscribe(client, "ana", "SELECT SUM(added) AS s FROM wiki").status_code == 200
    r = _subscribe(client, "ana", "SELECT MAX(added) AS m FROM wiki")
    assert r.status_code == 429 and "server.max_subscriptions_per_user" in r.json()["errorMessage"]
    assert _subscribe(client, "bob").status_code == 200  # another user's allowance is their own


def test_subscription_answer_size(client: TestClient) -> None:
    r = _subscribe(client, "ana", "SELECT __time, page, \"user\", country, added FROM wiki")
    assert r.status_code == 400 and "server.max_subscription_answer_bytes" in r.json()["errorMessage"]


def test_event_streams_per_user(client: TestClient) -> None:
    hub = client.app.state.ctx.subscriptions  # type: ignore[attr-defined]
    users = {u.name: u for u in hub.users.values()}
    hub.acquire_stream(users["ana"])  # one stream of ana's is open
    try:
        sub = _subscribe(client, "ana").json()
        r = client.get(f"/radstack/v1/subscriptions/{sub['id']}/events", auth=_as("ana"))
        assert r.status_code == 429 and "server.max_streams_per_user" in r.json()["errorMessage"]
    finally:
        hub.release_stream(users["ana"])
    hub.acquire_stream(users["bob"])  # bob's streams are counted apart
    hub.release_stream(users["bob"])
    with pytest.raises(DruidError):
        hub.acquire_stream(users["ana"])
        hub.acquire_stream(users["ana"])
    hub.release_stream(users["ana"])
    assert hub._streams == {}  # noqa: SLF001 - every stream released


def _supervisor(ds: str, topic: str) -> dict[str, Any]:
    return {"type": "kafka", "spec": {
        "ioConfig": {"type": "kafka", "topic": topic, "inputFormat": {"type": "json"}},
        "dataSchema": {"dataSource": ds, "timestampSpec": {"column": "ts", "format": "iso"},
                       "dimensionsSpec": {"dimensions": ["page"]},
                       "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none"}}}}


def test_supervisors_need_topic_read_and_are_capped_per_user(client: TestClient) -> None:
    r = client.post("/druid/indexer/v1/supervisor", json=_supervisor("clicks_a", "clicks"), auth=_as("bob"))
    assert r.status_code == 403 and "TOPIC [clicks]" in r.json()["errorMessage"]  # WRITE on ds, no TOPIC READ
    r = client.post("/druid/indexer/v1/supervisor", json=_supervisor("secret_ds", "payments"), auth=_as("sam"))
    assert r.status_code == 403 and "TOPIC [payments]" in r.json()["errorMessage"]
    assert client.post("/druid/indexer/v1/supervisor", json=_supervisor("clicks_a", "clicks"),
                       auth=_as("sam")).status_code == 200
    assert client.post("/druid/indexer/v1/supervisor", json=_supervisor("clicks_a", "clicks"),
                       auth=_as("sam")).status_code == 200  # an update of one's own is not another one
    r = client.post("/druid/indexer/v1/supervisor", json=_supervisor("clicks_b", "clicks"), auth=_as("sam"))
    assert r.status_code == 429 and "server.max_supervisors_per_user" in r.json()["errorMessage"]
    assert client.post("/druid/indexer/v1/supervisor", json=_supervisor("clicks_b", "clicks"),
                       auth=_as("ops")).status_code == 200


def test_backfills_wait_for_a_slot_and_the_queue_is_bounded() -> None:
    import threading
    import time

    slots = BackfillSlots(1, 2)
    gate, order = threading.Event(), []
    assert slots.enter_queue() == 0
    first = threading.Thread(target=slots.run, args=(lambda: (order.append(1), gate.wait(10)),))
    first.start()
    while not order:
        time.sleep(0.01)
    assert slots.enter_queue() == 0 and slots.enter_queue() == 1  # two wait behind the running one
    with pytest.raises(DruidError) as ei:
        slots.enter_queue()
    assert ei.value.status == 429 and "server.max_queued_backfills" in ei.value.message
    waiting = [threading.Thread(target=slots.run, args=(lambda k=k: order.append(k),)) for k in (2, 3)]
    for t in waiting:
        t.start()
    assert order == [1]  # no slot yet
    gate.set()
    for t in (first, *waiting):
        t.join(10)
    assert sorted(order) == [1, 2, 3] and slots.enter_queue() == 0
