"""Sample stream generators (no Kafka): determinism, injected duplicates/late events, the truth log,
the ads join, the netflow tables; plus the receiver's body parsing/validation."""

from __future__ import annotations

import csv
import ipaddress
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from radstack.time.intervals import parse_instant
from realtime.generators import ads, netflow
from realtime.generators.common import LATE_MAX_MS, LATE_MIN_MS, FileSink, GeneratorOptions, RateLimiter, run
from realtime.receiver import BadBody, parse_events

START = parse_instant("2026-01-01T00:00:00Z")


def _opts(**kw: object) -> GeneratorOptions:
    base = {"events": 3000, "seed": 7, "duplicates": 0.05, "late": 0.02, "ctr": 0.1}
    base.update(kw)
    return GeneratorOptions(**base)  # type: ignore[arg-type]


def test_ads_is_deterministic_and_seed_dependent():
    a = [e.value for e in ads.generate(_opts(), START)]
    b = [e.value for e in ads.generate(_opts(), START)]
    c = [e.value for e in ads.generate(_opts(seed=8), START)]
    assert a == b
    assert a != c


def test_ads_fields_join_ctr_duplicates_and_late():
    emits = list(ads.generate(_opts(events=20_000), START))
    imps = [orjson.loads(e.value) for e in emits if e.stream == "impressions" and not e.duplicate]
    clicks = [orjson.loads(e.value) for e in emits if e.stream == "clicks" and not e.duplicate]
    assert len(imps) == 20_000
    assert set(imps[0]) == {
        "timestamp",
        "impression_id",
        "publisher",
        "advertiser",
        "gender",
        "city",
        "price",
    }
    assert set(clicks[0]) == {"timestamp", "click_id", "impression_id"}
    by_id = {i["impression_id"]: i for i in imps}
    assert len(by_id) == len(imps)  # ids are unique
    assert 0.085 < len(clicks) / len(imps) < 0.115  # ctr 0.1
    for c in clicks:  # every click joins an impression and comes 1-60 s after it
        imp = by_id[c["impression_id"]]
        d = parse_instant(c["timestamp"]) - parse_instant(imp["timestamp"])
        assert 1_000 <= d <= 60_000
    dups = [e for e in emits if e.duplicate]
    assert 0.04 < len(dups) / (len(emits) - len(dups)) < 0.06
    originals = {(e.stream, e.key): e.value for e in emits if not e.duplicate}
    assert all(originals[(d.stream, d.key)] == d.value for d in dups)  # exact re-sends
    late = [e for e in emits if e.late and not e.duplicate and e.stream == "impressions"]
    assert 0.015 < len(late) / len(imps) < 0.025
    for i, e in enumerate(x for x in emits if x.stream == "impressions" and not x.duplicate):
        lag = START + i - parse_instant(orjson.loads(e.value)["timestamp"])  # sim_rate 1000/s → 1 ms apart
        if e.late:
            assert LATE_MIN_MS <= lag <= LATE_MAX_MS
        else:
            assert lag == 0


@pytest.mark.parametrize("generate", [ads.generate, netflow.generate])
def test_the_first_late_event_waits_for_its_hook_and_the_stream_is_unchanged(generate) -> None:
    """The quickstart's hook: called once, just before the first late event, with every event before it
    already emitted; the events are the same with or without it."""
    seen: list[bool] = []
    calls: list[int] = []
    out = []

    def hook() -> None:
        calls.append(len(out))

    for e in generate(_opts(before_first_late=hook), START):
        out.append(e)
        seen.append(e.late)
    first_late = seen.index(True)
    assert calls == [first_late]  # once, before the first late event was emitted
    assert [e.value for e in out] == [e.value for e in generate(_opts(), START)]


def test_run_writes_stream_truth_and_summary(tmp_path: Path):
    opts = _opts(events=2000)
    summary = run(
        "ads", ads.generate(opts, START), opts, START, FileSink(tmp_path), tmp_path, primary="impressions"
    )
    stream = (tmp_path / "impressions.jsonl").read_bytes().splitlines()
    truth = (tmp_path / "truth" / "impressions.jsonl").read_bytes().splitlines()
    clicks_truth = (tmp_path / "truth" / "clicks.jsonl").read_bytes().splitlines()
    assert len(truth) == 2000 == summary.streams["impressions"].unique
    assert len(set(truth)) == len(truth)
    assert set(stream) == set(truth)  # the stream is the truth plus exact re-sends
    assert len(stream) - len(truth) == summary.streams["impressions"].duplicates > 0
    assert summary.streams["clicks"].unique == len(clicks_truth)
    assert summary.late == sum(c.late for c in summary.streams.values()) > 0
    on_disk = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert on_disk["duplicates"] == summary.duplicates and on_disk["seed"] == 7


