"""What a failed micro-batch hands back to Spark: a short error that still says whether it was an
interruption.

When a ``foreachBatch`` function raises, py4j passes the whole Python traceback to the JVM as the
message of a ``Py4JException``. Spark's stream thread then decides whether the failure was the
query being stopped by matching that message against ``PROXY_ERROR`` in ``StreamExecution``
(``Py4JJavaError: An error occurred while calling((.|\\r\\n|\\r|\\n)*)(<interruption class>)``).
``java.util.regex`` recurses once per character of that alternation, so a message of a few thousand
characters (any Py4JJavaError carries the full Java stack) overflowed the thread's stack: a
``StackOverflowError`` in the stream execution thread on every stop that interrupted a batch.

The sink therefore logs the full error itself and raises :class:`MicroBatchFailed`, whose message is
one line: the first line of the error and, when the error was an interruption, the marker Spark's
expression looks for (so a stop is still treated as a stop, not as a failed query)."""

from __future__ import annotations

#: the JVM exceptions Spark's StreamExecution treats as "the query was interrupted"
INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                 "java.nio.channels.ClosedByInterruptException")
#: the text Spark's PROXY_ERROR expression expects before the interruption's class name
PY4J_CALL_ERROR = "py4j.protocol.Py4JJavaError: An error occurred while calling"
MAX_MESSAGE = 300


class MicroBatchFailed(RuntimeError):
    """A micro-batch failed (details in the streaming job's log); its message stays one short line."""


def interrupted(exc: BaseException) -> bool:
    """The error, or one it was raised from, is the JVM's interruption of a running call (a stop)."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, InterruptedError | KeyboardInterrupt) or any(name in str(e) for name in INTERRUPTIONS):
            return True
        e = e.__cause__ or e.__context__
    return False


def short_error(exc: BaseException, batch_id: int) -> MicroBatchFailed:
    """The one-line error the sink raises to Spark in place of ``exc``."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    text = f"micro-batch {batch_id} failed: {type(exc).__name__}: {first}"[:MAX_MESSAGE]
    if interrupted(exc):
        text += f" ({PY4J_CALL_ERROR} the sink: {INTERRUPTIONS[0]})"
    return MicroBatchFailed(text)
