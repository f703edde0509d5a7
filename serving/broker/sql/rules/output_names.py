"""Output column names as Druid (Calcite) gives them: an unaliased expression in a SELECT list is
named ``EXPR$<position>``; a column keeps its name."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.translation_context import TranslationContext


def name_projections(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    for select in tree.find_all(exp.Select):
        new = []
        for i, proj in enumerate(select.expressions):
            if isinstance(proj, exp.Alias | exp.Star) or (
                isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star | exp.Identifier)
            ):
                new.append(proj)
            else:
                new.append(exp.alias_(proj, f"EXPR${i}", quoted=True))
        select.set("expressions", new)
    return tree
