"""Time, in one package: instants, intervals and ISO periods (:mod:`.intervals`), Joda zones and
formats (:mod:`.joda`), granularities (:mod:`.granularity`), the one granularity floor rendered for
every target (:mod:`.floor`), timestamp parsing (:mod:`.timestamps`) and the current time
(:mod:`.clock`)."""
