"""VersionedIntervalTimeline: Druid's MVCC semantics (docs/segments-and-timeline.md, "The timeline (MVCC)"), table-driven."""

from __future__ import annotations

import random

import pytest

from radstack.storage.segments import DataSegment, ShardSpec
from radstack.storage.timeline import (
    TimelineConflictError,
    VersionedIntervalTimeline,
    timelines_by_data_source,
)
from radstack.time.intervals import Interval

DS = "wiki"
DAY = "2024-01-01/2024-01-02"


def seg(iv: str, version: str, pn: int = 0, parts: int = 1, typ: str = "numbered", ds: str = DS) -> DataSegment:
    return DataSegment(ds, Interval.parse(iv), version, shard_spec=ShardSpec(typ, pn, parts))


def h(hour: int, hours: int = 1) -> str:
    """Hour interval string for 2024-01-01."""
    start = f"2024-01-01T{hour:02d}:00:00Z"
    end_h = hour + hours
    end = "2024-01-02T00:00:00Z" if end_h == 24 else f"2024-01-01T{end_h:02d}:00:00Z"
    return f"{start}/{end}"


def view(tl: VersionedIntervalTimeline, query: str) -> list[tuple[str, str, str, list[int]]]:
    """(clipped interval, true interval, version, partition nums) per holder, compact ISO."""
    out = []
    for holder in tl.lookup(Interval.parse(query)):
        out.append(
            (
                _short(holder.interval),
                _short(holder.true_interval),
                holder.version,
                [s.partition_num for s in holder.segments],
            )
        )
    return out


def _short(iv: Interval) -> str:
    return iv.iso().replace(":00:00.000Z", "").replace("2024-01-", "")


