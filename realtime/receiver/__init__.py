"""The HTTP event receiver: ``POST /v1/events/{topic}`` → Kafka (RADStack's HTTP front for the producer).

Body: one JSON object, a JSON array of objects, or newline-delimited JSON (one object per line; blank
lines are skipped). Each event must be a JSON object whose timestamp field (``receiver.timestamp_field``,
default ``timestamp``) is epoch millis (a number or a string of digits) or an ISO-8601 instant.

Responses (all JSON):

- ``200 {"accepted": n}`` — every event was acknowledged by Kafka (``acks=all``, idempotent producer).
- ``202 {"accepted": n, "spooled": n}`` — Kafka is away or slow: the events are in the receiver's
  write-ahead spool (``receiver.spool``, on by default) and the drainer delivers them in order, exactly
  once, when Kafka takes them again (a restarted receiver goes on where it stopped).
- ``400 {"accepted": k, "rejected": [{"index": i, "reason": …}, …], …}`` — some events were invalid;
  the ``k`` valid ones of the same request **were delivered** (the body says so). Indexes are positions
  in the array, or among the non-blank lines for NDJSON.
- ``401`` (Basic auth on and missing/wrong), ``403`` (an internal ``__*`` or dead-letter topic: never
  writable), ``404`` (a topic not on the allow-list: ``receiver.topics``, else ``kafka.topics`` and the
  topics the datasource specs read), ``413`` (body larger than ``receiver.max_body_bytes``, or an event
  larger than ``receiver.max_event_bytes`` / Kafka's ``message.max.bytes``: the body lists them; retrying
  cannot help), ``503`` + ``Retry-After`` (the spool is full — or, with the spool off, Kafka is
  unavailable: retry the request).

With the spool on, every accepted event is appended to the spool first (fsync per
``receiver.spool.fsync``), then produced by the drainer; the request waits up to
``receiver.delivery_timeout_ms`` for Kafka's acknowledgement (not at all while Kafka is known to be down).

Event times must fall in the years 1970–9999 (epoch millis 0 … 253402300799999); others are rejected
with the reason, like any invalid event.

``GET /health`` (and Druid's ``/status/health``) answers ``true`` when the process is up.

The parts: :mod:`.events` (the body's events), :mod:`.users` (who may write which topic),
:mod:`.answers` (every answer and refusal, rendered in one place), :mod:`.state` (the producer or
spool and the topic caches), :mod:`.posting` (``POST /v1/events/{topic}``), :mod:`.app` (the app).
"""

from realtime.receiver.app import create_app, serve
from realtime.receiver.events import BadBody, parse_events
from realtime.receiver.users import ReceiverUser, receiver_users

__all__ = ["BadBody", "ReceiverUser", "create_app", "parse_events", "receiver_users", "serve"]
