"""Druid's lookup API through real HTTP on the embedded server: the coordinator configuration
(initialize, bulk and single updates, versions, deletes), status, the process's own view,
introspection, and a lookup read by SQL right after it was posted."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

COUNTRY = {"version": "v1", "lookupExtractorFactory": {"type": "map", "map": {"US": "United States", "DE": "Germany"}}}


@pytest.fixture
def base(radstack_server: Any) -> str:
    return radstack_server.url


def test_configuration_lifecycle(base: str) -> None:
    cfg = f"{base}/druid/coordinator/v1/lookups/config"
    assert httpx.get(cfg).status_code == 404  # never initialized
    assert httpx.get(f"{cfg}/all").status_code == 404
    assert httpx.get(f"{cfg}?discover=true").json() == ["__default"]
    r = httpx.post(f"{cfg}/__default/country", json=COUNTRY)
    assert r.status_code == 400 and "Not initialized" in r.json()["error"]
    assert httpx.post(cfg, json={}).status_code == 202
    assert httpx.get(cfg).json() == []
    assert httpx.post(f"{cfg}/__default/country", json=COUNTRY).status_code == 202
    assert httpx.get(f"{cfg}/__default/country").json() == COUNTRY
    assert httpx.get(f"{cfg}/__default").json() == ["country"]
    assert httpx.get(f"{cfg}/__default?detailed=true").json() == {"country": COUNTRY}
    # the same or a lower version is refused; a higher one replaces it
    r = httpx.post(f"{cfg}/__default/country", json=COUNTRY)
    assert r.status_code == 400 and "not newer" in r.json()["error"]
    v2 = {"version": "v2", "lookupExtractorFactory": {"type": "map", "map": {"US": "USA"}}}
    bulk = {"__default": {"country": v2}, "hot": {"x": COUNTRY}}
    r = httpx.post(cfg, json=bulk)
    assert r.status_code == 202 and r.json() == bulk
    assert httpx.get(f"{cfg}/all").json() == bulk
    assert sorted(httpx.get(cfg).json()) == ["__default", "hot"]
    # bad specs name the field at fault
    r = httpx.post(f"{cfg}/__default/bad", json={"version": "v1", "lookupExtractorFactory": {"type": "nope"}})
    assert r.status_code == 400 and "lookupExtractorFactory.type" in r.json()["error"]
    assert httpx.post(f"{cfg}/__default/bad", content=b"{not json").status_code == 400
    assert httpx.post(cfg, json=[1]).status_code == 400
    # deletes: the last lookup of a tier takes the tier with it
    assert httpx.delete(f"{cfg}/hot/x").status_code == 202
    assert sorted(httpx.get(cfg).json()) == ["__default"]
    assert httpx.delete(f"{cfg}/hot/x").status_code == 404
    assert httpx.get(f"{cfg}/hot").status_code == 404
    assert httpx.get(f"{cfg}/__default/nosuch").status_code == 404
    assert httpx.delete(f"{cfg}/__default").status_code == 202
    assert httpx.get(cfg).json() == []


def test_status_listen_introspect_and_sql(base: str) -> None:
    root = f"{base}/druid/coordinator/v1/lookups"
    assert httpx.get(f"{root}/status").status_code == 404
    httpx.post(f"{root}/config", json={}).raise_for_status()
    httpx.post(f"{root}/config/__default/country", json=COUNTRY).raise_for_status()
    # the server applies a change before it answers the write
    assert httpx.get(f"{root}/status").json() == {"__default": {"country": {"loaded": True}}}
    assert httpx.get(f"{root}/status/__default/country?detailed=true").json() == {"loaded": True, "pendingNodes": []}
    assert httpx.get(f"{root}/status/nope").status_code == 404
    node = httpx.get(f"{root}/nodeStatus").json()
    (host, state), = node["__default"].items()
    assert state["loaded"] == {"country": COUNTRY} and state["toLoad"] == {}
    assert httpx.get(f"{base}/druid/listen/v1/lookups").json() == {"country": COUNTRY}
    assert httpx.get(f"{base}/druid/listen/v1/lookups/country").json() == COUNTRY
    intro = f"{base}/druid/v1/lookups/introspect/country"
    assert httpx.get(intro).json() == {"DE": "Germany", "US": "United States"}
    assert httpx.get(f"{intro}/keys").json() == ["DE", "US"]
    assert httpx.get(f"{intro}/values").json() == ["Germany", "United States"]
    assert httpx.get(f"{intro}/version").json() == "v1"
    assert httpx.get(f"{base}/druid/v1/lookups/introspect/nosuch").status_code == 404
    r = httpx.post(f"{base}/druid/v2/sql", json={"query": "SELECT LOOKUP('DE', 'country') AS c, "
                                                          "(SELECT COUNT(*) FROM lookup.country) AS n"})
    assert r.status_code == 200 and r.json() == [{"c": "Germany", "n": 2}]
    # a lookup whose file the server may not read is configured but not loaded
    bad = {"version": "v1", "lookupExtractorFactory": {"type": "cachedNamespace", "extractionNamespace": {
        "type": "uri", "uri": "file:///etc/passwd", "namespaceParseSpec": {"format": "csv", "columns": ["k", "v"]}}}}
    assert httpx.post(f"{root}/config/__default/secret", json=bad).status_code == 202
    assert httpx.get(f"{root}/status/__default/secret?detailed=true").json()["loaded"] is False
    r = httpx.post(f"{base}/druid/v2/sql", json={"query": "SELECT * FROM lookup.secret"})
    assert r.status_code == 400 and "not found within 'lookup'" in r.json()["errorMessage"]
