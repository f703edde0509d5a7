"""Hostile events through the HTTP receiver into a real Kafka broker: generated JSON events (odd
timestamps, huge numbers, unicode, nesting), whole bodies of garbage, oversized events, forbidden
topics. Properties: no 5xx while Kafka is up; every event the receiver says it accepted is in Kafka,
exactly once; nothing it rejected is."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from radstack.config import load_settings
from tests.fixtures.kafka import consume, running_receiver
from tests.reliability.conftest import REPORT, SEED, SOAK, statuses

pytestmark = [pytest.mark.slow, pytest.mark.reliability]

N_EVENTS = 15_000 if SOAK else 5_000

TIMESTAMP = st.one_of(
    st.integers(-2**70, 2**70), st.integers(0, 253_402_300_799_999), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30), st.sampled_from(["2026-01-01T00:00:00Z", "2026-01-01T00:00:00.123+05:30", "١٢٣", "0",
                                           "99999999999999999999", "1969-12-31T23:59:59Z", "9999-12-31T23:59:59Z",
                                           "10000-01-01T00:00:00Z", "2026-02-30T00:00:00Z", " 1767225600000", ""]),
    st.none(), st.booleans(), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
VALUE = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)),
                     lambda ch: st.one_of(st.lists(ch, max_size=3), st.dictionaries(st.text(max_size=5), ch, max_size=3)),
                     max_leaves=8)
VALID = st.builds(lambda ts, page: {"timestamp": ts, "page": page},
                  st.one_of(st.integers(0, 253_402_300_799_999),
                            st.datetimes().map(lambda d: d.isoformat() + "Z").filter(lambda t: t >= "1970")),
                  st.text(max_size=30))
EVENT = st.one_of(
    VALID,
    st.builds(lambda ts, extra: {"timestamp": ts, **extra}, TIMESTAMP, st.dictionaries(st.text(max_size=8), VALUE, max_size=4)),
    st.dictionaries(st.text(max_size=8), VALUE, max_size=3),  # usually no timestamp
    VALUE,  # not an object
)


def _encode(events: list[Any], form: str) -> bytes:
    """One request body: a JSON array, NDJSON, or (one event) a single object."""
    def dumps(e: Any) -> str:
        return json.dumps(e, allow_nan=True)

    if form == "ndjson" and len(events) > 1:  # one line of NDJSON is just a JSON body
        return ("\n".join(dumps(e) for e in events) + "\n").encode()
    if form == "single" and len(events) == 1 and not isinstance(events[0], list):  # a list body is an array
        return dumps(events[0]).encode()
    return dumps(events).encode()


def test_receiver_fuzz(tmp_path: Path, kafka_bootstrap: str, kafka_topic: str) -> None:
    port = int(kafka_bootstrap.rsplit(":", 1)[1])
    s = load_settings(env={"RADSTACK_HOME": str(tmp_path)}, overrides={
        "kafka": {"port": port, "bootstrap_servers": kafka_bootstrap},
        "receiver": {"topics": [kafka_topic], "max_event_bytes": 20_000, "max_body_bytes": 2_000_000}})
    accepted_ids: list[str] = []
    sent = 0
    import httpx

    with running_receiver(s) as url, httpx.Client(timeout=30) as client:
        def post(body: bytes, topic: str = kafka_topic) -> httpx.Response:
            r = client.post(f"{url}/v1/events/{topic}", content=body)
            statuses("receiver")[r.status_code] += 1
            assert r.status_code < 500, (body[:300], r.text[:500])
            return r

        @hypothesis_seed(SEED)  # the corpus follows RADSTACK_RELIABILITY_SEED
        @settings(max_examples=N_EVENTS // 5, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(events=st.lists(EVENT, min_size=5, max_size=20), form=st.sampled_from(["array", "ndjson", "single"]))
        def batch(events: list[Any], form: str) -> None:
            nonlocal sent
            tagged = []
            for e in events:
                if isinstance(e, dict):
                    e = {**e, "_fz": uuid.uuid4().hex}
                tagged.append(e)
            r = post(_encode(tagged, form))
            sent += len(tagged)
            body = r.json()
            rejected = {x["index"] for x in body.get("rejected", [])}
            assert body["accepted"] == len(tagged) - len(rejected) or r.status_code == 400 and body.get("error") == "invalid body"
            if body.get("error") != "invalid body":
                accepted_ids.extend(e["_fz"] for i, e in enumerate(tagged) if i not in rejected)

        batch()
        rnd = random.Random(SEED)
        for _ in range(50):  # garbage bodies, oversized events, forbidden and unknown topics
            garbage = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 400)))
            assert post(garbage).json()["accepted"] == 0
        big = post(json.dumps({"timestamp": 1, "pad": "x" * 30_000}).encode())
        assert big.status_code == 413 and big.json()["accepted"] == 0
        for topic in ("__consumer_offsets", f"{kafka_topic}.dlq", "not-allowed", "..", "a" * 300):
            assert post(b'{"timestamp": 1}', topic).status_code in (400, 403, 404)

    got = consume(kafka_bootstrap, kafka_topic, f"fz-{uuid.uuid4().hex[:8]}", len(accepted_ids) + 100, timeout=20)
    ids = [json.loads(v).get("_fz") for v in got]
    REPORT["receiver"].update(events_sent=sent, accepted=len(accepted_ids), in_kafka=len(ids),
                              lost=len(set(accepted_ids) - set(ids)), duplicated=len(ids) - len(set(ids)))
    assert sent >= N_EVENTS
    assert sorted(ids) == sorted(accepted_ids), "Kafka holds exactly the accepted events"
