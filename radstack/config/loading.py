"""Reading the settings (defaults → the YAML file → ``RADSTACK_*`` variables → overrides) and describing
their keys."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from radstack.config.section import ENV_PREFIX, ConfigError
from radstack.config.settings import Settings, _merge, _validate


def _field_annotation(path: list[str]) -> Any:
    """The declared type of the key at ``path``, or None when no such key exists."""
    model: Any = Settings
    for i, part in enumerate(path):
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        ann = field.annotation
        if i == len(path) - 1:
            return ann
        model = ann
    return None


def env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """The nested overrides the ``RADSTACK_*`` variables of ``env`` set, each checked against its type."""
    out: dict[str, Any] = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name == "RADSTACK_CONFIG":
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX):].split("__")]
        ann = _field_annotation(path)
        if ann is None or (isinstance(ann, type) and issubclass(ann, BaseModel)):
            continue  # unknown keys are ignored (other tools share the prefix); docs list the known ones
        origin = getattr(ann, "__origin__", None)
        try:
            parsed: Any = yaml.safe_load(value) if origin in (list, dict) else value
            if isinstance(parsed, str) and ann is bool and not parsed.strip():
                parsed = False
            TypeAdapter(ann).validate_python(parsed)
        except (ValidationError, yaml.YAMLError) as e:
            why = e.errors()[0]["msg"] if isinstance(e, ValidationError) else str(e)
            raise ConfigError(f"{name}: cannot read {value!r} as {getattr(ann, '__name__', ann)}: {why}") from None
        node = out
        for p in path[:-1]:
            node = node.setdefault(p, {})
        node[path[-1]] = parsed
    return out


def find_config_file(explicit: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
    if explicit:
        p = Path(explicit)
        if not p.exists():
            raise ConfigError(f"config file {p} does not exist")
        return p
    if env.get("RADSTACK_CONFIG"):
        p = Path(env["RADSTACK_CONFIG"])
        if not p.exists():
            raise ConfigError(f"RADSTACK_CONFIG={p} does not exist")
        return p
    home = env.get("RADSTACK_HOME") or str(Settings.model_fields["home"].default)
    candidates = [Path.cwd() / "radstack.yaml", Path(os.path.expanduser(home)) / "radstack.yaml"]
    return next((c for c in candidates if c.exists()), None)


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults → the YAML file → ``RADSTACK_*`` variables → ``overrides``, validated once."""
    env = os.environ if env is None else env
    raw: dict[str, Any] = {}
    path = find_config_file(config_file, env)
    if path is not None:
        loaded = yaml.safe_load(path.read_text()) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping")
        _validate(loaded, where=str(path))  # errors name the file, not the merged result
        _merge(raw, loaded)
    _merge(raw, env_overrides(env))
    if overrides:
        _merge(raw, overrides)
    settings = _validate(raw, where=str(path) if path else "settings")
    settings._source = path
    return settings


def _defaults(model: type[BaseModel]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out[name] = _defaults(ann)
        else:
            default = field.get_default(call_default_factory=True)
            out[name] = str(default) if isinstance(default, Path) else default
    return out


DEFAULTS: dict[str, Any] = _defaults(Settings)
"""Every key's default, nested like the YAML file (generated from the model)."""


def config_keys(model: type[BaseModel] = Settings, prefix: str = "") -> Iterator[tuple[str, Any, str]]:
    """``(dotted key, default, description)`` for every leaf key of the model, in declaration order."""
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from config_keys(ann, f"{prefix}{name}.")
        else:
            default = field.get_default(call_default_factory=True)
            yield f"{prefix}{name}", str(default) if isinstance(default, Path) else default, field.description or ""


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (lists and empty mappings are leaves)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def env_name(dotted: str) -> str:
    """The environment variable that overrides ``dotted`` (``server.port`` → ``RADSTACK_SERVER__PORT``)."""
    return ENV_PREFIX + "__".join(p.upper() for p in dotted.split("."))
