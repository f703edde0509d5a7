"""What the quickstart says about the real-time answer: the right sign and the right reason."""

from __future__ import annotations

from operations.quickstart import realtime_gap


def test_below_the_truth_blames_late_events() -> None:
    text = realtime_gap(9_342, 10_000)
    assert "658 events below" in text and "window period" in text and "+658" not in text


def test_above_the_truth_blames_duplicates() -> None:
    text = realtime_gap(10_012, 10_000)
    assert "12 events above" in text and "duplicates" in text


def test_equal() -> None:
    assert "equal" in realtime_gap(5, 5)


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