CASES = [
    pytest.param(
        [seg(DAY, "v1"), seg(DAY, "v2")],
        DAY,
        [("01T00/02T00", "01T00/02T00", "v2", [0])],
        {"wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_v1"},
        id="overwrite-same-interval",
    ),
    pytest.param(
        [seg(DAY, "v2"), seg(DAY, "v1")],
        DAY,
        [("01T00/02T00", "01T00/02T00", "v2", [0])],
        {"wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_v1"},
        id="older-added-later-stays-hidden",
    ),
    pytest.param(
        [seg(h(i), "v1") for i in range(24)] + [seg(DAY, "v2")],
        DAY,
        [("01T00/02T00", "01T00/02T00", "v2", [0])],
        {str(seg(h(i), "v1").id) for i in range(24)},
        id="day-over-hours",
    ),
    pytest.param(
        [seg(DAY, "v1"), seg(h(0, 12), "v2")],
        DAY,
        [("01T00/01T12", "01T00/01T12", "v2", [0]), ("01T12/02T00", "01T00/02T00", "v1", [0])],
        set(),
        id="hours-over-part-of-day",
    ),
    pytest.param(
        [seg(DAY, "v1"), seg(h(6, 6), "v2")],
        DAY,
        [
            ("01T00/01T06", "01T00/02T00", "v1", [0]),
            ("01T06/01T12", "01T06/01T12", "v2", [0]),
            ("01T12/02T00", "01T00/02T00", "v1", [0]),
        ],
        set(),
        id="higher-version-splits-older-in-two",
    ),
    pytest.param(
        [seg(DAY, "v1"), seg(h(0, 12), "v2"), seg(h(12, 12), "v3")],
        DAY,
        [("01T00/01T12", "01T00/01T12", "v2", [0]), ("01T12/02T00", "01T12/02T00", "v3", [0])],
        {"wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_v1"},
        id="day-overshadowed-by-two-halves",
    ),
    pytest.param(
        [seg(DAY, "v1"), seg(DAY, "v2", 0, 3), seg(DAY, "v2", 2, 3)],
        DAY,
        [("01T00/02T00", "01T00/02T00", "v1", [0])],
        set(),
        id="incomplete-newer-set-invisible",
    ),
    pytest.param(
        [seg(DAY, "v1"), seg(DAY, "v2", 0, 3), seg(DAY, "v2", 2, 3), seg(DAY, "v2", 1, 3)],
        DAY,
        [("01T00/02T00", "01T00/02T00", "v2", [0, 1, 2])],
        {"wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_v1"},
        id="newer-set-visible-once-complete",
    ),
    pytest.param(
        [seg(DAY, "v1", 0, 2), seg(DAY, "v1", 1, 2), seg(DAY, "v1", 2, 2), seg(DAY, "v1", 3, 2)],
        DAY,
        [("01T00/02T00", "01T00/02T00", "v1", [0, 1, 2, 3])],
        set(),
        id="appended-partitions-beyond-core-set",
    ),
    pytest.param(
        [seg(DAY, "v1", 1, 2), seg(DAY, "v1", 2, 2), seg(DAY, "v1", 3, 2)],
        DAY,
        [],
        set(),
        id="appended-without-core-partition-0-incomplete",
    ),
    pytest.param(
        [seg(h(0), "v0", 0, 0), seg(h(0), "v0", 3, 0), seg(h(0), "v0", 5, 0)],
        DAY,
        [("01T00/01T01", "01T00/01T01", "v0", [0, 3, 5])],
        set(),
        id="appends-partitions-0-add-up",
    ),
    pytest.param(
        [seg(h(0), "v0", 4, 0, "linear"), seg(h(0), "v0", 7, 0, "linear")],
        DAY,
        [("01T00/01T01", "01T00/01T01", "v0", [4, 7])],
        set(),
        id="linear-always-complete",
    ),
    pytest.param(
        [seg(DAY, "v1"), seg(DAY, "v2", 0, 1, "tombstone")],
        DAY,
        [("01T00/02T00", "01T00/02T00", "v2", [0])],
        {"wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_v1"},
        id="tombstone-overshadows",
    ),
    pytest.param(
        [seg(DAY, "v1"), seg(h(0, 12), "v2")],
        "2024-01-01T10:30:00Z/2024-01-01T13:00:00Z",
        [("01T10:30:00.000Z/01T12", "01T00/01T12", "v2", [0]), ("01T12/01T13", "01T00/02T00", "v1", [0])],
        set(),
        id="lookup-clips-at-query-edges",
    ),
    pytest.param(
        [seg(h(0), "v1"), seg(h(5), "v1")],
        DAY,
        [("01T00/01T01", "01T00/01T01", "v1", [0]), ("01T05/01T06", "01T05/01T06", "v1", [0])],
        set(),
        id="gaps-stay-gaps",
    ),
    pytest.param(
        [seg(DAY, "v1"), seg(h(0, 12), "v2")],
        "2024-01-03/2024-01-04",
        [],
        set(),
        id="lookup-outside-is-empty",
    ),
]


@pytest.mark.parametrize(("segments", "query", "expected", "overshadowed"), CASES)
def test_lookup_and_overshadowed(segments, query, expected, overshadowed) -> None:  # type: ignore[no-untyped-def]
    tl = VersionedIntervalTimeline.from_segments(segments)
    assert view(tl, query) == expected
    assert tl.overshadowed() == overshadowed
    for s in segments:
        assert tl.is_overshadowed(s) == (s.identifier in overshadowed)


@pytest.mark.parametrize(("segments", "query", "expected", "overshadowed"), CASES)
def test_insertion_order_does_not_matter(segments, query, expected, overshadowed) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(42)
    for _ in range(8):
        perm = list(segments)
        rng.shuffle(perm)
        tl = VersionedIntervalTimeline.from_segments(perm)
        assert view(tl, query) == expected
        assert tl.overshadowed() == overshadowed


def test_equal_version_overlapping_intervals_conflict() -> None:
    tl = VersionedIntervalTimeline.from_segments([seg(DAY, "v1")])
    with pytest.raises(TimelineConflictError):
        tl.add(seg(h(3), "v1"))
    # same version, abutting (not overlapping) intervals are fine
    tl.add(seg("2024-01-02/2024-01-03", "v1"))
    tl.add(seg("2023-12-31/2024-01-01", "v1"))
    assert len(tl) == 3
    for wider in ("2023-12-30/2024-01-05", "2024-01-01T12:00Z/2024-01-02T12:00Z", "2023-12-31T23:00Z/2024-01-01T01:00Z"):
        with pytest.raises(TimelineConflictError):
            tl.add(seg(wider, "v1"))
    hours_first = VersionedIntervalTimeline.from_segments([seg(h(5), "v1"), seg(h(20), "v1")])
    with pytest.raises(TimelineConflictError):
        hours_first.add(seg(DAY, "v1"))
    assert len(tl) == 3 and len(hours_first) == 2


