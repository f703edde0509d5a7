"""The processing both the streaming job and the batch job run, as Spark DataFrame functions.

``parse`` (JSON + validation → valid rows and dead-letter rows), ``transform`` (spec transforms and
filter), ``dedup`` (within the watermark / exact), ``join`` (impressions ⋈ clicks), ``enrich``
(IP range → AS, key → value lookups), ``window`` (Druid's windowPeriod) and ``segments`` (hand rows
to the shared indexer one Arrow partition at a time). :func:`radstack.pipeline.batch.run_batch_pipeline`
runs them in their exact (batch) form.
"""
