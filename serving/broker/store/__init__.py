"""The broker's local store: the segment cache in its DuckDB database (:mod:`.cache_database`,
:mod:`.segment_cache`), the views over the visible segments (:mod:`.views`, :mod:`.projections`), the
timeline state they were made from (:mod:`.state`), the DuckDB functions Druid's queries need
(:mod:`.udfs`) and the query connections (:mod:`.connection`)."""
