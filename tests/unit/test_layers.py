"""The import contracts of pyproject.toml cover every module (docs/architecture.md).

import-linter checks the modules a contract names; a new core module left out of the core layer would
escape the check, so this test keeps the core layer equal to the modules directly in radstack/; inside
packages one acyclic contract covers every module without naming them."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUBPACKAGES = {"storage", "pipeline", "druid_cluster"}
CORE_PACKAGES = {"config", "filters", "time", "expressions", "spec", "sketches"}  # packages inside the core layer


def _contracts() -> dict[str, dict]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in cfg["contracts"]}


def test_core_layer_lists_every_core_module() -> None:
    layers = _contracts()["layers"]["layers"]
    core = {m.strip() for m in layers[-1].split(":")}
    on_disk = {f"radstack.{p.stem}" for p in (ROOT / "radstack").glob("*.py") if p.stem != "__init__"}
    on_disk |= {f"radstack.{name}" for name in CORE_PACKAGES}
    assert core == on_disk


def test_every_radstack_subpackage_is_a_layer() -> None:
    named = {m.strip() for layer in _contracts()["layers"]["layers"] for m in layer.replace("|", ":").split(":")}
    packages = {f"radstack.{p.parent.name}" for p in (ROOT / "radstack").glob("*/__init__.py")}
    assert packages == {f"radstack.{s}" for s in SUBPACKAGES | CORE_PACKAGES}
    assert packages <= named
    assert {"realtime", "batch", "serving", "operations"} <= named


def test_every_top_level_package_is_a_root_of_the_contracts() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests"}
    assert packages == set(cfg["root_packages"])


def test_every_package_is_kept_acyclic_without_naming_its_modules() -> None:
    """One ``acyclic_siblings`` contract over every root package, deep enough for the deepest package:
    inside any package its siblings never import in a circle, so they fall into layers by their imports,
    and a new module needs no contract edit (only a new core module, named in the core layer above)."""
    contracts = _contracts()
    acyclic = contracts["acyclic"]
    assert acyclic["type"] == "acyclic_siblings"
    roots = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
    assert set(acyclic["ancestors"]) == set(roots)
    deepest = max(len(init.parent.relative_to(ROOT).parts) for root in roots for init in (ROOT / root).rglob("__init__.py"))
    assert deepest <= acyclic.get("depth", 10)
    assert not [c["id"] for c in contracts.values() if c.get("exhaustive")], "no contract lists every module"
