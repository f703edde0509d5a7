"""Enrichment lookups (``processing.enrich``), the same in stream and batch.

Two kinds, both small tables held in memory and broadcast:

* ``type: ip_range`` — IP address → AS (autonomous system) by *range search*, as in the IXP thesis:
  a table of ``start, end, value`` (inclusive IPv4 ranges, dotted or integer) loaded from a CSV/JSON
  file in deep storage (``key``) or given inline (``ranges``). The address is turned into a number
  and joined to the range table with ``start <= ip AND ip <= end`` on a broadcast table (Spark plans a
  broadcast nested-loop/range join; the table is small).
* ``type: lookup`` — key → value map loaded from a file in deep storage (``key``: a JSON object, or
  CSV/JSONL rows with ``key``/``value``) or inline (``map``), a broadcast equi-join.

Each entry: ``{type, field, output, key | ranges | map, default?, keyColumn?, valueColumn?}``
(``keyColumn``/``valueColumn`` pick the columns of a CSV/JSON-rows file). Missing matches give
``default`` (NULL when absent).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from radstack.lookups import ip_range, ip_to_long
from radstack.pipeline.parse import q
from radstack.spec import DatasourceSpec
from radstack.storage.deep_storage import open_deep_storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["ip_to_long", "load_ranges", "load_map", "enrich", "enrich_entries"]

_deep_storage_config: dict[str, Any] | None = None


def set_deep_storage(config: Mapping[str, Any] | None) -> None:
    """Where ``key`` files are read from (the job sets this from its settings)."""
    global _deep_storage_config
    _deep_storage_config = dict(config) if config is not None else None


def _read(entry: Mapping[str, Any]) -> bytes | None:
    key = entry.get("key") or entry.get("file")
    if not key:
        return None
    cfg = entry.get("deep_storage") or _deep_storage_config
    if cfg is None:
        raise ValueError(f"enrichment {entry.get('output')!r}: no deep storage configured to read {key!r}")

    return open_deep_storage(dict(cfg)).get_bytes(str(key))


def _rows(data: bytes, key: str) -> list[dict[str, Any]]:
    text = data.decode()
    if key.endswith(".csv"):
        return list(csv.DictReader(io.StringIO(text)))
    stripped = text.lstrip()
    if stripped.startswith("["):
        return list(json.loads(text))
    if stripped.startswith("{") and "\n{" not in stripped:
        obj = json.loads(text)
        return [{"key": k, "value": v} for k, v in obj.items()]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_ranges(entry: Mapping[str, Any]) -> list[tuple[int, int, str]]:
    """``(start, end, value)`` sorted by start, from ``ranges`` or the deep-storage file ``key``."""
    raw = entry.get("ranges")
    if raw is None:
        data = _read(entry)
        raw = _rows(data or b"", str(entry.get("key") or entry.get("file")))
    vc = entry.get("valueColumn")
    return sorted(ip_range(r, str(vc) if vc else None, f"enrich {entry.get('output')!r} range {i}")
                  for i, r in enumerate(raw))


def load_map(entry: Mapping[str, Any]) -> dict[str, str]:
    raw = entry.get("map")
    if raw is not None:
        return {str(k): str(v) for k, v in dict(raw).items()}
    data = _read(entry)
    kc, vc = str(entry.get("keyColumn", "key")), str(entry.get("valueColumn", "value"))
    return {str(r[kc]): str(r[vc]) for r in _rows(data or b"", str(entry.get("key") or entry.get("file")))}


def enrich_entries(spec: DatasourceSpec) -> list[dict[str, Any]]:
    return [dict(e) for e in spec.processing.extra.get("enrich", []) or [] if isinstance(e, Mapping)]


_IP_SQL = (
    "CASE WHEN {c} RLIKE '^[0-9]{{1,3}}(\\\\.[0-9]{{1,3}}){{3}}$' THEN "
    "try_cast(split({c}, '\\\\.')[0] AS BIGINT) * 16777216 + try_cast(split({c}, '\\\\.')[1] AS BIGINT) * 65536"
    " + try_cast(split({c}, '\\\\.')[2] AS BIGINT) * 256 + try_cast(split({c}, '\\\\.')[3] AS BIGINT) END"
)


def enrich(df: DataFrame, spec: DatasourceSpec, spark: SparkSession) -> DataFrame:
    """Apply every ``processing.enrich`` entry (in order)."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    for n, e in enumerate(enrich_entries(spec)):
        field, output = str(e["field"]), str(e.get("output") or e.get("as"))
        typ = str(e.get("type", "lookup"))
        default = e.get("default")
        k, v = f"__k{n}", f"__v{n}"
        if typ == "ip_range":
            ranges = load_ranges(e)
            s, en = f"__s{n}", f"__e{n}"
            table = spark.createDataFrame(ranges, f"{s} BIGINT, {en} BIGINT, {v} STRING")
            keyed = df.withColumn(k, F.expr(_IP_SQL.format(c=q(field))))
            joined = keyed.join(
                F.broadcast(table), (F.col(k) >= F.col(s)) & (F.col(k) <= F.col(en)), "left"
            ).drop(s, en)
        elif typ == "lookup":
            mapping = load_map(e)
            table = spark.createDataFrame(list(mapping.items()), f"{k} STRING, {v} STRING")
            keyed = df.withColumn(k, F.col(q(field)).cast("string"))
            joined = keyed.join(F.broadcast(table), on=k, how="left")
        else:
            raise ValueError(f"processing.enrich[{n}].type: unknown enrichment {typ!r} (ip_range, lookup)")
        val = F.col(v) if default is None else F.coalesce(F.col(v), F.lit(str(default)))
        others = [F.col(q(c)) for c in df.columns if c != output]
        df = joined.select(*others, val.alias(output))
    return df
