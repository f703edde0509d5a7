"""What a coordinator duty is: a name (its key in the pass's report and its metric label) and a function of
one pass's context."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from radstack.config import Settings
from radstack.storage.compaction import SparkCompactor
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore


@dataclass(frozen=True)
class DutyContext:
    """One coordinator pass: the stores, the settings and the pass's clock."""

    metadata: MetadataStore
    deep_storage: DeepStorage | None
    settings: Settings
    now_ms: int
    spark_compactor: SparkCompactor | None = None


@dataclass(frozen=True)
class Duty:
    """One of Druid's coordinator duties: ``run`` returns what the pass's ``DutyReport`` keeps under ``name``."""

    name: str
    run: Callable[[DutyContext], Any]
    needs_deep_storage: bool = False
