"""Long ``AND``/``OR`` chains become balanced trees.

The parser builds ``a OR b OR c …`` as a left-deep tree as deep as the chain is long, and every pass
that walks up from a column (qualification, typing) then pays for that depth: a 2,000-term ``OR`` took
seconds to plan. ``AND`` and ``OR`` are associative in SQL's three-valued logic, so a balanced tree of the
same operands, in the same order, means the same and is only log₂(n) deep. Parenthesised operands are
kept as they are."""

from __future__ import annotations

from sqlglot import exp

MIN_CHAIN = 8


def _balanced(kind: type[exp.Connector], operands: list[exp.Expression]) -> exp.Expression:
    if len(operands) == 1:
        return operands[0]
    mid = len(operands) // 2
    return kind(this=_balanced(kind, operands[:mid]), expression=_balanced(kind, operands[mid:]))


def balance_connectors(tree: exp.Expression) -> exp.Expression:
    for kind in (exp.And, exp.Or):
        tops = [n for n in tree.find_all(kind) if type(n.parent) is not kind]
        for top in tops:
            operands = list(top.flatten(unnest=False))
            if len(operands) < MIN_CHAIN:
                continue
            for o in operands:
                o.pop()
            balanced = _balanced(kind, operands)
            if top is tree:
                tree = balanced
            else:
                top.replace(balanced)
    return tree
