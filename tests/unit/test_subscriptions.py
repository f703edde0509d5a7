"""Subscription requests: validation, which queries are re-run as time passes, which share an
evaluation, and the stored payload round trip."""

from __future__ import annotations

import pytest

from serving.auth import User
from serving.errors import DruidError
from serving.subscriptions.hub import Subscription


def test_validation_errors_are_400s() -> None:
    bad = [[], {}, {"query": "SELECT 1", "nativeQuery": {}}, {"query": ""}, {"query": 5},
           {"nativeQuery": "timeseries"}, {"query": "SELECT 1", "context": [1]},
           {"query": "SELECT 1", "context": []}, {"query": "SELECT 1", "parameters": {}},
           {"query": "SELECT 1", "parameters": {"a": 1}}, {"query": "SELECT 1", "resultFormat": "csv"},
           {"query": "SELECT 1", "resultFormat": "objectLines"}]
    for body in bad:
        with pytest.raises(DruidError) as e:
            Subscription.from_request(body, None)
        assert e.value.status == 400, body


def test_time_dependent_queries() -> None:
    def sub(sql: str) -> Subscription:
        return Subscription.from_request({"query": sql}, None)

    assert sub("SELECT COUNT(*) FROM t WHERE __time >= CURRENT_TIMESTAMP - INTERVAL '5' MINUTE").time_dependent
    assert sub("select count(*) from t where __time > now() - interval '1' hour").time_dependent
    assert sub("SELECT * FROM t WHERE __time >= CURRENT_DATE").time_dependent
    assert not sub("SELECT page, SUM(added) FROM wiki GROUP BY 1").time_dependent
    assert not Subscription.from_request({"nativeQuery": {"queryType": "timeseries"}}, None).time_dependent


def test_same_query_context_and_owner_share_a_key() -> None:
    alice = User("alice", "h", ("read",))
    a = Subscription.from_request({"query": "SELECT 1", "context": {"sqlQueryId": "x", "timeout": 5}}, alice)
    b = Subscription.from_request({"query": "SELECT 1", "context": {"timeout": 5, "sqlQueryId": "y"}}, alice)
    c = Subscription.from_request({"query": "SELECT 1", "context": {"timeout": 5}}, None)
    d = Subscription.from_request({"query": "SELECT 1", "context": {"timeout": 6}}, alice)
    assert a.id != b.id and a.key == b.key  # query ids differ per run: not part of the key
    assert a.key != c.key and a.key != d.key  # another owner, another context


def test_payload_round_trip() -> None:
    s = Subscription.from_request({"query": "SELECT ?", "parameters": [{"type": "INTEGER", "value": 1}],
                                   "resultFormat": "array", "context": {"a": 1}}, User("bob", "h", ()))
    back = Subscription.from_payload(s.id, "2026-11-25T00:00:00.000Z", s.payload())
    assert (back.sql, back.parameters, back.result_format, back.context, back.user) == (
        s.sql, s.parameters, "array", {"a": 1}, "bob")
    assert back.describe()["owner"] == "bob" and "user" not in back.describe()
    n = Subscription.from_request({"nativeQuery": {"queryType": "topN"}}, None)
    assert Subscription.from_payload(n.id, "", n.payload()).native == {"queryType": "topN"}