def test_netflow_samples_and_tables(tmp_path: Path):
    tables = netflow.Tables(3)
    paths = tables.write(tmp_path)
    assert [p.name for p in paths] == ["ip_ranges.csv", "dns.csv", "countries.csv"]
    ranges = list(csv.DictReader((tmp_path / "ip_ranges.csv").read_text().splitlines()))
    dns = {r["ip"]: r["hostname"] for r in csv.DictReader((tmp_path / "dns.csv").read_text().splitlines())}
    assert len(ranges) == 16 and dns
    countries = {r["code"] for r in csv.DictReader((tmp_path / "countries.csv").read_text().splitlines())}
    assert {r["country"] for r in ranges} <= countries
    nets = [ipaddress.IPv4Network(r["cidr"]) for r in ranges]
    samples = [
        orjson.loads(e.value) for e in netflow.generate(_opts(seed=3), START, tables) if not e.duplicate
    ]
    assert set(samples[0]) == {
        "timestamp",
        "sample_id",
        "srcIP",
        "dstIP",
        "protocol",
        "srcPort",
        "dstPort",
        "ipSize",
    }
    for s in samples:
        assert any(ipaddress.IPv4Address(s["srcIP"]) in n for n in nets)
        assert any(ipaddress.IPv4Address(s["dstIP"]) in n for n in nets)
        assert s["srcIP"] in dns or s["dstIP"] in dns  # one side is a server with a DNS name
        assert s["protocol"] in (1, 6, 17) and 28 <= s["ipSize"] <= 1500
        if s["protocol"] == 1:
            assert s["srcPort"] == s["dstPort"] == 0
    assert tables.asn_of(samples[0]["srcIP"]) is not None
    assert netflow.Tables(3).dns == tables.dns and netflow.Tables(4).dns != tables.dns


def test_rate_limiter_limits():
    import time

    lim = RateLimiter(2000)
    t0 = time.monotonic()
    for _ in range(500):
        lim.acquire()
    assert time.monotonic() - t0 >= 0.22


def test_generate_command_to_file(tmp_path: Path, radstack_home: Path):
    from operations.cli import app

    out = tmp_path / "gen"
    args = ["generate", "netflow", "--events", "1500", "--seed", "5", "--to", "file", "--out", str(out), "-q"]
    r = CliRunner().invoke(app, [*args, "--start", "2026-01-01T00:00:00Z"])
    assert r.exit_code == 0, r.output
    assert "duplicates" in r.output and "late" in r.output
    assert len((out / "truth" / "netflow.jsonl").read_bytes().splitlines()) == 1500
    assert (out / "ip_ranges.csv").exists() and (out / "dns.csv").exists()
    r2 = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "gen2"), "--start", "2026-01-01T00:00:00Z"])
    assert r2.exit_code == 0
    assert (out / "netflow.jsonl").read_bytes() == (tmp_path / "gen2" / "netflow.jsonl").read_bytes()


# -- the receiver's body parsing ------------------------------------------------------------------
def test_parse_array_object_and_ndjson():
    vals, rej = parse_events(
        b'[{"timestamp": 1, "a": 1}, {"timestamp": "2026-01-01T00:00:00Z"}]', "timestamp"
    )
    assert [orjson.loads(v) for v in vals] == [
        {"timestamp": 1, "a": 1},
        {"timestamp": "2026-01-01T00:00:00Z"},
    ]
    assert rej == []
    vals, rej = parse_events(b'{\n  "ts": 5\n}', "ts")  # pretty-printed single object is not NDJSON
    assert len(vals) == 1 and rej == []
    vals, rej = parse_events(b'{"ts": 5}\n{"ts": 6}\n', "ts")
    assert vals == [b'{"ts": 5}', b'{"ts": 6}'] and rej == []


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ({"x": 1}, "missing timestamp field"),
        ({"timestamp": None}, "epoch millis or an ISO-8601"),
        ({"timestamp": "tomorrow"}, "unparseable timestamp"),
        ({"timestamp": [1]}, "got a list"),
        ({"timestamp": float("inf")}, None),  # orjson writes inf as null → rejected
        (3, "not a JSON object (a number)"),
    ],
)
def test_parse_rejections(event: object, reason: str | None):
    vals, rej = parse_events(orjson.dumps([{"timestamp": 1}, event]), "timestamp")
    assert len(vals) == 1
    assert [r["index"] for r in rej] == [1]
    if reason:
        assert reason in rej[0]["reason"]


def test_parse_invalid_body():
    with pytest.raises(BadBody):
        parse_events(b"   ", "timestamp")
    with pytest.raises(BadBody):
        parse_events(b'{"timestamp": 1', "timestamp")


def test_cluster_ids_never_look_like_options():
    from operations.kafka_broker import new_cluster_id

    ids = [new_cluster_id() for _ in range(3000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert len(set(ids)) == len(ids)
