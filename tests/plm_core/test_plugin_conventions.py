"""One name per stage: entry point = module stem = registered name, family = folder (or a
folder that groups part of one family), and no plugin module without an entry point (it
would silently never load). Reads only the repo's files (pyproject.toml, plm_plugins/) and
the installed entry points, never the network."""

from __future__ import annotations

import ast
import importlib.metadata as md
import sys
from collections import Counter
from pathlib import Path

from plm_core.registry import BUILTIN_DIST
from plm_index.plugins import ENTRY_POINT_GROUP, build_registry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "plm_plugins"
# Entry point modules that register more than one component: module -> how many. None do
# today; a module that adds a second class must be listed here (and explain why).
MULTI: dict[str, int] = {}
# Modules whose folder is not their family's name: a family is its base class (what a slot
# takes), and these folders predate that rule. Moving a module changes its entry point, so
# `pip install -e .` must run again: module -> family.
OTHER_FOLDER: dict[str, str] = {}  # module -> family, for a plugin that lives outside its family's folder (none)


def pyproject_entry_points(root: Path = REPO) -> dict[str, str]:
    """`[project.entry-points.plm]` of the repo's pyproject: entry point name -> module."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return dict(project["entry-points"][ENTRY_POINT_GROUP])


def _is_hookimpl(decorator: ast.expr) -> bool:
    node = decorator.func if isinstance(decorator, ast.Call) else decorator  # @hookimpl(...) too
    return (isinstance(node, ast.Name) and node.id == "hookimpl") or (
        isinstance(node, ast.Attribute) and node.attr == "hookimpl"
    )


def hookimpl_modules(root: Path = REPO) -> dict[str, list[str]]:
    """Every module under plm_plugins/ with a `@hookimpl` function -> those functions' names."""
    found: dict[str, list[str]] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        hooks = [
            node.name
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(map(_is_hookimpl, node.decorator_list))
        ]
        if hooks:
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            found[module.removesuffix(".__init__")] = hooks
    return found


def test_every_plugin_module_has_an_entry_point() -> None:
    modules = hookimpl_modules()
    assert len(modules) >= 19 and all("plm_register_components" in hooks for hooks in modules.values())
    missing = sorted(set(modules) - set(pyproject_entry_points().values()))
    assert missing == [], f"add these to [project.entry-points.plm] in pyproject.toml: {missing}"


def test_a_forgotten_entry_point_is_found(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project.entry-points.plm]\nold = "plm_plugins.fusers.old"\n')
    folder = tmp_path / PACKAGE / "fusers"
    folder.mkdir(parents=True)
    hook = "@hookimpl\ndef plm_register_components(registry):\n    registry.add(New)\n"
    (folder / "old.py").write_text(f"from plm_core.hookspecs import hookimpl\n\n{hook}")
    (folder / "new.py").write_text(f"from plm_core import hookspecs\n\n{hook.replace('@', '@hookspecs.')}")
    (folder / "helpers.py").write_text("def plm_register_components(registry):\n    pass\n")  # no @hookimpl
    modules = hookimpl_modules(tmp_path)
    assert set(modules) == {"plm_plugins.fusers.old", "plm_plugins.fusers.new"}
    assert set(modules) - set(pyproject_entry_points(tmp_path).values()) == {"plm_plugins.fusers.new"}


def test_every_entry_point_names_a_module_of_the_repo() -> None:
    for name, module in pyproject_entry_points().items():
        path = REPO.joinpath(*module.split("."))
        assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), (name, module)


def test_installed_entry_points_match_pyproject() -> None:
    installed = {
        ep.name: ep.value
        for ep in md.entry_points(group=ENTRY_POINT_GROUP)
        if ep.dist is not None and ep.dist.name == BUILTIN_DIST
    }
    assert installed == pyproject_entry_points(), "pyproject.toml changed: run `pip install -e .` again"


def test_names_modules_entry_points_and_families_agree() -> None:
    entry_points = pyproject_entry_points()
    builtins = [r for r in build_registry(autoload=False).all() if r.package == BUILTIN_DIST]
    for reg in builtins:
        module = entry_points.get(reg.plugin)
        assert module == reg.cls.__module__, f"{reg.name}: registered by entry point {reg.plugin!r} ({module})"
        if not module.startswith(f"{PACKAGE}."):
            continue
        parts = module.split(".")
        assert len(parts) == 3, f"{module}: plugins live in {PACKAGE}/<family>/<name>.py"
        folder, stem = parts[1], parts[2]
        assert reg.plugin == stem == reg.name, f"entry point {reg.plugin!r}, module {module}, name {reg.name!r}"
        family = OTHER_FOLDER.get(module, folder)
        assert reg.family == family, f"{reg.name}: family {reg.family!r} but it lives in {PACKAGE}/{folder}/"

    per_entry_point = Counter(r.plugin for r in builtins)
    for name, module in entry_points.items():
        if module.startswith(f"{PACKAGE}."):
            assert per_entry_point[name] == MULTI.get(module, 1), (name, module, per_entry_point[name])
