"""The datasource catalog: every spec file (``*.yaml``, ``*.yml``, ``*.json``) in
``datasources.dir`` (default ``$RADSTACK_HOME/datasources``), read once per call."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from radstack.config import Settings
from radstack.spec import DatasourceSpec, SpecError, load_datasource_spec

SPEC_SUFFIXES = (".yaml", ".yml", ".json")


def case_twin(name: str, existing: Iterable[str]) -> str | None:
    """The existing datasource whose name differs from ``name`` only in case, if any. radstack refuses
    such twins (a 400 where a datasource is created): its query engine's relation names ignore case, so
    two of them would answer from one table."""
    folded = name.casefold()
    return next((e for e in sorted(existing) if e != name and e.casefold() == folded), None)


def case_twin_message(name: str, twin: str) -> str:
    return (f"Datasource [{name}] differs only in case from the existing datasource [{twin}]: datasource "
            "names that differ only in case are refused (docs/ingestion.md)")


def spec_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.suffix in SPEC_SUFFIXES and p.is_file())


def load_catalog(settings: Settings) -> dict[str, DatasourceSpec]:
    """Datasource name → spec. Two files naming the same datasource are an error."""
    out: dict[str, DatasourceSpec] = {}
    for path in spec_files(settings.datasources_dir):
        spec = load_datasource_spec(path)
        if spec.name in out:
            raise SpecError("dataSchema.dataSource", f"{spec.name!r} is defined by both {out[spec.name].source} and {path}")
        twin = case_twin(spec.name, out)
        if twin is not None:
            raise SpecError("dataSchema.dataSource", f"{case_twin_message(spec.name, twin)} ({path})")
        out[spec.name] = spec
    return out


def get_spec(settings: Settings, name: str) -> DatasourceSpec:
    catalog = load_catalog(settings)
    if name not in catalog:
        known = ", ".join(sorted(catalog)) or "none"
        raise KeyError(f"unknown datasource {name!r} (known: {known}; specs are read from {settings.datasources_dir})")
    return catalog[name]
