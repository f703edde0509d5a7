"""The error a failed micro-batch hands to Spark is one short line, and an interruption (a stop) still
matches Spark's own expression for one (the source of the stream thread's StackOverflowError)."""

from __future__ import annotations

import re

from realtime.streaming.batch_errors import INTERRUPTIONS, MAX_MESSAGE, interrupted, short_error

#: StreamExecution.PROXY_ERROR in Spark 4.0 (read from spark-sql's class file)
SPARK_PROXY_ERROR = re.compile(r"py4j.protocol.Py4JJavaError: An error occurred while calling((.|\r\n|\r|\n)*)("
                               + "|".join(INTERRUPTIONS) + ")")

JAVA_STACK = "\n".join(f"\tat org.apache.spark.Frame{i}.call(Frame.scala:{i})" for i in range(2000))


class FakePy4JJavaError(Exception):
    """What py4j raises in Python for a failed JVM call: the JVM's whole stack in its text."""


def test_an_interrupted_call_becomes_a_short_interruption() -> None:
    long = FakePy4JJavaError(f"An error occurred while calling o412.collectToPython.\n: "
                             f"java.lang.InterruptedException\n{JAVA_STACK}")
    assert len(str(long)) > 50_000
    err = short_error(long, 7)
    assert "\n" not in str(err) and len(str(err)) < MAX_MESSAGE + 150
    assert "micro-batch 7" in str(err) and "o412.collectToPython" in str(err)
    assert SPARK_PROXY_ERROR.search(str(err))  # Spark sees a stop, not a failed query


def test_an_interruption_deeper_in_the_chain_counts() -> None:
    try:
        try:
            raise FakePy4JJavaError(f"boom\n: java.nio.channels.ClosedByInterruptException\n{JAVA_STACK}")
        except FakePy4JJavaError as inner:
            raise ValueError("writing the segment failed") from inner
    except ValueError as outer:
        assert interrupted(outer)
        assert SPARK_PROXY_ERROR.search(str(short_error(outer, 1)))


def test_a_real_failure_stays_a_failure() -> None:
    err = short_error(ValueError(f"bad row\n{JAVA_STACK}"), 3)
    assert str(err) == "micro-batch 3 failed: ValueError: bad row"
    assert not SPARK_PROXY_ERROR.search(str(err)) and not interrupted(ValueError("x"))


def test_an_empty_message_names_the_type() -> None:
    assert str(short_error(RuntimeError(), 0)) == "micro-batch 0 failed: RuntimeError: RuntimeError"
