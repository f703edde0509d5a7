"""The layer contracts of pyproject.toml cover every module (docs/architecture.md).

import-linter checks the modules a contract names; a new core module left out of the core layer would
escape the check, so this test keeps the core layer equal to the modules directly in radstack/."""

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


def test_every_package_has_an_inner_layers_contract() -> None:
    """Inside every package with modules of its own, an exhaustive layers contract orders them, so an
    import running back up at any level (or a module nobody placed) breaks ``lint-imports``."""
    contracts = _contracts()
    covered = {c["containers"][0] for c in contracts.values() if c["id"].startswith("inner-")}
    assert all(c.get("exhaustive") for c in contracts.values() if c["id"].startswith("inner-"))
    roots = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
    packages = set()
    for root in roots:
        for init in (ROOT / root).rglob("__init__.py"):
            pkg = init.parent
            if len([p for p in pkg.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()]) > 2:
                packages.add(".".join(pkg.relative_to(ROOT).parts))
    assert packages <= covered, sorted(packages - covered)
