"""One name per stage: config name = entry point = module stem, family = folder, and no
plugin module without an entry point (it would silently never load)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from plm_core.registry import build_registry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]


def _entry_points() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return dict(project["entry-points"]["plm"])


def _hookimpl_modules() -> set[str]:
    found = set()
    for path in (REPO / "plm_plugins").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "plm_register_components":
                found.add(".".join(path.relative_to(REPO).with_suffix("").parts))
    return found


def test_every_plugin_module_has_an_entry_point() -> None:
    missing = _hookimpl_modules() - set(_entry_points().values())
    assert missing == set(), f"add these to [project.entry-points.plm] in pyproject.toml: {sorted(missing)}"


def test_names_modules_entry_points_and_families_agree() -> None:
    by_module = {module: name for name, module in _entry_points().items()}
    for reg in build_registry(autoload=False).all():
        module = reg.cls.__module__
        if not module.startswith("plm_plugins."):
            continue
        folder, stem = module.split(".")[1], module.split(".")[-1]
        assert by_module.get(module) == stem == reg.name, (reg.name, module)
        assert reg.family == folder, (reg.name, reg.family, folder)
