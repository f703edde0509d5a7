"""The coordinator: its duties (:mod:`.duties`, one module each), the loop that runs them (:mod:`.loop`),
the retention rule engine (:mod:`.rules`) and its HTTP API (:mod:`.api`)."""
