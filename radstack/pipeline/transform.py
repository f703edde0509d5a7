"""The spec's transforms and filter (Druid's ``transformSpec``; the paper's "enhance" stage) on a
Spark DataFrame, compiled by :mod:`radstack.expressions` / :mod:`radstack.filters` (``spark`` dialect).

As in Druid (and the indexer), every transform reads the *input* row — a transform may overwrite an
input column — and the filter reads the transformed row. ``__time`` is BIGINT epoch millis here. A
transform named ``__time`` replaces the event time. ``processing.defaults`` (``{field: value}``) fills
NULLs and empty strings before the transforms run (rename is a transform: ``{name: new, expression: old}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from radstack.expressions import expression_to_sql
from radstack.filters import filter_to_sql
from radstack.pipeline.parse import q
from radstack.spec import TIME_COLUMN, DatasourceSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["druid_types", "apply_defaults", "apply_transforms", "apply_filter", "transform_and_filter"]


def druid_types(df: DataFrame) -> dict[str, str]:
    """Column → Druid type (``LONG``/``DOUBLE``/``STRING``) for the expression compilers."""
    out: dict[str, str] = {}
    for f in df.schema.fields:
        t = f.dataType.simpleString()
        if t in ("bigint", "int", "smallint", "tinyint", "boolean"):
            out[f.name] = "LONG"
        elif t in ("double", "float") or t.startswith("decimal"):
            out[f.name] = "DOUBLE"
        elif t == "timestamp":
            out[f.name] = "TIMESTAMP"
        else:
            out[f.name] = "STRING"
    out[TIME_COLUMN] = "LONG"
    return out


def _sql_literal(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"


def apply_defaults(df: DataFrame, defaults: Mapping[str, Any]) -> DataFrame:
    """NULL (and, for strings, empty) values of ``defaults``' fields replaced by the default."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    if not defaults:
        return df
    types = druid_types(df)
    cols = []
    for c in df.columns:
        if c in defaults:
            col = q(c)
            cond = f"{col} IS NULL" + (f" OR {col} = ''" if types.get(c) == "STRING" else "")
            cols.append(F.expr(f"CASE WHEN {cond} THEN {_sql_literal(defaults[c])} ELSE {col} END").alias(c))
        else:
            cols.append(F.col(q(c)))
    for c, v in defaults.items():
        if c not in df.columns:
            cols.append(F.expr(_sql_literal(v)).alias(c))
    return df.select(*cols)


def _keep(df: DataFrame, cond: Column, mark: str | None) -> DataFrame:
    """Rows where ``cond`` holds; with ``mark``, every row, the boolean column ``mark`` AND-ed with it."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    if mark is None:
        return df.where(cond)
    return df.withColumn(mark, F.col(q(mark)) & F.coalesce(cond, F.lit(False)))


def apply_transforms(df: DataFrame, spec: DatasourceSpec, *, mark: str | None = None) -> DataFrame:
    """``transformSpec.transforms`` (all reading the input row) as one projection. A ``__time``
    transform drops rows whose new time is NULL (with ``mark``: clears their mark instead)."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark


    transforms = spec.data_schema.transforms
    if not transforms:
        return df
    types = druid_types(df)
    by_name = {t.name: expression_to_sql(t.expression, dialect="spark", column_types=types) for t in transforms}
    cols = []
    for c in df.columns:
        if c in by_name:
            e = F.expr(by_name[c])
            cols.append((e.cast("bigint") if c == TIME_COLUMN else e).alias(c))
        else:
            cols.append(F.col(q(c)))
    for t in transforms:
        if t.name not in df.columns:
            cols.append(F.expr(by_name[t.name]).alias(t.name))
    out = df.select(*cols)
    if TIME_COLUMN in by_name:
        out = _keep(out, F.col(TIME_COLUMN).isNotNull(), mark)
    return out


def apply_filter(df: DataFrame, spec: DatasourceSpec, *, mark: str | None = None) -> DataFrame:
    """Rows the ``transformSpec.filter`` accepts (all rows without a filter); with ``mark``, every
    row, the boolean column ``mark`` cleared where the filter rejects it."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark


    flt = spec.data_schema.transform_filter
    if flt is None:
        return df
    where = filter_to_sql(dict(flt), dialect="spark", column_types=druid_types(df))
    return _keep(df, F.expr(f"coalesce(({where}), false)"), mark)


def transform_and_filter(df: DataFrame, spec: DatasourceSpec, *, mark: str | None = None) -> DataFrame:
    """Defaults, then transforms, then the filter. With ``mark`` (the name of a boolean column of
    ``df``) nothing is dropped: rows the pipeline would drop get ``mark = false``."""
    defaults = spec.processing.extra.get("defaults") or {}
    return apply_filter(apply_transforms(apply_defaults(df, defaults), spec, mark=mark), spec, mark=mark)
