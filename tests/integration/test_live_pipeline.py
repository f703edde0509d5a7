"""The whole live path against the real components: events posted to the HTTP receiver (through its
spool) → Kafka → the Spark streaming job (``radctl stream``, its own process) → real-time segments →
the server's broker → a subscription's pushed answer, which counts every posted event."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import httpx
import orjson
import pytest

from radstack.config import load_settings
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant
from tests.fixtures.kafka import running_receiver
from tests.fixtures.server import running_server
from tests.fixtures.streaming import streaming_home
from tests.integration.test_streaming_restart import _kill, _start
from tests.integration.test_subscriptions import SUBS, events

pytestmark = pytest.mark.slow

TOTAL = 'SELECT SUM("count") AS n, COUNT(DISTINCT publisher) AS publishers FROM ads'


def _impressions(n: int, start_ms: int) -> bytes:
    pubs = ["bieberfever.com", "ultratrimfast.com", "techcrunchy.io"]
    return orjson.dumps([{"timestamp": format_instant(start_ms + i), "impression_id": f"imp-{uuid.uuid4().hex}",
                          "publisher": pubs[i % 3], "advertiser": "google.com", "gender": "female",
                          "city": "Berlin", "price": 0.5} for i in range(n)])


def test_posted_events_reach_a_subscription_through_kafka_and_spark(
        kafka_bootstrap: str, ads_topics: dict[str, str], tmp_path: Path) -> None:
    home = streaming_home(tmp_path / "home", kafka_bootstrap, ads_topics, max_offsets=5000)
    topic = ads_topics["impressions"]
    receiver_settings = load_settings(env={"RADSTACK_HOME": str(home)}, overrides={"receiver": {"topics": [topic]}})
    stream = _start(home, {})
    try:
        with running_receiver(receiver_settings) as receiver, running_server(home) as srv:
            t0 = now_millis()
            r = httpx.post(f"{receiver}/v1/events/{topic}", content=_impressions(300, t0), timeout=60)
            assert (r.status_code, r.json()) == (200, {"accepted": 300}), r.text
            deadline = time.monotonic() + 180
            while True:  # the first real-time segment is served
                q = httpx.post(f"{srv.url}/druid/v2/sql", json={"query": TOTAL}, timeout=30)
                if q.status_code == 200 and q.json()[0]["n"] == 300:
                    break
                assert stream.poll() is None, "the streaming job died"
                assert time.monotonic() < deadline, q.text
                time.sleep(0.5)
            sub = httpx.post(f"{srv.url}{SUBS}", json={"query": TOTAL}, timeout=30).json()
            with events(f"{srv.url}{sub['events']}") as ev:
                first = ev.next()
                assert first is not None and first["data"] == [{"n": 300, "publishers": 3}]
                posted = time.monotonic()
                for k in range(3):  # three more requests while the stream is open
                    r = httpx.post(f"{receiver}/v1/events/{topic}", content=_impressions(200, t0 + 1000 * (k + 1)),
                                   timeout=60)
                    assert r.status_code == 200, r.text
                seen = [first["data"][0]["n"]]
                while seen[-1] < 900:
                    pushed = ev.next(timeout=120)
                    assert pushed is not None and pushed["event"] == "message", pushed
                    seen.append(pushed["data"][0]["n"])
                latency = time.monotonic() - posted
                assert seen == sorted(seen) and seen[-1] == 900, seen  # grows, never past the truth
                print(f"\nlive path: posted → pushed answer with all 900 events in {latency:.1f}s; answers {seen}")
    finally:
        _kill(stream)
