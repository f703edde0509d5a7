"""Recovery of interrupted flushes, on local deep storage (no Kafka needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from radstack.storage.raw_archive import data_key, manifest_key, parse_data_name
from realtime.archiver.recovery import delete_committed_manifests, recover_partition

HOUR = 3_600_000


@pytest.fixture
def storage(tmp_path: Path):  # type: ignore[no-untyped-def]
    from radstack.storage.deep_storage.local import LocalDeepStorage

    return LocalDeepStorage(tmp_path / "deep")


def _flush(storage, first: int, last: int, hours: list[int], *, move: int | None = None) -> list[str]:  # type: ignore[no-untyped-def]
    keys = [data_key("t", 0, first, last, h * HOUR) for h in hours]
    storage.put_bytes(json.dumps({"first": first, "last": last, "files": keys}).encode(), manifest_key("t", 0, first, last))
    for k in keys[: len(keys) if move is None else move]:
        storage.put_bytes(b"data", k)
    return keys


def test_names_carry_the_flush_range() -> None:
    k = data_key("ads.impressions", 3, 100, 199, 5 * HOUR)
    assert k == "raw/ads.impressions/dt=1970-01-01/hour=05/ads.impressions+3+100+199.parquet"
    r = parse_data_name(k)
    assert r is not None and (r.topic, r.partition, r.first, r.last) == ("ads.impressions", 3, 100, 199)


def test_complete_flush_without_commit_is_committed(storage) -> None:  # type: ignore[no-untyped-def]
    _flush(storage, 0, 99, [1, 2])
    res = recover_partition(storage, "t", 0, None)
    assert (res.commit_offset, res.resume_offset, res.completed) == (100, 100, 1)


def test_partial_flush_is_undone_and_reread(storage) -> None:  # type: ignore[no-untyped-def]
    keys = _flush(storage, 100, 199, [1, 2, 3], move=2)
    res = recover_partition(storage, "t", 0, 100)
    assert res.commit_offset is None and res.resume_offset is None and res.undone == 1
    assert not any(storage.exists(k) for k in keys)
    assert storage.list("raw/_manifests/") == []


def test_stale_manifest_after_commit_is_removed(storage) -> None:  # type: ignore[no-untyped-def]
    keys = _flush(storage, 0, 99, [1])
    res = recover_partition(storage, "t", 0, 100)
    assert res.stale == 1 and res.commit_offset is None
    assert storage.exists(keys[0]), "committed data stays"
    assert storage.list("raw/_manifests/") == []


def test_complete_then_partial(storage) -> None:  # type: ignore[no-untyped-def]
    _flush(storage, 0, 99, [1])
    later = _flush(storage, 100, 149, [1, 2], move=1)
    res = recover_partition(storage, "t", 0, None)
    assert res.commit_offset == 100 and res.resume_offset == 100
    assert not storage.exists(later[0])
    assert delete_committed_manifests(storage, "t", 0, 100) == 1
    assert storage.list("raw/_manifests/") == []


@pytest.mark.parametrize(
    ("code", "transient"),
    [("_WAIT_COORD", True), ("COORDINATOR_NOT_AVAILABLE", True), ("NOT_COORDINATOR", True), ("_TRANSPORT", True),
     ("UNKNOWN_MEMBER_ID", False), ("ILLEGAL_GENERATION", False)],
)
def test_a_commit_waiting_for_a_new_coordinator_is_retried(code: str, transient: bool) -> None:
    """A broker that held the group's coordinator died: librdkafka refuses a sync commit with
    _WAIT_COORD until it finds the new one — a retry succeeds (a refused membership does not)."""
    from confluent_kafka import KafkaError, KafkaException

    from realtime.archiver.archiver import _transient

    assert _transient(KafkaException(KafkaError(getattr(KafkaError, code)))) is transient
