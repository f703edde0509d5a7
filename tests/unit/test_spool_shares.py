"""realtime/spool_shares.py: a client's undelivered bytes in the receiver's spool are bounded, and given
back as the drainer commits them."""

from __future__ import annotations

import pytest

from realtime.spool_shares import SpoolShareFull, SpoolShares


def test_a_client_is_refused_past_its_share_until_kafka_takes_its_events() -> None:
    shares = SpoolShares(1000)
    shares.check("a", 600, committed=0)
    shares.added("a", last_seq=10, nbytes=600)
    shares.check("a", 400, committed=0)
    shares.added("a", last_seq=20, nbytes=400)
    with pytest.raises(SpoolShareFull, match="max_bytes_per_client"):
        shares.check("a", 1, committed=0)
    shares.check("b", 1000, committed=0)  # another client has its own share
    assert shares.held("a", committed=10) == 400  # the first entry was delivered
    shares.check("a", 600, committed=10)
    assert shares.held("a", committed=20) == 0


def test_one_request_larger_than_the_share_is_let_through_when_nothing_is_pending() -> None:
    shares = SpoolShares(100)
    shares.check("a", 5000, committed=0)  # the spool's own cap (max_bytes) still applies to it
    assert SpoolShares(0).limit == 0
    SpoolShares(0).check("a", 10**12, committed=0)  # 0: no per-client limit
