"""A runner for Apache Druid's own SQL QA suite (its quidem cases and datasets) against radstack.

The suite is read from ``../shared/druid-qa`` (``RADSTACK_DRUID_QA`` overrides), never copied into the
project. ``python -m tests.druid_qa`` (``make test-druid-qa``) ingests each dataset directory with the
suite's own ingestion specs through radstack's task API, runs every ``!ok`` and ``!error`` case of the
standard engine through ``/druid/v2/sql``, and writes a per-suite report.
"""
