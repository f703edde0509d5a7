"""``inline``: the rows are in the spec (``data``)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from radstack.config import Settings
from serving.overlord.input_sources.base import InputEntity, InputSource, InputSpecError


class InlineSource(InputSource):
    type = "inline"

    def validate(self, spec: Mapping[str, Any], path: str) -> None:
        if not isinstance(spec.get("data"), str):
            raise InputSpecError(f"{path}.data: required (a string)")

    def resolve(self, spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:
        data = spec["data"].encode("utf-8")
        return [InputEntity("inline", lambda: io.BytesIO(data), len(data))]


SOURCE = InlineSource()
