"""Rewrite rules, one per module (sqlglot optimizer style): each takes a node and the translation
context and returns the node or its replacement. :func:`apply_bottom_up` runs one over a tree with
children rewritten before their parents."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from serving.broker.sql.context import TranslationContext

Rule = Callable[[exp.Expression, TranslationContext], exp.Expression]


def apply_bottom_up(tree: exp.Expression, rules: list[Rule], ctx: TranslationContext) -> exp.Expression:
    nodes = list(tree.walk())
    for node in reversed(nodes):
        new = node
        for rule in rules:
            new = rule(new, ctx)
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


def anonymous_name(node: exp.Expression) -> str | None:
    return str(node.name).upper() if isinstance(node, exp.Anonymous) else None
