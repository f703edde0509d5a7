"""The Spark target of radstack.time.floor agrees with Granularity.bucket_start on random instants,
periods, origins and time zones, executed by the run's real Spark session (seeded cases, one query)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from radstack.sql_text import ExpressionError
from radstack.time.floor import granularity_floor_sql
from radstack.time.granularity import Granularity
from tests.unit.test_time_floor import HI, LO, PERIODS, ZONES, _ambiguous_wall_clock

pytestmark = pytest.mark.slow
SEED = 37


def _cases(rng: random.Random, n: int) -> list[Granularity]:
    out = []
    for _ in range(n):
        spec: dict[str, Any]
        if rng.random() < 0.2:
            spec = {"type": "duration", "duration": rng.randint(1, 10 * 86_400_000)}
        else:
            spec = {"type": "period", "period": rng.choice(PERIODS), "timeZone": rng.choice(ZONES)}
        if rng.random() < 0.3:
            spec["origin"] = rng.randint(LO, HI)
        out.append(Granularity.parse(spec))
    return out


def test_spark_sql_matches_bucket_start(spark_session: Any) -> None:
    rng = random.Random(SEED)
    grans = _cases(rng, 240)
    values = [rng.randint(LO, HI) for _ in range(60)]
    exprs, said = [], []
    for g in grans:
        try:
            exprs.append(f"{granularity_floor_sql(g, 'ms', 'spark')} AS g{len(said)}")
            said.append(g)
        except ExpressionError:
            continue  # Spark cannot say it: the jobs fall back to bucket_start (a UDF)
    assert len(said) > 150
    df = spark_session.createDataFrame([(v,) for v in values], "ms BIGINT")
    rows = df.selectExpr("ms", *exprs).collect()
    wrong = [(g, r["ms"], r[f"g{i}"]) for r in rows for i, g in enumerate(said)
             if r[f"g{i}"] != g.bucket_start(r["ms"]) and not _ambiguous_wall_clock(g.bucket_start(r["ms"]), g)]
    assert not wrong, wrong[:5]
