"""A SQL query runs outside a transaction (one DuckDB snapshot per statement) unless views were committed
while it was planned and started; then it runs again inside a transaction (serving/broker/service.py,
``optimistic_snapshot``). Either way its answer is one whole version."""

from __future__ import annotations

from typing import Any

import pyarrow.compute as pc
import pytest

from serving.broker.sql import engine
from tests.fixtures.broker import WIKI_SCHEMA, BrokerEnv, wiki_table

SUM = 'SELECT SUM(added) AS s, COUNT(*) AS n FROM "wiki"'


def _answer(env: BrokerEnv) -> list[tuple[Any, ...]]:
    res = engine.execute(env.service, SUM, metadata=env.metadata)
    try:
        rows = [tuple(r.values()) for b in res.batches() for r in b.to_pylist()]
    finally:
        res.close()
    return rows


def _count_transactions(env: BrokerEnv, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    opened: list[int] = []
    real = env.service.snapshot

    def counted() -> Any:
        opened.append(1)
        return real()

    monkeypatch.setattr(env.service, "snapshot", counted)
    return opened


def test_a_query_needs_no_transaction_when_no_view_changed(wiki: BrokerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    opened = _count_transactions(wiki, monkeypatch)
    assert _answer(wiki) == [(56, 7)]
    assert opened == []


def test_views_committed_while_a_query_is_planned_send_it_into_a_transaction(
        wiki: BrokerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    opened = _count_transactions(wiki, monkeypatch)
    real_translate = engine.translate
    published: list[str] = []

    def translate_then_publish(*args: Any, **kw: Any) -> Any:
        tr = real_translate(*args, **kw)
        if not published:  # a new version of every row lands between planning and the statement
            table = wiki_table()
            wiki.index(table.set_column(table.schema.get_field_index("added"), "added",
                                        pc.multiply(table["added"], 10)),
                       WIKI_SCHEMA, version="2024-03-01T00:00:00.000Z")
            wiki.service.refresh()
            published.append("v2")
        return tr

    monkeypatch.setattr(engine, "translate", translate_then_publish)
    assert _answer(wiki) == [(560, 7)]  # the new version whole, read in a transaction
    assert published == ["v2"] and opened == [1]
    assert _answer(wiki) == [(560, 7)] and opened == [1]  # and the next query needs none again
