"""Table references, resolved by scope: a CTE name is visible only inside the query that defines it
(and its later CTEs and descendants), as in SQL; every other name is ``druid.ds`` / ``"ds"`` / ``ds`` →
the datasource view, ``INFORMATION_SCHEMA.*`` and ``sys.*`` → the per-query system tables,
``lookup.name`` → the lookup's table (``k``, ``v``); anything else → Druid's ``Object 'x' not found``.

Scopes come from sqlglot's :mod:`sqlglot.optimizer.scope`. Every CTE is renamed to a private name
(``__rs_cte_N``) together with exactly the references its scope resolves to it, so the DuckDB statement
never carries a user's name that DuckDB could resolve differently (a path, a glob, an internal table):
:mod:`serving.broker.queries.relations` checks the translated statement against that allow-list again."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.queries.relations import cte_references
from serving.broker.sql.catalog import SYSTEM_TABLES
from serving.broker.sql.errors import unsupported, validation_error
from serving.broker.sql.translation_context import TranslationContext
from serving.errors import object_not_found

_SCHEMAS = {"INFORMATION_SCHEMA": "INFORMATION_SCHEMA", "SYS": "sys"}

#: the private names CTEs get in the DuckDB statement (``__rs_cte_1`` …)
CTE_PREFIX = "__rs_cte_"


def _system_key(schema: str, name: str) -> tuple[str, str] | None:
    canonical = _SCHEMAS.get(schema.upper())
    if canonical is None:
        return None
    for key in SYSTEM_TABLES:
        if key[0] == canonical and key[1].upper() == name.upper():
            return key
    return None


def _ctes(tree: exp.Expression) -> list[exp.CTE]:
    """Every CTE of ``tree``; WITH RECURSIVE (not in Druid) and a name used twice in one WITH refused."""
    for with_ in tree.find_all(exp.With):
        if with_.recursive:
            raise unsupported("WITH RECURSIVE is not supported")
        names = [c.alias for c in with_.expressions]
        if len(set(names)) != len(names):
            raise validation_error("Duplicate name in WITH: each CTE of one WITH needs its own name")
    return list(tree.find_all(exp.CTE))


def resolve_tables(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    ctes, refs = _ctes(tree), cte_references(tree)
    private = {id(cte): f"{CTE_PREFIX}{i}" for i, cte in enumerate(ctes, start=1)}
    tables = list(tree.find_all(exp.Table))
    for table in tables:
        cte = refs.get(id(table))
        if cte is not None:
            if not table.alias:
                table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name, quoted=True)))
            table.set("this", exp.to_identifier(private[id(cte)], quoted=True))
        else:
            _resolve(table, ctx)
    for cte in ctes:
        alias = cte.args.get("alias")
        columns = alias.args.get("columns") if isinstance(alias, exp.TableAlias) else None
        cte.set("alias", exp.TableAlias(this=exp.to_identifier(private[id(cte)], quoted=True), columns=columns))
    ctx.cte_names = set(private.values())
    # Columns qualified with the ``druid`` schema (druid.ds.col) lose the schema part.
    for col in tree.find_all(exp.Column):
        if col.args.get("db") is not None and col.db == "druid":
            col.set("db", None)
    return tree


def _resolve(table: exp.Table, ctx: TranslationContext) -> None:
    name, schema, catalog = table.name, table.db, table.catalog
    if catalog and catalog != "druid":
        raise object_not_found(catalog)
    if not schema or schema == "druid":
        if name.startswith("__") or not ctx.catalog.has(name):
            raise object_not_found(name)
        ctx.datasources.add(name)
        table.set("this", exp.to_identifier(name, quoted=True))
        table.set("db", None)
        table.set("catalog", None)
        return
    if schema == "lookup":
        if name not in ctx.catalog.lookups:
            raise object_not_found(name, "lookup")
        ctx.lookups.add(name)
        if not table.alias:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(name, quoted=True)))
        table.set("this", exp.to_identifier(ctx.catalog.lookups[name].table, quoted=True))
        table.set("db", None)
        table.set("catalog", None)
        return
    if schema == "view":
        raise object_not_found(name, "view")
    key = _system_key(schema, name)
    if key is None:
        if schema.upper() in _SCHEMAS:
            raise object_not_found(name, _SCHEMAS[schema.upper()])
        raise object_not_found(schema)
    ctx.system_tables.add(key)
    if not table.alias:
        table.set("alias", exp.TableAlias(this=exp.to_identifier(name, quoted=True)))
    table.set("this", exp.to_identifier(SYSTEM_TABLES[key], quoted=True))
    table.set("db", None)
    table.set("catalog", None)
