"""What every query passes through, native or SQL: the query manager (slots, queue, timeouts,
cancellation: :mod:`.query_manager`), the memory guard (:mod:`.memory_guard`), the limits on a
query's text and resources (:mod:`.limits`) and the relations a statement may read (:mod:`.relations`)."""
