"""The real-time layer: Spark Structured Streaming from Kafka to queryable real-time segments.

``job`` builds and runs the query, ``sink`` is its foreachBatch (index → publish idempotently per
batch id), ``handoff`` merges closed intervals, ``dlq`` sends invalid events to ``<topic>.dlq``,
``progress`` keeps the counters ``radctl status`` shows.
"""
