"""Druid 33 as the referee of the cases radstack fails.

The QA suite's expected tables are Druid master's, which is newer than the Druid 33 radstack is matched
against. Where a case fails, the referee loads the same dataset directory into a local Druid 33
(:mod:`operations.druid_local`, the same jars ``make test-druid`` uses) with the suite's own ingestion
specs, asks it the same statement, and judges radstack's answer against Druid 33's: both refusing, or
both answering the same rows (quidem's comparison rules), makes the case ``as_druid33`` — counted apart
in the report, never recorded in the regression baseline.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx

from operations.druid_local import LocalDruid
from radstack.druid_cluster.submit import DruidApiError, OverlordClient
from tests.druid_qa.datasets import load_dataset
from tests.druid_qa.judging import Answer, Outcome, ask, judge


class Referee:
    """A local Druid 33 answering the failing cases of one dataset directory at a time."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._dir = tempfile.TemporaryDirectory(prefix="druid-qa-referee-")
        self.druid = LocalDruid(Path(self._dir.name))
        self._loaded: str | None = None
        self._datasources: list[str] = []

    def __enter__(self) -> Referee:
        self.druid.start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.druid.stop()
        finally:
            self._dir.cleanup()

    def _load(self, directory: str) -> bool:
        """The directory's datasets in Druid 33, replacing the previous directory's (they reuse names)."""
        if self._loaded == directory:
            return bool(self._datasources)
        with OverlordClient(self.druid.overlord_url, coordinator_url=self.druid.coordinator_url,
                            timeout=120) as client:
            for ds in self._datasources:  # mark the previous directory's segments unused
                with contextlib.suppress(httpx.HTTPError):
                    httpx.delete(f"{self.druid.coordinator_url}/druid/coordinator/v1/datasources/{ds}", timeout=60)
            load = load_dataset(client, self.root, directory)
            for ds in load.datasources:
                with contextlib.suppress(DruidApiError, TimeoutError):
                    client.wait_for_load(ds, timeout_s=300)
        self._loaded, self._datasources = directory, load.datasources
        return bool(load.datasources)

    def review(self, directory: str, failed: list[tuple[Outcome, Answer]]) -> Iterator[tuple[int, Outcome]]:
        """For each (position, outcome) of ``failed`` radstack answered as Druid 33 does: the case as
        ``as_druid33``. Cases Druid 33 cannot be asked (its dataset did not load) keep their outcome."""
        if not self._load(directory):
            return
        with httpx.Client(timeout=120) as http:
            for i, (outcome, answer) in enumerate(failed):
                theirs = ask(http, self.druid.broker_url, outcome.case)
                if _agrees(outcome, answer, theirs):
                    yield i, Outcome(outcome.case, "as_druid33", "answered as Druid 33", outcome.detail,
                                     outcome.http_status)


def _agrees(outcome: Outcome, ours: Answer, theirs: Answer) -> bool:
    if theirs.http_status == 0 or theirs.http_status >= 500:
        return False  # Druid 33 broke; nothing to compare with
    if theirs.http_status >= 400 or ours.http_status >= 400:
        return theirs.http_status >= 400 and ours.http_status >= 400
    # rows against rows: the case is judged as an ``!ok`` one whatever Druid master expects
    verdict = judge(dataclasses.replace(outcome.case, kind="ok"), ours, theirs.cells or [], len(theirs.names))
    return verdict.status in ("passed", "order_undefined")
