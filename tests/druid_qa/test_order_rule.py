"""The QA harness's order rule: rows tied on every outer ORDER BY key may come in any order."""

from __future__ import annotations

from tests.druid_qa.judging import _outer_order_columns

SQL = "SELECT a, CAST(b AS CHAR) t, COUNT(*) c FROM x GROUP BY a, b ORDER BY t ASC, 1 DESC"


def test_keys_are_found_by_alias_and_by_ordinal() -> None:
    assert _outer_order_columns(SQL, ["a", "t", "c"]) == [1, 0]


def test_a_key_outside_the_answer_cannot_be_judged() -> None:
    assert _outer_order_columns("SELECT a FROM x ORDER BY LENGTH(a)", ["a"]) is None
    assert _outer_order_columns("SELECT a FROM x ORDER BY b", ["a"]) is None


def test_an_inner_order_by_is_not_the_outer_one() -> None:
    assert _outer_order_columns("SELECT a FROM (SELECT a FROM x ORDER BY a LIMIT 3)", ["a"]) is None
