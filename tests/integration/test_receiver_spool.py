"""The receiver's spool against a real Apache Kafka broker and a receiver in its own OS process:
Kafka stopped while 50,000 events are posted (202), the receiver killed with SIGKILL in the middle of
the outage, both restarted: the topic holds every accepted event exactly once, and ``radctl status``
showed the spool's depth meanwhile. A second run ends the receiver right after Kafka acknowledged
events its checkpoint does not record yet: the restarted drainer finds them and sends no copy."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest

from operations.kafka_broker import KafkaBroker
from operations.processes import free_port, http_ok
from realtime.spool import inspect
from realtime.topics import ensure_topics
from tests.fixtures.kafka import consume
from tests.integration.test_kafka_broker import _broker
from tests.integration.test_streaming_restart import _kill

pytestmark = pytest.mark.slow

TOPIC = "events"


def _config(home: Path, broker: KafkaBroker, port: int) -> Path:
    cfg = home / "radstack.yaml"
    cfg.write_text(
        f"home: {home}\nkafka:\n  port: {broker.port}\n  controller_port: {broker.controller_port}\n"
        f"  topics: {{{TOPIC}: 2}}\n"
        f"receiver:\n  port: {port}\n  delivery_timeout_ms: 2000\n"
    )
    return cfg


def _env(cfg: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    return {**env, "RADSTACK_CONFIG": str(cfg), **extra}


def _receiver(cfg: Path, port: int, **env: str) -> subprocess.Popen[bytes]:
    log = open(cfg.parent / f"receiver-{time.time_ns()}.log", "wb")  # noqa: SIM115 - closed with the process
    p = subprocess.Popen([sys.executable, "-m", "operations", "receiver"], env=_env(cfg, **env),
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while not http_ok(f"http://127.0.0.1:{port}/health", timeout=1):
        assert p.poll() is None, (cfg.parent / log.name).read_text()
        assert time.monotonic() < deadline, "the receiver did not start"
        time.sleep(0.1)
    return p


def _post(url: str, first: int, n: int) -> httpx.Response:
    body = orjson.dumps([{"timestamp": 1_767_225_600_000 + i, "n": i} for i in range(first, first + n)])
    return httpx.post(f"{url}/v1/events/{TOPIC}", content=body, timeout=30)


def _status(cfg: Path, *flags: str) -> bytes:
    out = subprocess.run([sys.executable, "-m", "operations", "status", "--no-kafka", *flags],
                         env={**_env(cfg), "COLUMNS": "200"}, capture_output=True, timeout=60, check=False)
    return out.stdout


def _status_json(cfg: Path) -> dict:
    return orjson.loads(_status(cfg, "--json"))


def _wait_drained(spool: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (st := inspect(spool)) is None or st.depth > 0:
        assert time.monotonic() < deadline, f"the spool did not drain: {st}"
        time.sleep(0.2)


def _topic_counts(bootstrap: str, expected: int) -> Counter[int]:
    values = consume(bootstrap, TOPIC, f"check-{time.time_ns()}", expected + 1000, timeout=20)
    return Counter(orjson.loads(v)["n"] for v in values)


@dataclass
class Stack:
    """A broker of this test's own (it is stopped and started) and a receiver process on it."""

    broker: KafkaBroker
    cfg: Path
    port: int
    receiver: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def spool(self) -> Path:
        return self.cfg.parent / "spool" / "receiver"

    def restart_receiver(self, **env: str) -> subprocess.Popen[bytes]:
        if self.receiver is not None and self.receiver.poll() is None:
            _kill(self.receiver)
        self.receiver = _receiver(self.cfg, self.port, **env)
        return self.receiver


@contextmanager
def stack(tmp_path: Path) -> Iterator[Stack]:
    broker = _broker(tmp_path / "kafka")
    port = free_port()
    st = Stack(broker, _config(tmp_path, broker, port), port)
    broker.start(timeout=120)
    try:
        ensure_topics(broker.bootstrap_servers, {TOPIC: 2})
        st.restart_receiver()
        yield st
    finally:
        if st.receiver is not None and st.receiver.poll() is None:
            _kill(st.receiver)
        broker.stop()


