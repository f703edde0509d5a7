"""#50: a metadata store written before case twins were refused may hold ``wiki`` and ``Wiki``; the broker
serves only one of them (the query engine's names ignore case), never one's rows under the other's name."""

from __future__ import annotations

import pyarrow.compute as pc

from serving.broker.sql import engine
from tests.fixtures.broker import WIKI_SCHEMA, BrokerEnv, wiki_table


def _sum(env: BrokerEnv, table: str) -> tuple[int, int]:
    res = engine.execute(env.service, f'SELECT SUM(added) AS s, COUNT(*) AS n FROM "{table}"', metadata=env.metadata)
    try:
        row = [r for b in res.batches() for r in b.to_pylist()][0]
    finally:
        res.close()
    return row["s"], row["n"]


def test_an_old_case_twin_is_not_served_and_never_answers_for_the_other(wiki: BrokerEnv) -> None:
    before = _sum(wiki, "wiki")
    small = wiki_table().slice(0, 2)
    small = small.set_column(small.column_names.index("added"), "added", pc.multiply(small["added"], 1000))
    twin = wiki.index(small, {**WIKI_SCHEMA, "dataSource": "Wiki"}, version="v2", publish=False)
    served = wiki.metadata.segments(None)
    wiki.service.apply_segments([*served, *twin])  # as a store holding both would be read
    assert _sum(wiki, "wiki") == before  # wiki answers with its own rows only
    assert "Wiki" not in wiki.service.datasources()
