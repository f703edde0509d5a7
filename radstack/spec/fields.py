"""Small readers for spec fields: each checks one value and names its path in the error."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from radstack.spec.model import SpecError
from radstack.time.granularity import Granularity, GranularityError
from radstack.time.intervals import TimeParseError, parse_instant


def get_key(m: Mapping[str, Any], *names: str, default: Any = None) -> Any:
    for n in names:
        if n in m:
            return m[n]
    return default


def as_mapping(value: Any, path: str, *, allow_none: bool = True) -> Mapping[str, Any]:
    if value is None and allow_none:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(path, f"expected an object, got {type(value).__name__}")
    return value


def as_list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise SpecError(path, f"expected a list, got {type(value).__name__}")
    return list(value)


def as_name(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(path, f"expected a non-empty string, got {value!r}")
    return value


def as_bool(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise SpecError(path, f"expected true or false, got {value!r}")


def check_data_source(name: Any, path: str) -> str:
    """Druid's ``IdUtils.validateId``: non-empty, no ``/``, not starting with ``.``, no whitespace
    other than the space."""
    s = as_name(name, path)
    if "/" in s:
        raise SpecError(path, f"dataSource {s!r} cannot contain '/'")
    if s.startswith("."):
        raise SpecError(path, f"dataSource {s!r} cannot start with '.'")
    if re.search(r"[^\S ]", s):
        raise SpecError(path, f"dataSource {s!r} cannot contain whitespace other than space")
    return s


def parse_granularity_field(value: Any, path: str, default: str) -> Granularity:
    if value is None:
        value = default
    try:
        return Granularity.parse(value)
    except GranularityError as e:
        raise SpecError(path, str(e)) from e


def parse_instant_field(value: Any, path: str) -> int:
    if isinstance(value, bool):
        raise SpecError(path, f"expected a timestamp, got {value!r}")
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"-?\d{5,}", s):
            return int(s)
        try:
            return parse_instant(s)
        except TimeParseError as e:
            raise SpecError(path, str(e)) from e
    raise SpecError(path, f"expected a timestamp, got {value!r}")