def test_removal_reveals_older_version() -> None:
    v1 = seg(DAY, "v1")
    v2 = [seg(DAY, "v2", p, 2) for p in range(2)]
    tl = VersionedIntervalTimeline.from_segments([v1, *v2])
    assert view(tl, DAY)[0][2] == "v2"
    removed = tl.remove(v2[1].identifier)
    assert removed == v2[1]
    # v2 is now incomplete: v1 is visible again and no longer overshadowed
    assert view(tl, DAY) == [("01T00/02T00", "01T00/02T00", "v1", [0])]
    assert tl.overshadowed() == set()
    assert tl.remove(v2[1].identifier) is None
    tl.remove(v2[0].id)
    tl.remove(v1.identifier)
    assert len(tl) == 0 and tl.lookup(Interval.parse(DAY)) == []
    # after removing every v1 segment, v1 may be used on another interval again
    tl.add(seg(h(1), "v1"))
    assert view(tl, DAY) == [("01T01/01T02", "01T01/01T02", "v1", [0])]


def test_incomplete_set_member_overshadowed_by_complete_higher() -> None:
    lonely = seg(DAY, "v1", 1, 3)  # incomplete v1 set
    tl = VersionedIntervalTimeline.from_segments([lonely, seg(DAY, "v2")])
    assert tl.overshadowed() == {lonely.identifier}


def test_partially_covered_not_overshadowed_and_lower_does_not_overshadow() -> None:
    day_v2 = seg(DAY, "v2")
    tl = VersionedIntervalTimeline.from_segments([day_v2, seg(h(0, 12), "v1"), seg(h(0, 12), "v3")])
    assert tl.overshadowed() == {str(seg(h(0, 12), "v1").id)}
    assert not tl.is_overshadowed(day_v2)


def test_visible_segments_and_tombstone_helpers() -> None:
    tomb = seg(h(0, 12), "v2", 0, 1, "tombstone")
    data = [seg(DAY, "v1", p, 2) for p in range(2)]
    tl = VersionedIntervalTimeline.from_segments([*data, tomb])
    holders = tl.lookup(Interval.parse(DAY))
    assert [x.has_data for x in holders] == [False, True]
    assert holders[0].data_segments == []
    vis = tl.visible_segments(Interval.parse(DAY))
    assert [(v.segment.partition_num, _short(v.interval)) for v in vis] == [(0, "01T12/02T00"), (1, "01T12/02T00")]
    with_tomb = tl.visible_segments(Interval.parse(DAY), include_tombstones=True)
    assert with_tomb[0].segment == tomb


def test_one_data_source_per_timeline() -> None:
    tl = VersionedIntervalTimeline.from_segments([seg(DAY, "v1")])
    with pytest.raises(ValueError, match="other"):
        tl.add(seg(DAY, "v1", ds="other"))
    tls = timelines_by_data_source([seg(DAY, "v1"), seg(DAY, "v1", ds="other"), seg(DAY, "v2", ds="other")])
    assert sorted(tls) == ["other", "wiki"]
    assert tls["other"].overshadowed() == {str(seg(DAY, "v1", ds="other").id)}


def test_versions_compare_as_strings() -> None:
    # ISO versions sort by string; a realtime version (interval start) < a batch job start time
    rt = seg(DAY, "2024-01-01T00:00:00.000Z", 0, 0)
    batch = seg(DAY, "2024-01-02T03:00:00.000Z", 0, 1)
    tl = VersionedIntervalTimeline.from_segments([batch, rt])
    assert [x.version for x in tl.lookup(Interval.parse(DAY))] == ["2024-01-02T03:00:00.000Z"]
    assert tl.overshadowed() == {rt.identifier}
