"""What the quickstart says about the real-time answer: the right sign and the right reason."""

from __future__ import annotations

from operations.quickstart import correction_line


def test_below_the_truth_blames_late_events() -> None:
    text = correction_line({"realtime_events": 9_342, "batch_events": 10_000, "event_gap": 658})
    assert "658 events below" in text and "window period" in text and "+658" not in text


def test_above_the_truth_blames_duplicates() -> None:
    text = correction_line({"realtime_events": 10_012, "batch_events": 10_000, "event_gap": -12})
    assert "12 events above" in text and "dedup" in text


def test_equal() -> None:
    assert "exact too" in correction_line({"event_gap": 0})


def test_the_jvm_noise_filter_keeps_every_other_line() -> None:
    import io
    import sys

    from radstack.pipeline import spark_session

    captured = io.BytesIO()

    class Err:
        buffer = captured

    old, sys.stderr = sys.stderr, Err()  # type: ignore[assignment]
    try:
        spark_session._pump(io.BytesIO(b"WARNING: Using incubator modules: jdk.incubator.vector\nreal error\n\xff raw\n"))
    finally:
        sys.stderr = old
    assert captured.getvalue() == b"real error\n\xff raw\n"
