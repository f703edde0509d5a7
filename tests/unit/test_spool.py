"""The receiver's write-ahead spool on disk: numbering, torn tails, the size cap, segments deleted once
delivered, the checkpoint, and one process per spool directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from realtime.spool import Checkpoint, Spool, SpoolError, SpoolFull, decode_entries, encode_entry, inspect


def _values(n: int, tag: str = "e") -> list[bytes]:
    return [f'{{"timestamp": {i}, "tag": "{tag}-{i}"}}'.encode() for i in range(n)]


def test_entries_round_trip_and_corruption_stops_decoding() -> None:
    a = encode_entry(1, "events", _values(3))
    b = encode_entry(4, "clicks", [b"", b"x" * 70_000])
    entries, used = decode_entries(a + b)
    assert used == len(a) + len(b)
    assert [(e.first_seq, e.topic, e.values) for e in entries] == [(1, "events", _values(3)), (4, "clicks", [b"", b"x" * 70_000])]
    flipped = bytearray(a + b)
    flipped[len(a) + 40] ^= 0xFF
    entries, used = decode_entries(bytes(flipped))
    assert [e.first_seq for e in entries] == [1] and used == len(a)
    assert decode_entries((a + b)[:-1])[1] == len(a)


def test_numbers_continue_after_reopen_and_a_torn_tail_is_cut(tmp_path: Path) -> None:
    s = Spool(tmp_path, fsync="always")
    assert s.append("events", _values(5)).first_seq == 1
    e = s.append("events", _values(2, "b"))
    assert (e.first_seq, e.last_seq) == (6, 7)
    seg = sorted(tmp_path.glob("*.spool"))[-1]
    s.close()
    size = seg.stat().st_size
    with open(seg, "ab") as f:  # the process died in the middle of writing an entry
        f.write(encode_entry(8, "events", _values(4))[:30])
    s = Spool(tmp_path)
    assert seg.stat().st_size == size
    assert s.append("events", _values(1)).first_seq == 8
    got = [(x.first_seq, x.values) for x in s.cursor(0).read()]
    assert got == [(1, _values(5)), (6, _values(2, "b")), (8, _values(1))]
    assert [x.first_seq for x in s.cursor(6).read()] == [6, 8]  # entries holding numbers above 6
    s.close()


def test_size_cap_segments_and_checkpoint(tmp_path: Path) -> None:
    s = Spool(tmp_path, max_bytes=20_000, segment_bytes=2_000, fsync="never")
    while True:
        try:
            s.append("events", _values(20))
        except SpoolFull as e:
            assert "receiver.spool.max_bytes" in str(e)
            break
    segs = sorted(tmp_path.glob("*.spool"))
    assert len(segs) > 5
    assert inspect(tmp_path).depth == s.last_seq  # type: ignore[union-attr]
    c = s.cursor(0)
    seen = []
    while batch := c.read(max_bytes=1):
        seen.extend(e.first_seq for e in batch)
    assert seen == list(range(1, s.last_seq + 1, 20))
    half = s.last_seq // 2
    s.save_checkpoint(Checkpoint(half, {"events": {0: 17, 1: 4}}))
    assert len(sorted(tmp_path.glob("*.spool"))) < len(segs)
    s.append("events", _values(20))  # room again
    assert [e.first_seq for e in s.cursor(half).read(1 << 30)][0] <= half + 1
    st = inspect(tmp_path)
    assert st is not None and (st.committed, st.last_seq, st.depth) == (half, s.last_seq, s.last_seq - half)
    s.close()
    s = Spool(tmp_path)
    assert s.checkpoint.committed == half and s.checkpoint.start == {"events": {0: 17, 1: 4}}
    assert s.append("events", _values(1)).first_seq == st.last_seq + 1
    s.close()


def test_everything_delivered_then_reopened_keeps_counting(tmp_path: Path) -> None:
    s = Spool(tmp_path, segment_bytes=500)
    for _ in range(10):
        s.append("events", _values(5))
    s.save_checkpoint(Checkpoint(50, {}))
    s.close()
    s = Spool(tmp_path)
    assert s.append("events", _values(1)).first_seq == 51
    assert [e.first_seq for e in s.cursor(50).read()] == [51]
    s.close()


def test_one_process_per_spool(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    pid = os.fork()
    if pid == 0:  # another process must be refused
        try:
            Spool(tmp_path)
            os._exit(1)
        except SpoolError:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    s.close()
    Spool(tmp_path).close()


def test_inspect_without_a_spool_and_an_empty_entry(tmp_path: Path) -> None:
    assert inspect(tmp_path / "none") is None
    s = Spool(tmp_path)
    with pytest.raises(ValueError, match="at least one"):
        s.append("events", [])
    assert s.last_seq == 0
    s.close()


@pytest.mark.parametrize("policy", ["always", "interval", "never"])
def test_durable_number_follows_the_fsync_policy(tmp_path: Path, policy: str) -> None:
    s = Spool(tmp_path, fsync=policy, fsync_interval_ms=50)  # type: ignore[arg-type]
    s.append("events", _values(3))
    if policy == "interval":  # the background fsync (or the drainer's sync) makes it durable
        s.sync()
    assert s.durable_seq == 3
    assert [e.last_seq for e in s.cursor(0).read()] == [3]
    s.close()
