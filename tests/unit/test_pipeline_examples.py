"""The example specs (examples/ads) over their generators' output, through the batch form of the
pipeline: no dead letters, exact counts, the join and the enrichment give what the generator knows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from radstack.spec import load_datasource_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ads"
T0 = 1_795_000_000_000


def _values(spark: Any, emits: list[Any]) -> Any:
    return spark.createDataFrame([(e.value,) for e in emits], "value binary")


def test_ads_with_clicks_batch_pipeline(stream_spark: Any) -> None:
    from radstack.pipeline.batch import run_batch_pipeline
    from radstack.pipeline.parse import dead_letters, parse_events
    from realtime.generators import ads
    from realtime.generators.common import GeneratorOptions

    opts = GeneratorOptions(events=2000, seed=3, start_ms=T0, sim_rate=20.0, duplicates=0.05, late=0.0, ctr=0.2)
    emits = list(ads.generate(opts, T0))
    imps = [e for e in emits if e.stream == "impressions"]
    clicks = [e for e in emits if e.stream == "clicks"]
    clicked = {e.key for e in clicks if not e.duplicate}
    spec = load_datasource_spec(EXAMPLES / "ads-clicks.yaml")
    raw_imps = _values(stream_spark, imps)
    assert dead_letters(parse_events(raw_imps, spec)).count() == 0
    rows = run_batch_pipeline(stream_spark, raw_imps, spec, joined={"clicks": _values(stream_spark, clicks)})
    assert rows.columns == ["__time", "publisher", "advertiser", "gender", "city", "price", "is_clicked"]
    got = rows.groupBy().sum("is_clicked").collect()[0][0]
    assert rows.count() == 2000  # duplicates removed exactly
    assert got == len(clicked)  # every click is within 60 s of its impression (window PT2M)


def test_netflow_enrichment_from_the_generator_tables(stream_spark: Any, tmp_path: Path) -> None:
    from radstack.pipeline import enrich
    from radstack.pipeline.batch import run_batch_pipeline
    from radstack.storage.deep_storage import open_deep_storage
    from realtime.generators import netflow
    from realtime.generators.common import GeneratorOptions

    tables = netflow.Tables(9)
    paths = tables.write(tmp_path / "tables")
    cfg = {"type": "local", "path": str(tmp_path / "deep")}
    storage = open_deep_storage(cfg)
    for p in paths:
        storage.put_file(p, f"lookups/netflow/{p.name}")
    enrich.set_deep_storage(cfg)
    opts = GeneratorOptions(events=500, seed=9, start_ms=T0, duplicates=0.0, late=0.0)
    emits = list(netflow.generate(opts, T0, tables))
    spec = load_datasource_spec(EXAMPLES / "netflow.yaml")
    rows = run_batch_pipeline(stream_spark, _values(stream_spark, emits), spec).collect()
    assert len(rows) == 500
    assert {r["src_as"] for r in rows} <= set(netflow.AS_NAMES)
    assert {r["dst_as"] for r in rows} <= set(netflow.AS_NAMES)
    # the server side of each sample has a DNS name; the client side never does
    assert all((r["dst_host"] is None) or r["dst_host"].endswith(".example") for r in rows)
    assert 0 < sum(r["dst_host"] is not None for r in rows) < 500