def test_kafka_down_50000_events_and_a_kill_9_then_exactly_once(tmp_path: Path) -> None:
    with stack(tmp_path) as st:
        broker, cfg, url, spool = st.broker, st.cfg, st.url, st.spool
        r = _post(url, 0, 100)
        assert (r.status_code, r.json()) == (200, {"accepted": 100}), r.text
        broker.stop()

        accepted = 100
        statuses: Counter[int] = Counter()
        depth_seen = 0
        for i in range(100):  # 100 requests of 500 events while Kafka is down
            r = _post(url, 100 + i * 500, 500)
            statuses[r.status_code] += 1
            assert r.status_code == 202, r.text
            assert r.json()["accepted"] == r.json()["spooled"] == 500
            accepted += 500
            if i == 49:  # mid-outage: radctl status shows the depth, then kill -9 and restart the receiver
                shown = _status_json(cfg)["spool"]
                depth_seen = shown["depth"]
                assert depth_seen >= 25_000 - 500, shown
                assert f"receiver spool: {depth_seen:,} event(s) not yet in Kafka" in _status(cfg).decode()
                st.restart_receiver()
        assert statuses == Counter({202: 100})
        waiting = inspect(spool)
        assert waiting is not None and waiting.depth == 50_000, waiting  # none lost by the kill

        t0 = time.monotonic()
        broker.start(timeout=120)
        _wait_drained(spool, 120)
        drain_s = time.monotonic() - t0
        r = _post(url, accepted, 10)  # Kafka is back: a new request is acknowledged again
        assert r.status_code == 200, r.text
        accepted += 10
        counts = _topic_counts(broker.bootstrap_servers, accepted)
        lost = accepted - len(counts)
        duplicated = sum(c - 1 for c in counts.values())
        print(f"\nspool: {accepted:,} accepted, {len(counts):,} in Kafka, lost {lost}, duplicated {duplicated}; "
              f"depth seen by radctl status {depth_seen:,}; drained in {drain_s:.1f}s after the broker restart")
        assert (lost, duplicated) == (0, 0)
        assert sorted(counts) == list(range(accepted))
        assert _status_json(cfg)["spool"]["depth"] == 0


def test_crash_after_acknowledgement_before_checkpoint_sends_no_copy(tmp_path: Path) -> None:
    with stack(tmp_path) as st:
        broker, spool = st.broker, st.spool
        broker.stop()
        for i in range(20):  # 20,000 events into the spool while Kafka is down
            assert _post(st.url, i * 1000, 1000).status_code == 202
        _kill(st.receiver)  # type: ignore[arg-type]
        broker.start(timeout=120)
        # the drainer dies (exit 87) the moment Kafka acknowledges the 7,000th event
        assert st.restart_receiver(RADSTACK_SPOOL_FAULT="exit_after_delivered:7000").wait(60) == 87
        committed = inspect(spool).committed  # type: ignore[union-attr]
        assert committed < 20_000
        st.restart_receiver()
        _wait_drained(spool, 120)
        counts = _topic_counts(broker.bootstrap_servers, 20_000)
        duplicated = sum(c - 1 for c in counts.values())
        print(f"\nspool crash after ack: checkpoint at #{committed:,} when the process died; "
              f"{len(counts):,} of 20,000 in Kafka, duplicated {duplicated}")
        assert duplicated == 0 and sorted(counts) == list(range(20_000))


