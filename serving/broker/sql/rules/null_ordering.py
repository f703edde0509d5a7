"""Druid's planner refuses the null orderings it cannot run: ``ASC … NULLS LAST`` and ``DESC … NULLS
FIRST`` (in ORDER BY, in a window's ORDER BY, in an aggregate's), with "ASCENDING ordering with NULLS
LAST is not supported!". Druid's own orders (NULLs smallest: first ascending, last descending) are
what a statement gets without ``NULLS``, and writing them out is fine. Run on the statement as
written, before any rewrite adds orderings of its own."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import validation_error
from serving.broker.sql.translation_context import TranslationContext


def check_null_ordering(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    # the parser gives an ORDER BY key without NULLS Druid's order (nulls_are_small): only a written
    # NULLS LAST makes an ascending key nulls-last, and only a written NULLS FIRST a descending one
    for ordered in tree.find_all(exp.Ordered):
        desc = bool(ordered.args.get("desc"))
        nulls_first = bool(ordered.args.get("nulls_first"))
        if not desc and not nulls_first:
            raise validation_error("ASCENDING ordering with NULLS LAST is not supported!")
        if desc and nulls_first:
            raise validation_error("DESCENDING ordering with NULLS FIRST is not supported!")
    return tree
