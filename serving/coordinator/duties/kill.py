"""The ``kill`` duty (Druid's ``KillUnusedSegments``): :func:`radstack.storage.kill.kill_duty` every pass, when
``coordinator.kill.on`` (what it deletes, and what it never does, is said there)."""

from __future__ import annotations

from radstack.storage.kill import KillReport, kill_duty
from serving.coordinator.duties.base import Duty, DutyContext


def _run(ctx: DutyContext) -> list[KillReport]:
    assert ctx.deep_storage is not None
    return kill_duty(ctx.metadata, ctx.deep_storage, ctx.settings, now_ms=ctx.now_ms)


DUTY = Duty("kill", _run, needs_deep_storage=True)
