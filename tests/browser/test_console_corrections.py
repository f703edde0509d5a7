"""The console's Corrections view in a real browser: per datasource, the real-time answer each batch publish
replaced against the exact one, drawn over time with the gap, and the table of reasons (sys.corrections)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from radstack.storage.metadata import CorrectionRow
from radstack.time.intervals import format_instant, parse_instant
from tests.browser.test_console import css, open_view, wait_for
from tests.fixtures.server import running_server

pytestmark = pytest.mark.slow

T0 = parse_instant("2026-11-20T00:00:00Z")
HOUR = 3_600_000


def _rows() -> list[CorrectionRow]:
    out = []
    for h in range(12):
        exact = 4_000 + 350 * (h % 5)
        late, dups = 20 + 15 * (h % 4), 40 + h
        out.append(CorrectionRow(
            "ads", T0 + h * HOUR, T0 + (h + 1) * HOUR, "2026-11-21T03:00:00.000Z", format_instant(T0 + h * HOUR),
            exact - late, exact, {"count": float(exact - late)}, {"count": float(exact)},
            raw_events=exact + dups + 3, duplicates_removed=dups, invalid_dropped=3,
        ))  # fmt: skip
    return out


def test_corrections_chart(chrome: Any, radstack_home: Path, console_artifacts: Path) -> None:
    rows = _rows()
    with running_server(radstack_home) as srv:
        open_view(chrome, srv.url, "corrections")
        wait_for(chrome, lambda: css(chrome, "#corrections-empty"), what="the empty-state text")
        srv.ctx.metadata.publish([], corrections=rows)
        open_view(chrome, srv.url, "corrections/ads")
        chrome.refresh()
        wait_for(chrome, lambda: len(css(chrome, "#corrections-gap-chart g.series")) == 3, what="the gap chart")
        series = [g.get_attribute("data-series") for g in css(chrome, "#corrections-chart g.series")]
        assert series == ["real time", "exact (batch)"]
        series = [g.get_attribute("data-series") for g in css(chrome, "#corrections-gap-chart g.series")]
        assert series == ["gap", "duplicates removed", "invalid dropped"]
        assert all(len(g.find_elements("css selector", "circle")) == 12 for g in css(chrome, ".chart g.series"))
        body = css(chrome, "#corrections-table tbody tr")
        assert len(body) == 12
        first = [td.text for td in body[0].find_elements("css selector", "td")]
        assert first[:7] == [f"{format_instant(T0)}/{format_instant(T0 + HOUR)}", "3,980", "4,000", "20", "20", "40", "3"]
        gap = sum(r.event_gap for r in rows)
        assert f"gap {gap:,}" in css(chrome, "#corrections-gap")[0].text
        chrome.save_screenshot(str(console_artifacts / "corrections.png"))


def test_druid_corrections_and_druids_side_of_the_datasources(chrome: Any, radstack_home: Path,
                                                              console_artifacts: Path) -> None:
    """A datasource a Druid cluster serves too: the Corrections view shows radstack's corrections and,
    chosen apart, those measured against Druid's answers; the Datasources view shows Druid's side — here a
    Druid that does not answer (a closed port), which status reports instead of failing."""
    from operations.processes import free_port

    rows = _rows()
    druid_rows = [CorrectionRow("ads", r.start, r.end, "2026-11-21T03:05:00.000Z", "2026-11-20T00:00:00.000Z",
                                r.realtime_events - 7, r.batch_events, {}, {}, served_by="druid") for r in rows[:5]]
    dead = f"http://127.0.0.1:{free_port()}"
    with running_server(radstack_home, {"druid": {"overlord_url": dead, "datasources": ["ads"],
                                                  "sync_period_seconds": 3600, "timeout_seconds": 2}}) as srv:
        srv.ctx.metadata.publish([], corrections=rows)
        srv.ctx.metadata.record_corrections(druid_rows)
        open_view(chrome, srv.url, "corrections/ads@druid")
        chrome.refresh()
        wait_for(chrome, lambda: len(css(chrome, "#corrections-table tbody tr")) == 5, what="Druid's corrections")
        assert css(chrome, "#corrections-served-by")[0].get_attribute("value") == "druid"
        assert f"gap {sum(r.event_gap for r in druid_rows):,}" in css(chrome, "#corrections-gap")[0].text
        open_view(chrome, srv.url, "corrections/ads")
        chrome.refresh()
        wait_for(chrome, lambda: len(css(chrome, "#corrections-table tbody tr")) == 12, what="radstack's corrections")
        open_view(chrome, srv.url, "datasources")
        chrome.refresh()
        wait_for(chrome, lambda: css(chrome, "#druid-datasources tbody tr"), what="Druid's side", timeout=30)
        cells = [td.text for td in css(chrome, "#druid-datasources tbody tr")[0].find_elements("css selector", "td")]
        last = druid_rows[-1]
        assert cells[0] == "ads" and cells[1] == "UNKNOWN"  # the supervisor: Druid did not answer
        assert cells[5] == f"{last.realtime_events:,} → {last.batch_events:,} (gap {last.event_gap:,})"
        chrome.save_screenshot(str(console_artifacts / "datasources-druid.png"))
