"""The Coordinator API through real HTTP, over segments published straight into the metadata store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from radstack.storage.segments import DataSegment, ShardSpec
from radstack.time.intervals import Interval

pytestmark = pytest.mark.slow

V1, V2 = "2024-01-01T00:00:00.000Z", "2024-02-01T00:00:00.000Z"
DAY1, DAY2 = Interval.parse("2020-01-01/2020-01-02"), Interval.parse("2020-01-02/2020-01-03")


def seg(ds: str, iv: Interval, version: str, pn: int = 0, parts: int = 1, size: int = 100) -> DataSegment:
    return DataSegment(ds, iv, version, load_spec={"type": "local", "path": f"/nowhere/{ds}/{pn}"},
                       dimensions=("page",), metrics=("count",), shard_spec=ShardSpec("numbered", pn, parts),
                       size=size, num_rows=10)


OLD = seg("wiki", DAY1, V1)
NEW = seg("wiki", DAY1, V2, size=50)
D2A, D2B = seg("wiki", DAY2, V1, 0, 2), seg("wiki", DAY2, V1, 1, 2)
OTHER = seg("other", DAY1, V1)


@pytest.fixture
def coord_server(radstack_home: Path) -> Iterator[Any]:
    """A server whose coordinator duties do not run during the test (OLD stays used)."""
    from tests.fixtures.server import running_server

    with running_server(radstack_home, {"coordinator": {"period_seconds": 3600}}) as srv:
        srv.ctx.metadata.publish([OLD, D2A, D2B, OTHER])
        srv.ctx.metadata.publish([NEW])
        yield srv


@pytest.fixture
def coord(coord_server: Any) -> str:
    return f"{coord_server.url}/druid/coordinator/v1"


def test_served_datasources(coord: str) -> None:
    assert httpx.get(f"{coord}/datasources").json() == ["other", "wiki"]
    simple = {d["name"]: d["properties"] for d in httpx.get(f"{coord}/datasources?simple").json()}
    assert simple["wiki"]["segments"] == {"count": 3, "size": 250, "replicatedSize": 250,
                                          "minTime": "2020-01-01T00:00:00.000Z", "maxTime": "2020-01-03T00:00:00.000Z"}
    full = {d["name"]: d for d in httpx.get(f"{coord}/datasources?full").json()}
    assert sorted(s["identifier"] for s in full["wiki"]["segments"]) == sorted(
        [NEW.identifier, D2A.identifier, D2B.identifier])
    one = httpx.get(f"{coord}/datasources/wiki").json()
    assert one["segments"]["count"] == 3 and one["tiers"]["_default_tier"]["segmentCount"] == 3
    assert httpx.get(f"{coord}/datasources/nope").status_code == 204


def test_intervals_and_segments(coord: str) -> None:
    assert httpx.get(f"{coord}/datasources/wiki/intervals").json() == [DAY2.iso(), DAY1.iso()]
    simple = httpx.get(f"{coord}/datasources/wiki/intervals?simple").json()
    assert simple == {DAY2.iso(): {"size": 200, "count": 2}, DAY1.iso(): {"size": 50, "count": 1}}
    ids = httpx.get(f"{coord}/datasources/wiki/segments").json()
    assert ids == [NEW.identifier, D2A.identifier, D2B.identifier]  # overshadowed OLD is not served
    full = httpx.get(f"{coord}/datasources/wiki/segments?full").json()
    assert full[0]["shardSpec"] == {"type": "numbered", "partitionNum": 0, "partitions": 1}
    got = httpx.get(f"{coord}/datasources/wiki/segments/{D2B.identifier}").json()
    assert got["metadata"]["identifier"] == D2B.identifier and len(got["servers"]) == 1
    assert httpx.get(f"{coord}/datasources/wiki/intervals/2020-01-02_2020-01-03").json() == [
        D2A.identifier, D2B.identifier]


def test_metadata_views(coord: str) -> None:
    assert httpx.get(f"{coord}/metadata/datasources").json() == ["other", "wiki"]
    ids = httpx.get(f"{coord}/metadata/datasources/wiki/segments").json()
    assert OLD.identifier in ids and len(ids) == 4  # the metadata view still lists overshadowed used rows
    rows = {s["identifier"]: s for s in httpx.get(f"{coord}/metadata/segments?includeOvershadowedStatus").json()}
    assert rows[OLD.identifier]["overshadowed"] is True and rows[NEW.identifier]["overshadowed"] is False
    assert rows[NEW.identifier]["dataSource"] == "wiki" and rows[NEW.identifier]["numRows"] == 10
    only = httpx.get(f"{coord}/metadata/segments", params={"datasources": "other"}).json()
    assert [s["identifier"] for s in only] == [OTHER.identifier]
    one = httpx.get(f"{coord}/metadata/datasources/wiki/segments/{D2A.identifier}")
    assert one.status_code == 200 and one.json()["version"] == V1
    missing = httpx.get(f"{coord}/metadata/datasources/wiki/segments/wiki_nope")
    assert missing.status_code == 404 and missing.json()["error"] == "druidException"


def test_mark_unused_used_and_delete(coord: str, coord_server: Any) -> None:
    r = httpx.post(f"{coord}/datasources/wiki/markUnused", json={"segmentIds": [D2A.identifier, "bogus"]})
    assert r.json() == {"numChangedSegments": 1}
    assert httpx.get(f"{coord}/metadata/datasources/wiki/segments/{D2A.identifier}").status_code == 404
    unused = httpx.get(f"{coord}/metadata/datasources/wiki/segments/{D2A.identifier}?includeUnused=true")
    assert unused.status_code == 200
    assert httpx.get(f"{coord}/metadata/datasources?includeUnused").json() == ["other", "wiki"]

    r = httpx.post(f"{coord}/datasources/wiki/markUsed", json={"interval": "2020-01-02/2020-01-03"})
    assert r.json() == {"numChangedSegments": 1}

    bad = httpx.post(f"{coord}/datasources/wiki/markUnused", json={"interval": "2020/2021", "segmentIds": ["x"]})
    assert bad.status_code == 400 and bad.json()["category"] == "INVALID_INPUT"

    r = httpx.post(f"{coord}/datasources/wiki/markUnused", json={"interval": "2020-01-01/2020-01-02"})
    assert r.json() == {"numChangedSegments": 2}  # OLD and NEW: fully inside; DAY2 untouched

    r = httpx.delete(f"{coord}/datasources/wiki")
    assert r.json() == {"numChangedSegments": 2}
    assert httpx.get(f"{coord}/datasources").json() == ["other"]

    # kill: unused segments in the interval leave the metadata store
    assert httpx.delete(f"{coord}/datasources/wiki/intervals/2020-01-01_2020-01-02").status_code == 200
    left = {r.id for r in coord_server.ctx.metadata.segment_rows("wiki", used=None)}
    assert left == {D2A.identifier, D2B.identifier}


def test_rules(coord: str) -> None:
    default = [{"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}]
    assert httpx.get(f"{coord}/rules/_default").json() == default
    assert httpx.get(f"{coord}/rules/wiki").json() == []
    rules = [{"type": "loadByPeriod", "period": "P1M", "tieredReplicants": {"_default_tier": 1}},
             {"type": "dropForever"}]
    r = httpx.post(f"{coord}/rules/wiki", json=rules)
    assert r.status_code == 200 and r.content == b""
    assert httpx.get(f"{coord}/rules/wiki").json() == rules
    assert httpx.get(f"{coord}/rules/wiki?full").json() == rules + default
    everything = httpx.get(f"{coord}/rules").json()
    assert everything["wiki"] == rules and everything["_default"] == default
    bad = httpx.post(f"{coord}/rules/wiki", json=[{"type": "keepSomeMaybe"}])
    assert bad.status_code == 400 and "rules[0].type" in bad.json()["errorMessage"]
