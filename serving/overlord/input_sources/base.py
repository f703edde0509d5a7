"""What an input source type is (Druid's ``InputSource``): one class per ``ioConfig.inputSource.type``,
chosen by that name. Each type validates its spec at submission (a bad field is a 400), checks it
against the server's input policy (a forbidden place is a 403, :mod:`serving.input_policy`),
lists its entities when the task runs, and says whether and how the Spark batch job reads it."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO, ClassVar, Literal

from radstack.config import Settings
from serving.input_policy import check_password

SparkUse = Literal["always", "optional", "never"]


class InputSpecError(ValueError):
    """A bad ``ioConfig`` field; the message starts with the field path."""


@dataclass(frozen=True)
class InputEntity:
    """One input file/object. ``open()`` returns a fresh binary stream (caller closes it)."""

    name: str
    opener: Callable[[], BinaryIO]
    size: int | None = None

    def open(self) -> BinaryIO:
        return self.opener()


def str_list(value: Any, path: str) -> list[str]:
    """A list of strings (or one comma-separated string), else :class:`InputSpecError` naming ``path``."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputSpecError(f"{path}: expected a list of strings")
    return list(value)


def password(value: Any, settings: Settings, field: str) -> str | None:
    """A Druid PasswordProvider's value (a string, ``{"type": "default", "password"}`` or an allowed
    ``{"type": "environment", "variable"}``)."""
    check_password(value, settings, field)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        if value.get("type") == "environment":
            return os.environ.get(str(value.get("variable", "")))
        return value.get("password")
    return str(value)


class InputSource(ABC):
    """One input source type. ``spark``: whether the Spark batch job reads it — ``always`` (only Spark
    can), ``optional`` (large inputs or ``"useSpark": true``), ``never``."""

    type: ClassVar[str]
    spark: ClassVar[SparkUse] = "never"
    #: the format its entities always have (the task's ``inputFormat`` is then not needed); None: the spec's
    input_format: ClassVar[dict[str, Any] | None] = None

    @abstractmethod
    def validate(self, spec: Mapping[str, Any], path: str) -> None:
        """Raise :class:`InputSpecError` naming the field when ``spec`` is not usable."""

    def check(self, spec: Mapping[str, Any], settings: Settings) -> None:  # noqa: B027 - most types have a policy
        """Raise :class:`serving.input_policy.InputForbidden` for a place this server may not read."""

    @abstractmethod
    def resolve(self, spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:
        """The entities to read, in a stable order (a validated, checked spec)."""

    def spark_uris(self, spec: Mapping[str, Any], settings: Settings) -> list[str] | None:
        """The URIs Spark reads (None: the batch job reads this source its own way)."""
        raise InputSpecError(f"spec.ioConfig.inputSource: a {self.type!r} input is not read by Spark")
