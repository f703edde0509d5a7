"""What every section of the settings is built on, and the one error configuration raises."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from radstack.user_errors import UserError

ENV_PREFIX = "RADSTACK_"
REPO_ROOT = Path(__file__).resolve().parents[2]


class ConfigError(ValueError, UserError):
    """A configuration value that cannot be used."""


class Section(BaseModel):
    """A group of settings: immutable, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)
