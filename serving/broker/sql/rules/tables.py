"""Table references: ``druid.ds`` / ``"ds"`` / ``ds`` → the datasource view; ``INFORMATION_SCHEMA.*``
and ``sys.*`` → the per-query system tables; ``lookup.name`` → the lookup's table (``k``, ``v``); anything else → Druid's ``Object 'x' not found``."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.catalog import SYSTEM_TABLES
from serving.broker.sql.context import TranslationContext
from serving.broker.sql.errors import object_not_found, validation_error

_SCHEMAS = {"INFORMATION_SCHEMA": "INFORMATION_SCHEMA", "SYS": "sys"}


def _system_key(schema: str, name: str) -> tuple[str, str] | None:
    canonical = _SCHEMAS.get(schema.upper())
    if canonical is None:
        return None
    for key in SYSTEM_TABLES:
        if key[0] == canonical and key[1].upper() == name.upper():
            return key
    return None


def resolve_tables(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    ctx.cte_names = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    for table in list(tree.find_all(exp.Table)):
        _resolve(table, ctx)
    # Columns qualified with the ``druid`` schema (druid.ds.col) lose the schema part.
    for col in tree.find_all(exp.Column):
        if col.args.get("db") is not None and col.db == "druid":
            col.set("db", None)
    return tree


def _resolve(table: exp.Table, ctx: TranslationContext) -> None:
    name, schema, catalog = table.name, table.db, table.catalog
    if catalog and catalog != "druid":
        raise object_not_found(catalog)
    if not schema and name in ctx.cte_names:
        return
    if not schema or schema == "druid":
        if not ctx.catalog.has(name):
            raise object_not_found(name)
        ctx.datasources.add(name)
        table.set("this", exp.to_identifier(name, quoted=True))
        table.set("db", None)
        table.set("catalog", None)
        return
    if schema == "lookup":
        if name not in ctx.catalog.lookups:
            raise validation_error(f"Object '{name}' not found within 'lookup'")
        ctx.lookups.add(name)
        if not table.alias:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(name, quoted=True)))
        table.set("this", exp.to_identifier(ctx.catalog.lookups[name].table, quoted=True))
        table.set("db", None)
        table.set("catalog", None)
        return
    if schema == "view":
        raise validation_error(f"Object '{name}' not found within 'view'")
    key = _system_key(schema, name)
    if key is None:
        if schema.upper() in _SCHEMAS:
            raise validation_error(f"Object '{name}' not found within '{_SCHEMAS[schema.upper()]}'")
        raise object_not_found(schema)
    ctx.system_tables.add(key)
    if not table.alias:
        table.set("alias", exp.TableAlias(this=exp.to_identifier(name, quoted=True)))
    table.set("this", exp.to_identifier(SYSTEM_TABLES[key], quoted=True))
    table.set("db", None)
    table.set("catalog", None)
