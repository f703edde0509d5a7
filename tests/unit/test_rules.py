"""Retention rules: Druid's matching semantics per rule type (table-driven, fixed "now"), first match
wins, the default rules as fallback, and the retention duty marking exactly the dropped segments unused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from radstack.storage.metadata import MetadataStore
from radstack.storage.segments import DataSegment, ShardSpec
from radstack.time.intervals import Interval, parse_instant
from serving.coordinator.duties.retention import apply_retention
from serving.coordinator.rules import RuleError, decide, matching_rule, parse_rule, parse_rules, rules_for

NOW = parse_instant("2024-06-15T00:00:00Z")


def iv(text: str) -> Interval:
    return Interval.parse(text)


# (rule, segment interval, applies?)
CASES: list[tuple[dict[str, Any], str, bool]] = [
    ({"type": "loadForever"}, "2000-01-01/2000-01-02", True),
    ({"type": "dropForever"}, "2030-01-01/2030-01-02", True),
    # loadByInterval: overlap
    ({"type": "loadByInterval", "interval": "2024-01-01/2024-02-01"}, "2024-01-31/2024-02-02", True),
    ({"type": "loadByInterval", "interval": "2024-01-01/2024-02-01"}, "2024-02-01/2024-02-02", False),
    ({"type": "loadByInterval", "interval": "2024-01-01/2024-02-01"}, "2023-12-31/2024-01-01", False),
    # dropByInterval: containment
    ({"type": "dropByInterval", "interval": "2024-01-01/2024-02-01"}, "2024-01-05/2024-01-06", True),
    ({"type": "dropByInterval", "interval": "2024-01-01/2024-02-01"}, "2024-01-31/2024-02-02", False),
    ({"type": "dropByInterval", "interval": "2024-01-01/2024-02-01"}, "2024-01-01/2024-02-01", True),
    # loadByPeriod P1M (now - P1M = 2024-05-15), includeFuture default true: start < end
    ({"type": "loadByPeriod", "period": "P1M"}, "2024-05-14/2024-05-15", False),
    ({"type": "loadByPeriod", "period": "P1M"}, "2024-05-14/2024-05-16", True),
    ({"type": "loadByPeriod", "period": "P1M"}, "2024-07-01/2024-07-02", True),
    ({"type": "loadByPeriod", "period": "P1M", "includeFuture": False}, "2024-07-01/2024-07-02", False),
    ({"type": "loadByPeriod", "period": "P1M", "includeFuture": False}, "2024-06-14/2024-06-16", True),
    ({"type": "loadByPeriod", "period": "P1M", "includeFuture": False}, "2024-05-14/2024-05-16", True),
    # dropByPeriod P1M, includeFuture default true: period start <= segment start
    ({"type": "dropByPeriod", "period": "P1M"}, "2024-05-15/2024-05-16", True),
    ({"type": "dropByPeriod", "period": "P1M"}, "2024-05-14/2024-05-16", False),
    ({"type": "dropByPeriod", "period": "P1M"}, "2024-07-01/2024-07-02", True),
    ({"type": "dropByPeriod", "period": "P1M", "includeFuture": False}, "2024-07-01/2024-07-02", False),
    ({"type": "dropByPeriod", "period": "P1M", "includeFuture": False}, "2024-06-14/2024-06-16", False),
    ({"type": "dropByPeriod", "period": "P1M", "includeFuture": False}, "2024-06-14/2024-06-15", True),
    # dropBeforeByPeriod P1M: end <= now - period
    ({"type": "dropBeforeByPeriod", "period": "P1M"}, "2024-05-14/2024-05-15", True),
    ({"type": "dropBeforeByPeriod", "period": "P1M"}, "2024-05-14/2024-05-16", False),
    ({"type": "dropBeforeByPeriod", "period": "PT12H"}, "2024-06-14T00:00:00Z/2024-06-14T12:00:00Z", True),
    ({"type": "dropBeforeByPeriod", "period": "PT12H"}, "2024-06-14T00:00:00Z/2024-06-14T12:00:00.001Z", False),
    # broadcast rules behave like load rules for matching
    ({"type": "broadcastByInterval", "interval": "2024-01-01/2024-02-01"}, "2024-01-31/2024-02-02", True),
    ({"type": "broadcastForever"}, "2024-01-31/2024-02-02", True),
]


@pytest.mark.parametrize(("rule", "segment", "applies"), CASES, ids=[f"{c[0]['type']}-{c[1]}" for c in CASES])
def test_rule_matching(rule: dict[str, Any], segment: str, applies: bool) -> None:
    assert parse_rule(rule).applies_to(iv(segment), NOW) is applies


def test_period_is_calendar_aware() -> None:
    """now = 2024-03-31, P1M back is 2024-02-29 (the month is clamped, as Joda does)."""
    now = parse_instant("2024-03-31T00:00:00Z")
    rule = parse_rule({"type": "dropBeforeByPeriod", "period": "P1M"})
    assert rule.applies_to(iv("2024-02-28/2024-02-29"), now)
    assert not rule.applies_to(iv("2024-02-29/2024-03-01"), now)


@pytest.mark.parametrize("bad", [
    {"type": "loadSometimes"},
    {"type": "loadByInterval"},
    {"type": "dropByPeriod", "period": "soon"},
    {"type": "loadByInterval", "interval": "2024-02-01/2024-01-01"},
    {"type": "loadByPeriod", "period": "P1D", "includeFuture": "maybe"},
])
def test_bad_rules_are_rejected(bad: dict[str, Any]) -> None:
    with pytest.raises(RuleError):
        parse_rule(bad)
    with pytest.raises(RuleError):
        parse_rules({"type": "loadForever"})  # an object, not an array


def _seg(ds: str, interval: str, version: str = "v1", pn: int = 0) -> DataSegment:
    return DataSegment(ds, iv(interval), version, {"type": "local", "path": "/nonexistent"},
                       shard_spec=ShardSpec("numbered", pn, 0))


def _daily(ds: str, first: str, days: int) -> list[DataSegment]:
    start = parse_instant(first)
    return [_seg(ds, f"{_iso(start + d * 86_400_000)}/{_iso(start + (d + 1) * 86_400_000)}") for d in range(days)]


def _iso(ms: int) -> str:
    from radstack.time.intervals import format_instant

    return format_instant(ms)


def test_first_match_wins_keep_last_week_drop_the_rest() -> None:
    segs = _daily("ds", "2024-06-01T00:00:00Z", 20)  # 2024-06-01 … 2024-06-20 (5 in the future)
    rules = parse_rules([{"type": "loadByPeriod", "period": "P7D"}, {"type": "dropForever"}])
    d = decide(segs, rules, NOW)
    kept_days = sorted(s.interval.start for s in segs if s.identifier in set(d.keep))
    # now - P7D = 2024-06-08: a day is kept when it ends after that (includeFuture keeps the future)
    assert kept_days[0] == parse_instant("2024-06-08T00:00:00Z")
    assert len(d.keep) == 13 and len(d.drop) == 7 and not d.unmatched
    assert set(d.keep).isdisjoint(d.drop)
    # reversed order: dropForever first drops everything
    d2 = decide(segs, list(reversed(rules)), NOW)
    assert len(d2.drop) == 20 and not d2.keep


def test_tiered_drop_before_then_load() -> None:
    segs = _daily("ds", "2024-05-01T00:00:00Z", 60)
    rules = parse_rules([{"type": "dropBeforeByPeriod", "period": "P30D"}, {"type": "loadForever"}])
    d = decide(segs, rules, NOW)
    cutoff = parse_instant("2024-05-16T00:00:00Z")
    assert sorted(d.drop) == sorted(s.identifier for s in segs if s.interval.end <= cutoff)
    assert sorted(d.keep) == sorted(s.identifier for s in segs if s.interval.end > cutoff)
    assert len(d.drop) == 15


def test_matching_rule_none_when_nothing_applies() -> None:
    rules = parse_rules([{"type": "loadByInterval", "interval": "2020-01-01/2020-02-01"}])
    assert matching_rule(rules, iv("2024-01-01/2024-01-02"), NOW) is None
    assert decide([_seg("ds", "2024-01-01/2024-01-02")], rules, NOW).unmatched


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = MetadataStore.from_url(f"sqlite:///{tmp_path / 'meta.db'}")
    s.create_tables()
    yield s
    s.close()


def test_rules_for_appends_the_default_rules(store: Any) -> None:
    assert [r.type for r in rules_for(store, "ds")] == ["loadForever"]
    store.set_rules("ds", [{"type": "loadByPeriod", "period": "P1D"}])
    store.set_rules("_default", [{"type": "dropForever"}])
    assert [r.type for r in rules_for(store, "ds")] == ["loadByPeriod", "dropForever"]
    assert [r.type for r in rules_for(store, "other")] == ["dropForever"]


def test_retention_duty_marks_exactly_the_dropped_segments_unused(store: Any) -> None:
    a = _daily("a", "2024-05-01T00:00:00Z", 46)  # through 2024-06-15
    b = _daily("b", "2024-05-01T00:00:00Z", 46)
    store.publish(a + b)
    store.set_rules("a", [{"type": "loadByPeriod", "period": "P10D"}, {"type": "dropForever"}])
    store.set_rules("b", [{"type": "dropByInterval", "interval": "2024-05-01/2024-05-11"}])
    # dry run: nothing changes
    plan = apply_retention(store, now_ms=NOW, dry_run=True)
    assert len(store.segments(used=True)) == 92
    expected_a = {s.identifier for s in a if s.interval.end <= parse_instant("2024-06-05T00:00:00Z")}
    expected_b = {s.identifier for s in b if s.interval.end <= parse_instant("2024-05-11T00:00:00Z")}
    assert set(plan.dropped["a"]) == expected_a and set(plan.dropped["b"]) == expected_b

    report = apply_retention(store, now_ms=NOW)
    assert set(report.dropped_ids) == expected_a | expected_b
    used = {s.identifier for s in store.segments(used=True)}
    unused = {s.identifier for s in store.segments(used=False)}
    assert unused == expected_a | expected_b
    assert used == {s.identifier for s in a + b} - unused
    assert report.kept == {"a": 11, "b": 36}  # 06-05 … 06-15 (the last one starts at now)
    # idempotent: a second pass finds nothing more to drop
    assert apply_retention(store, now_ms=NOW).dropped_ids == []


def test_retention_skips_a_datasource_with_broken_rules(store: Any) -> None:
    store.publish(_daily("a", "2024-06-01T00:00:00Z", 3))
    store.set_rules("a", [{"type": "dropByPeriod"}])  # no period: cannot be evaluated
    report = apply_retention(store, now_ms=NOW)
    assert "a" in report.errors and not report.dropped_ids
    assert len(store.segments("a", used=True)) == 3
