"""What the quickstart says about the real-time answer: the right sign and the right reason."""

from __future__ import annotations

from operations.quickstart import correction_line, sent_line


def test_below_the_truth_blames_late_events() -> None:
    text = correction_line({"realtime_events": 9_342, "batch_events": 10_000, "event_gap": 658})
    assert "658 events below" in text and "window period" in text and "+658" not in text


def test_above_the_truth_blames_duplicates() -> None:
    text = correction_line({"realtime_events": 10_012, "batch_events": 10_000, "event_gap": -12})
    assert "12 events above" in text and "dedup" in text


def test_what_was_sent_adds_up_stream_by_stream() -> None:
    # #51: "sent 27,730 messages: 24,000 unique impressions, 1,180 duplicates, 672 late" did not add up
    text = sent_line({"sent": 27_730, "streams": {
        "impressions": {"unique": 24_000, "duplicates": 1_180, "late": 672},
        "clicks": {"unique": 2_500, "duplicates": 50, "late": 70}}}, "PT2H")
    assert text.startswith("sent 27,730 messages: 25,180 impressions (24,000 unique + 1,180 re-sent; 672 of them late)")
    assert "+ 2,550 clicks (2,500 unique + 50 re-sent; 70 of them late)" in text and "PT2H" in text


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
