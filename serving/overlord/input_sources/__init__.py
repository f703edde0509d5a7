"""Druid ``ioConfig.inputSource`` types: where a native batch task reads its input from.

One module per type, each defining ``SOURCE`` (an :class:`~serving.overlord.input_sources.base.InputSource`),
listed in :data:`SOURCE_MODULES` below: a new type is one new module here, one line in that tuple, its
test and its row in docs/ingestion.md. Each source resolves to a list of :class:`InputEntity` (one file/object/URL),
opened lazily as a binary stream so files are read one at a time.

:func:`validate_input_source` checks the spec at submission time (a bad field is a 400),
:func:`check_input_source` checks it against the input policy (403), :func:`resolve_input_source`
lists the entities when the task runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from radstack.config import Settings
from serving.overlord.input_sources import archive, druid, hdfs, http, inline, local, s3
from serving.overlord.input_sources.base import InputEntity, InputSource, InputSpecError

__all__ = ["SOURCES", "InputEntity", "InputSource", "InputSpecError", "check_input_source",
           "resolve_input_source", "source_of", "validate_input_source"]

#: The input source types, one module each (each declares ``SOURCE``).
SOURCE_MODULES: tuple[ModuleType, ...] = (archive, druid, hdfs, http, inline, local, s3)

SOURCES: dict[str, InputSource] = {m.SOURCE.type: m.SOURCE for m in SOURCE_MODULES}


def source_of(spec: Any, path: str = "spec.ioConfig.inputSource") -> InputSource:
    """The type of ``spec`` (``InputSpecError`` when it is not an object with a known ``type``)."""
    if not isinstance(spec, Mapping):
        raise InputSpecError(f"{path}: required (an object with a 'type')")
    source = SOURCES.get(spec.get("type"))  # type: ignore[arg-type]
    if source is None:
        raise InputSpecError(f"{path}.type: unknown input source type {spec.get('type')!r}; "
                             f"supported: {', '.join(SOURCES)}")
    return source


def validate_input_source(spec: Any, path: str = "spec.ioConfig.inputSource") -> None:
    """Raise :class:`InputSpecError` naming the field when ``spec`` is not a usable input source."""
    source_of(spec, path).validate(spec, path)


def check_input_source(spec: Mapping[str, Any], settings: Settings) -> None:
    """Refuse a (structurally valid) input source that names a place this server may not read."""
    source = SOURCES.get(spec.get("type"))  # type: ignore[arg-type]
    if source is not None:
        source.check(spec, settings)


def resolve_input_source(spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:
    """List the entities of a (validated) input source, in a stable order."""
    return source_of(spec).resolve(spec, settings)
