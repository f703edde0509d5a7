"""The embedded Apache Kafka broker: cold start (format + start), data surviving a warm restart, and
the receiver with its spool off answering 503 while the broker is down and recovering once it is back
(with the spool on it answers 202: tests/integration/test_receiver_spool.py)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import orjson
import pytest

from operations.kafka_broker import BrokerError, KafkaBroker
from operations.processes import free_port, port_in_use
from radstack.config import load_settings
from realtime.producer import BatchProducer
from realtime.topics import ensure_topics, list_topics
from tests.fixtures.kafka import consume, running_receiver

pytestmark = pytest.mark.slow


def _broker(home: Path) -> KafkaBroker:
    port = free_port()
    controller = free_port()
    while controller == port:
        controller = free_port()
    return KafkaBroker(home=home, port=port, controller_port=controller, heap="384m")


def test_cold_start_warm_restart_keeps_data(tmp_path: Path):
    broker = _broker(tmp_path)
    try:
        cold = broker.start()
        assert broker.formatted
        meta = (broker.data_dir / "meta.properties").read_text()
        assert (broker.kafka_dir / "server.properties").read_text().count(
            "process.roles=broker,controller"
        ) == 1
        assert broker.log_file.exists() and "Kafka Server started" in broker.log_file.read_text()
        ensure_topics(broker.bootstrap_servers, {"persist": 3})
        p = BatchProducer(broker.bootstrap_servers)
        res = p.deliver("persist", [orjson.dumps({"timestamp": i}) for i in range(100)])
        p.close()
        assert (res.delivered, res.failed) == (100, 0)
        broker.stop()
        assert not port_in_use("127.0.0.1", broker.port)
        warm = broker.start()
        assert (broker.data_dir / "meta.properties").read_text() == meta  # not formatted again
        assert list_topics(broker.bootstrap_servers)["persist"] == 3
        got = consume(broker.bootstrap_servers, "persist", "after-restart", 100)
        assert sorted(orjson.loads(v)["timestamp"] for v in got) == list(range(100))
        print(f"\nkafka start: cold {cold:.1f}s (format + start), warm {warm:.1f}s")
    finally:
        broker.stop()


def test_port_in_use_is_a_clear_error(tmp_path: Path):
    import socket

    broker = _broker(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", broker.port))
        s.listen()
        with pytest.raises(BrokerError, match=f"port 127.0.0.1:{broker.port} .*already in use"):
            broker.start()


def test_receiver_503_while_broker_down_then_recovers(tmp_path: Path):
    broker = _broker(tmp_path)
    try:
        broker.start()
        ensure_topics(broker.bootstrap_servers, {"events": 1})
        settings = load_settings(
            env={"RADSTACK_HOME": str(tmp_path)},
            overrides={"kafka": {"port": broker.port},
                       "receiver": {"delivery_timeout_ms": 3000, "spool": {"enabled": False}}},
        )
        with running_receiver(settings) as url:
            ev = orjson.dumps([{"timestamp": 1, "k": "before"}])
            assert httpx.post(f"{url}/v1/events/events", content=ev, timeout=30).status_code == 200
            broker.stop()
            t0 = time.monotonic()
            r = httpx.post(f"{url}/v1/events/events", content=orjson.dumps([{"timestamp": 2}]), timeout=30)
            assert r.status_code == 503, r.text
            assert r.headers["retry-after"] == "1"
            assert r.json()["error"] == "Kafka unavailable"
            assert time.monotonic() - t0 < 15
            # fails fast once the client knows all brokers are down
            r = httpx.post(f"{url}/v1/events/events", content=orjson.dumps([{"timestamp": 3}]), timeout=30)
            assert r.status_code == 503
            broker.start()
            deadline = time.monotonic() + 60
            while True:
                r = httpx.post(
                    f"{url}/v1/events/events",
                    content=orjson.dumps([{"timestamp": 4, "k": "after"}]),
                    timeout=30,
                )
                if r.status_code == 200 or time.monotonic() > deadline:
                    break
                assert r.status_code == 503
                time.sleep(1)
            assert (r.status_code, r.json()) == (200, {"accepted": 1})
        got = [orjson.loads(v) for v in consume(broker.bootstrap_servers, "events", "g503", 10, timeout=8)]
        # the "before" event and at least one "after" (retries that got 503 may or may not have landed)
        assert [e["k"] for e in got if "k" in e][:1] == ["before"]
        assert any(e.get("k") == "after" for e in got)
    finally:
        broker.stop()
