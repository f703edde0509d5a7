"""``archive`` (radstack's own): the raw-event archive of a datasource's topics, read by the Spark batch
job (:mod:`batch.overlord_task`) for ``granularitySpec.intervals``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from radstack.config import Settings
from serving.overlord.input_sources.base import InputEntity, InputSource, InputSpecError, str_list


class ArchiveSource(InputSource):
    type = "archive"
    spark = "always"

    def validate(self, spec: Mapping[str, Any], path: str) -> None:
        if spec.get("topics") is not None:
            str_list(spec["topics"], f"{path}.topics")

    def resolve(self, spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:
        raise InputSpecError("spec.ioConfig.inputSource: the raw archive is read by the Spark batch job (batch/)")

    def spark_uris(self, spec: Mapping[str, Any], settings: Settings) -> list[str] | None:
        return None  # the batch job reads the archive through its own reader


SOURCE = ArchiveSource()
