"""The ``druid_sync`` duty: keep the Druid cluster of the ``druid:`` settings in step
(:mod:`radstack.druid_cluster.sync`: supervisors, retention rules, compaction configs), every
``druid.sync_period_seconds``, and try the re-indexes that failed again
(:func:`radstack.druid_cluster.reindex.retry_pending`) in a thread of their own, one at a time, so a slow
Druid never holds up the coordinator's other duties."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from radstack.druid_cluster.reindex import pending_reindexes, retry_pending
from radstack.druid_cluster.sync import sync
from radstack.storage.supervisors import datasource_catalog
from serving.coordinator.duties.base import Duty, DutyContext

log = logging.getLogger(__name__)

_lock = threading.Lock()
_last_sync = 0.0
_retrying: threading.Thread | None = None


def _retry(ctx: DutyContext) -> None:
    try:
        for line in retry_pending(ctx.settings, ctx.metadata, ctx.deep_storage, datasource_catalog(ctx.settings, ctx.metadata)):
            log.info("druid re-index retry: %s", line)
    except Exception:  # noqa: BLE001 - the next pass tries again
        log.exception("druid re-index retry failed")


def _run(ctx: DutyContext) -> dict[str, Any]:
    global _last_sync, _retrying
    druid = ctx.settings.druid
    if not druid.overlord_url or not druid.datasources:
        return {}
    with _lock:
        now = time.monotonic()
        if now - _last_sync < float(druid.sync_period_seconds):
            return {}
        _last_sync = now
        report = sync(ctx.settings, ctx.metadata).to_json()
        if pending_reindexes(ctx.metadata) and ctx.deep_storage is not None and (_retrying is None or not _retrying.is_alive()):
            _retrying = threading.Thread(target=_retry, args=(ctx,), name="druid-reindex-retry", daemon=True)
            _retrying.start()
            report["retrying"] = True
    return report


DUTY = Duty("druid_sync", _run)  # the retries need deep storage: not while tasks run (busy)
