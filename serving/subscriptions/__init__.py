"""Live queries: the hub that re-runs them when the segments change (:mod:`.hub`) and their routes
(:mod:`.api`)."""
