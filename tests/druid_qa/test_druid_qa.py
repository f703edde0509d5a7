"""Druid's own SQL QA suite as a regression guard (``make test`` runs a fixed 1-in-25 sample;
``RADSTACK_DRUID_QA_SAMPLE=1`` or ``make test-druid-qa`` runs every case): every dataset directory
ingests, and no case that passed when ``tests/druid_qa/passing.json`` was recorded fails now. The
per-suite figures are printed and written to ``test-artifacts/druid-qa/``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.druid_qa.cases import load_cases
from tests.druid_qa.runner import (
    PASSING_FILE,
    in_sample,
    markdown,
    qa_root,
    run_cases,
    summarize,
    write_report,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "druid-qa"


def test_druid_qa_suite_does_not_regress() -> None:
    root = qa_root()
    if not root.is_dir():
        pytest.skip(f"Druid's QA suite is not at {root} (RADSTACK_DRUID_QA)")
    every = int(os.environ.get("RADSTACK_DRUID_QA_SAMPLE", "25"))
    cases = [c for c in load_cases(root) if in_sample(c, every)]
    outcomes, loads = run_cases(root, cases, workers=2, log=lambda _msg: None)
    reports = summarize(outcomes)
    write_report(ARTIFACTS, reports, outcomes, loads)
    print(f"\nDruid's SQL QA suite, 1 in {every} cases:\n" + markdown(reports))

    refused = {ld.directory: ld.refused for ld in loads if not ld.datasources}
    assert not refused, f"dataset directories that did not ingest: {refused}"
    passing = json.loads(PASSING_FILE.read_text())
    regressions = [f"{o.case.key} [{o.case.test_id}] {o.status}: {o.kind} {o.detail[:200]}"
                   for o in outcomes
                   if o.status not in ("passed", "order_undefined") and o.case.line in passing.get(o.case.file, ())]
    assert not regressions, f"{len(regressions)} cases that passed now fail:\n" + "\n".join(regressions[:40])
