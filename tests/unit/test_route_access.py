"""Every route of the server declares what it needs (serving/route_access.py): a new route without a
line there fails here, before anyone can reach it unchecked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from operations.server import create_server_app
from serving.route_access import OPEN, ROUTES, SIGNED_IN, required, rule_for
from tests.fixtures.server import server_settings


def app_routes(app: Any) -> Iterator[tuple[str, str]]:
    """(method, path template) of every route the app answers, through included routers."""
    stack = list(app.routes)
    while stack:
        r = stack.pop(0)
        if hasattr(r, "effective_candidates"):  # FastAPI's included router
            stack[:0] = r.effective_candidates()
            continue
        for method in sorted((getattr(r, "methods", None) or set()) - {"HEAD"}):
            yield method, r.path


def test_every_route_of_the_app_declares_its_authorization(tmp_path: Path) -> None:
    app = create_server_app(server_settings(tmp_path / "home"))
    routes = list(app_routes(app))
    assert len(routes) > 80
    undeclared = [f"{m} {p}" for m, p in routes if (rule := rule_for(m, p)[0]) is None or rule.template != p]
    assert not undeclared, f"declare these in serving/route_access.py: {undeclared}"
    declared = {(m, r.template) for r in ROUTES for m in r.methods}
    stale = declared - set(routes)
    assert not stale, f"rules for routes that do not exist: {sorted(stale)}"


def test_a_handler_that_checks_for_itself_says_what() -> None:
    for r in ROUTES:
        if r.kind == SIGNED_IN:
            assert r.checks, r.template


def test_an_unknown_path_needs_state_read_or_config_write() -> None:
    assert required("GET", "/nowhere") == ("STATE", "STATE", "READ")
    assert required("POST", "/nowhere") == ("CONFIG", "CONFIG", "WRITE")
    assert required("GET", "/status/health") == OPEN
    assert required("GET", "/druid/v2/datasources/wiki/dimensions") == ("DATASOURCE", "wiki", "READ")
    assert required("GET", "/druid/v1/lookups/introspect/countries/keys") == ("LOOKUP", "countries", "READ")
    assert required("POST", "/druid/indexer/v1/supervisor/wiki/terminate") == ("DATASOURCE", "wiki", "WRITE")