def test_event_kafka_refuses_for_good_is_dead_lettered(tmp_path: Path, kafka_bootstrap: str) -> None:
    """The topic takes at most 2,000-byte messages: the receiver's own limit (1 MB) lets a 12,000-byte
    event in, Kafka refuses it, the drainer keeps it in the dead-letter folder, the request gets 413 and
    the other events of the request are delivered."""
    from radstack.config import load_settings
    from tests.fixtures.kafka import running_receiver

    topic = f"small-{time.time_ns()}"
    ensure_topics(kafka_bootstrap, {topic: 1}, config={"max.message.bytes": "2000"})
    port = int(kafka_bootstrap.rsplit(":", 1)[1])
    settings = load_settings(env={"RADSTACK_HOME": str(tmp_path)}, overrides={
        "kafka": {"port": port}, "receiver": {"topics": [topic], "delivery_timeout_ms": 20_000}})
    pad = os.urandom(6000).hex()  # incompressible: the lz4 batch stays over the limit
    events = [{"timestamp": 1, "n": 0}, {"timestamp": 2, "n": 1, "pad": pad}, {"timestamp": 3, "n": 2}]
    with running_receiver(settings) as url:
        r = httpx.post(f"{url}/v1/events/{topic}", content=orjson.dumps(events), timeout=60)
        assert r.status_code == 413, r.text
        assert r.json()["accepted"] == 2 and "dead-letter" in r.json()["message"]
    dead = (tmp_path / "spool" / "receiver" / "dead-letter" / f"{topic}.ndjson").read_bytes().splitlines()
    assert len(dead) == 1 and orjson.loads(orjson.loads(dead[0])["event"])["n"] == 1
    assert "TOO_LARGE" in orjson.loads(dead[0])["reason"]
    st = inspect(tmp_path / "spool" / "receiver")
    assert st is not None and (st.depth, st.dead_lettered) == (0, 1)
    got = sorted(orjson.loads(v)["n"] for v in consume(kafka_bootstrap, topic, "g-dead", 3, timeout=8))
    assert got == [0, 2]


def test_drainer_survives_a_failure_and_starts_again_from_the_checkpoint(
        tmp_path: Path, kafka_bootstrap: str, kafka_topic: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka lost in the middle of the recovery scan (here: the first scan raises) does not stop the
    drainer: it starts again from the checkpoint and delivers everything once."""
    from confluent_kafka import KafkaException

    from realtime.spool import Spool
    from realtime.spool_drainer import SpoolDrainer

    spool = Spool(tmp_path / "spool")
    for i in range(5):
        spool.append(kafka_topic, [orjson.dumps({"timestamp": 1, "n": i * 100 + j}) for j in range(100)])
    real_scan = SpoolDrainer._scan
    calls: list[int] = []

    def flaky_scan(self: SpoolDrainer, topics: set[str]) -> set[int]:
        calls.append(1)
        if len(calls) == 1:
            raise KafkaException("lost in the middle of the scan")
        return real_scan(self, topics)

    monkeypatch.setattr(SpoolDrainer, "_scan", flaky_scan)
    drainer = SpoolDrainer(spool, kafka_bootstrap).start()
    deadline = time.monotonic() + 60
    while drainer.committed < 500:
        assert time.monotonic() < deadline, drainer.committed
        time.sleep(0.1)
    drainer.stop()
    spool.close()
    assert len(calls) == 2
    got = Counter(orjson.loads(v)["n"] for v in consume(kafka_bootstrap, kafka_topic, "g-flaky", 600, timeout=10))
    assert sorted(got) == list(range(500)) and set(got.values()) == {1}


def test_one_client_cannot_fill_the_spool_for_the_others(tmp_path: Path) -> None:
    """#49: while Kafka is away, one producer posting as fast as it can gets 503 once its share of the
    spool (receiver.spool.max_bytes_per_client, a quarter of it by default) is undelivered; another
    producer (another address) is still accepted, and everything accepted reaches Kafka once it is back."""
    with stack(tmp_path) as st:
        st.restart_receiver(RADSTACK_RECEIVER__SPOOL__MAX_BYTES="400000")  # share: 100,000 bytes
        st.broker.stop()
        flood: Counter[int] = Counter()
        accepted = 0
        for i in range(60):  # ~4.4 KB per request: the share is full after ~23
            r = _post(st.url, i * 100, 100)
            flood[r.status_code] += 1
            if r.status_code == 202:
                accepted += 100
            else:
                assert r.status_code == 503 and "max_bytes_per_client" in r.json()["reason"], r.text
        assert flood[202] >= 10 and flood[503] >= 20, flood
        other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"))
        body = orjson.dumps([{"timestamp": 1_767_225_600_000 + i, "n": 100_000 + i} for i in range(100)])
        r = other.post(f"{st.url}/v1/events/{TOPIC}", content=body, timeout=30)
        assert r.status_code == 202, r.text  # another client still gets in
        accepted += 100
        st.broker.start(timeout=120)
        _wait_drained(st.spool, 120)
        assert len(_topic_counts(st.broker.bootstrap_servers, accepted)) == accepted
