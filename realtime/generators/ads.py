"""The RADStack paper's ad-tech workload: impressions and clicks, joined by ``impression_id``.

impressions: ``timestamp, impression_id, publisher, advertiser, gender, city, price``
clicks:      ``timestamp, click_id, impression_id`` (1–60 s after the impression; a fraction ``ctr``
of impressions is clicked)

Timestamps are ISO-8601 UTC with millis (``2026-01-01T00:00:00.000Z``). Impression ``i`` is at
``start + i / sim_rate`` seconds; a late impression's timestamp is 2 minutes to 3 hours earlier than
that (its clicks follow it and are late too). Clicks are delivered once the stream passes their time.
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections.abc import Iterator

import orjson

from radstack.time.intervals import format_instant
from realtime.generators.common import Emit, GeneratorOptions, Injector, weighted, zipf_weights

PUBLISHERS = [
    "bieberfever.com", "ultratrimfast.com", "gamesandgadgets.net", "dailynewsdigest.org",
    "techcrunchy.io", "recipebox.co", "travelnomad.com", "sportsfanzone.net", "financewatch.com",
    "petlovers.org", "autotrader-hub.com", "musicstream.fm",
]  # fmt: skip
ADVERTISERS = [
    "google.com", "amazon.com", "booking.com", "nike.com", "spotify.com", "netflix.com",
    "airbnb.com", "uber.com", "ikea.com", "adidas.com",
]  # fmt: skip
GENDERS = ["male", "female", "unknown"]
CITIES = [
    "San Francisco", "New York", "London", "Berlin", "Paris", "Tokyo", "Sydney", "Toronto",
    "Sao Paulo", "Mumbai", "Amsterdam", "Chicago", "Singapore", "Madrid", "Seoul",
]  # fmt: skip
CLICK_DELAY_MS = (1_000, 60_000)


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def generate(opts: GeneratorOptions, start_ms: int) -> Iterator[Emit]:
    rng = random.Random(opts.seed)
    inj = Injector(rng, opts.duplicates, opts.late, opts.late_max_ms, opts.before_first_late)
    publisher = weighted(rng, PUBLISHERS, zipf_weights(len(PUBLISHERS)))
    advertiser = weighted(rng, ADVERTISERS, zipf_weights(len(ADVERTISERS), 0.8))
    gender = weighted(rng, GENDERS, [0.48, 0.47, 0.05])
    city = weighted(rng, CITIES, zipf_weights(len(CITIES), 0.7))
    step = 1000.0 / opts.sim_rate
    # pending clicks: (delivery time, sequence, event, late)
    clicks: list[tuple[int, int, bytes, bytes, bool]] = []
    seq = 0
    for i in range(opts.events):
        now = start_ms + int(i * step)
        while clicks and clicks[0][0] <= now:
            _, _, key, value, late = heapq.heappop(clicks)
            yield from inj.after(Emit("clicks", key, value, late=late))
        delay = inj.late_delay_ms()
        ts = now - delay
        imp_id = _uuid(rng)
        imp = {
            "timestamp": format_instant(ts),
            "impression_id": imp_id,
            "publisher": publisher(),
            "advertiser": advertiser(),
            "gender": gender(),
            "city": city(),
            "price": round(rng.lognormvariate(-0.7, 0.6), 4),
        }
        yield from inj.after(Emit("impressions", imp_id.encode(), orjson.dumps(imp), late=delay > 0))
        if rng.random() < opts.ctr:
            click_ts = ts + rng.randint(*CLICK_DELAY_MS)
            click_id = _uuid(rng)
            click = {"timestamp": format_instant(click_ts), "click_id": click_id, "impression_id": imp_id}
            # an on-time click is delivered when the stream reaches its time; a late one right away
            deliver_at = click_ts if delay == 0 else now
            seq += 1
            heapq.heappush(clicks, (deliver_at, seq, click_id.encode(), orjson.dumps(click), delay > 0))
    while clicks:
        _, _, key, value, late = heapq.heappop(clicks)
        yield from inj.after(Emit("clicks", key, value, late=late))
