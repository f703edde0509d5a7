"""The Overlord: Druid's task API and the native batch ingestion tasks it runs.

- :mod:`serving.overlord.api` — the ``/druid/indexer/v1`` router.
- :mod:`serving.overlord.task_spec` — parsing and validating a submitted task.
- :mod:`serving.overlord.tasks` — the task runner (background threads) and the index task itself.
- :mod:`serving.overlord.input_sources` / :mod:`serving.overlord.input_formats` — where rows come
  from and how they are parsed into Arrow record batches.
- :mod:`serving.overlord.staging` — spilling parsed batches to local Parquet (bounded memory).
- :mod:`serving.overlord.reports` — row stats, parse exceptions and Druid's task report JSON.
"""
