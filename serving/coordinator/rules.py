"""Retention rules, evaluated as Druid's coordinator does (``org.apache.druid.server.coordinator.rules``).

A datasource's rules are its own list followed by the cluster default (``_default``); for each used
segment the FIRST rule that applies to its interval decides: a load (or broadcast) rule keeps it, a
drop rule marks it unused. A segment no rule applies to is left alone (Druid logs it). ``now`` is the
reference timestamp; ``new Interval(period, now)`` is ``[now − period, now)`` with calendar-aware
period arithmetic in UTC.

How each rule type matches a segment interval ``S`` (Druid's ``appliesTo``):

================================  ==========================================================
``loadForever`` / ``dropForever``  always
``loadByInterval``                 the rule interval overlaps ``S``
``dropByInterval``                 the rule interval contains ``S``
``loadByPeriod``                   ``includeFuture`` (default true): ``now − period < S.end``;
                                   else ``[now − period, now)`` overlaps ``S``
``dropByPeriod``                   ``includeFuture`` (default true): ``now − period ≤ S.start``;
                                   else ``[now − period, now)`` contains ``S``
``dropBeforeByPeriod``             ``S.end ≤ now − period``
``broadcast*``                     as the matching load rule (they keep segments)
================================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from radstack.storage.metadata import MetadataStore
from radstack.time.intervals import Interval, Period, TimeParseError, datetime_to_ms, ms_to_datetime

__all__ = [
    "RuleError",
    "Rule",
    "RuleDecision",
    "RULE_TYPES",
    "DEFAULT_RULES",
    "parse_rule",
    "parse_rules",
    "rules_for",
    "matching_rule",
    "decide",
]

LOAD_TYPES = ("loadForever", "loadByInterval", "loadByPeriod")
DROP_TYPES = ("dropForever", "dropByInterval", "dropByPeriod", "dropBeforeByPeriod")
BROADCAST_TYPES = ("broadcastForever", "broadcastByInterval", "broadcastByPeriod")
RULE_TYPES = LOAD_TYPES + DROP_TYPES + BROADCAST_TYPES
DEFAULT_RULES: list[dict[str, Any]] = [{"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}]


class RuleError(ValueError):
    """A rule that cannot be evaluated; the message names the bad field."""


@dataclass(frozen=True)
class Rule:
    type: str
    interval: Interval | None = None
    period: Period | None = None
    include_future: bool = True
    raw: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_drop(self) -> bool:
        return self.type in DROP_TYPES

    @property
    def is_load(self) -> bool:
        """Load and broadcast rules: a segment they match stays used."""
        return not self.is_drop

    def period_start(self, now_ms: int) -> int:
        """``now − period`` (calendar-aware, UTC)."""
        assert self.period is not None
        return datetime_to_ms(self.period.add_to(ms_to_datetime(now_ms), -1))

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        t = self.type
        if t.endswith("Forever"):
            return True
        if t.endswith("ByInterval"):
            assert self.interval is not None
            if t == "dropByInterval":
                return self.interval.contains(interval)
            return self.interval.overlaps(interval)
        start = self.period_start(now_ms)
        if t == "dropBeforeByPeriod":
            return interval.end <= start
        if t == "dropByPeriod":
            if self.include_future:
                return start <= interval.start
            return Interval(start, now_ms).contains(interval)
        # loadByPeriod / broadcastByPeriod
        if self.include_future:
            return start < interval.end
        return Interval(start, now_ms).overlaps(interval)

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw) if self.raw else {"type": self.type}


def _bool(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise RuleError(f"{path}: expected true or false, got {value!r}")


def parse_rule(raw: Mapping[str, Any], path: str = "rule") -> Rule:
    """One rule JSON object → :class:`Rule` (raises :class:`RuleError`)."""
    if not isinstance(raw, Mapping):
        raise RuleError(f"{path}: expected an object, got {raw!r}")
    typ = raw.get("type")
    if typ not in RULE_TYPES:
        raise RuleError(f"{path}.type: unknown rule type {typ!r}; known: {', '.join(RULE_TYPES)}")
    interval = period = None
    include_future = True
    if typ.endswith("ByInterval"):
        text = raw.get("interval")
        if not isinstance(text, str):
            raise RuleError(f"{path}.interval: required (an ISO interval)")
        try:
            interval = Interval.parse(text)
        except (TimeParseError, ValueError) as e:
            raise RuleError(f"{path}.interval: {e}") from e
    elif typ.endswith("ByPeriod"):
        text = raw.get("period")
        if not isinstance(text, str):
            raise RuleError(f"{path}.period: required (an ISO period such as P30D)")
        try:
            period = Period.parse(text)
        except (TimeParseError, ValueError) as e:
            raise RuleError(f"{path}.period: {e}") from e
        if typ != "dropBeforeByPeriod" and raw.get("includeFuture") is not None:
            include_future = _bool(raw["includeFuture"], f"{path}.includeFuture")
    return Rule(typ, interval, period, include_future, dict(raw))


def parse_rules(raw: Iterable[Any], path: str = "rules") -> list[Rule]:
    if isinstance(raw, str | bytes | Mapping) or not isinstance(raw, Iterable):
        raise RuleError(f"{path}: expected an array of rules")
    return [parse_rule(r, f"{path}[{i}]") for i, r in enumerate(raw)]


def rules_for(metadata: MetadataStore, data_source: str) -> list[Rule]:
    """The rules that apply to ``data_source``: its own, then the cluster default (Druid's
    ``getRulesWithDefault``). Missing default rules mean Druid's ``loadForever``."""
    own = metadata.get_rules(data_source) if data_source != "_default" else None
    default = metadata.get_rules("_default") or DEFAULT_RULES
    return parse_rules(own or [], f"rules[{data_source}]") + parse_rules(default, "rules[_default]")


def matching_rule(rules: Sequence[Rule], interval: Interval, now_ms: int) -> Rule | None:
    """The first rule that applies to ``interval``, or None."""
    for r in rules:
        if r.applies_to(interval, now_ms):
            return r
    return None


@dataclass
class RuleDecision:
    """Segment ids split by what the rules say."""

    keep: list[str] = field(default_factory=list)
    drop: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    rule_of: dict[str, Rule] = field(default_factory=dict)


def decide(segments: Iterable[Any], rules: Sequence[Rule], now_ms: int) -> RuleDecision:
    """Apply ``rules`` (first match wins) to each segment (anything with ``.interval`` and
    ``.identifier``)."""
    out = RuleDecision()
    for seg in segments:
        rule = matching_rule(rules, seg.interval, now_ms)
        sid = seg.identifier
        if rule is None:
            out.unmatched.append(sid)
            continue
        out.rule_of[sid] = rule
        (out.drop if rule.is_drop else out.keep).append(sid)
    return out
