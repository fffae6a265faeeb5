"""The component registry, filled by pluggy plugins loaded from the `plm` entry points.
Built-in stages come through the `[project.entry-points.plm]` table of plm's own
pyproject, exactly like a third party's, so the core never imports a plugin by name."""

from __future__ import annotations

import difflib
import functools
import importlib.metadata as md
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pluggy

from plm_core import hookspecs
from plm_core.errors import PluginError

BUILTIN_DIST = "plm"
ENTRY_POINT_GROUP = "plm"


@dataclass(frozen=True)
class Registration:
    name: str
    family: str
    cls: type
    package: str
    version: str
    plugin: str


class Registry:
    """Names -> component classes, unique per family."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], Registration] = {}
        self._current: tuple[str, str, str] = ("<direct>", "", "<direct>")

    def add(self, cls: type, name: str | None = None, family: str | None = None) -> None:
        """Register `cls` as `name` in `family` (defaults: cls.name, cls.family)."""
        name = str(name or getattr(cls, "name", None) or cls.__name__)
        family = str(family or getattr(cls, "family", "stage"))
        package, version, plugin = self._current
        key = (family, name)
        if key in self._items:
            other = self._items[key]
            raise PluginError(
                f"duplicate {family} name {name!r}: registered by package {other.package!r} "
                f"(plugin {other.plugin}) and by package {package!r} (plugin {plugin}); "
                "uninstall one of them or rename the component"
            )
        self._items[key] = Registration(name, family, cls, package, version, plugin)

    def all(self) -> list[Registration]:
        return sorted(self._items.values(), key=lambda r: (r.family, r.name))

    def names(self, family: str | None = None) -> list[str]:
        return sorted(r.name for r in self._items.values() if family in (None, r.family))

    def get(self, name: str, family: str | None = None, *, where: str = "") -> Registration:
        """Find a registration by name (optionally 'family:name'); unknown names get hints."""
        if ":" in name and family is None:
            family, name = name.split(":", 1)
        found = [r for r in self._items.values() if r.name == name and family in (None, r.family)]
        if len(found) == 1:
            return found[0]
        loc = f"{where}: " if where else ""
        if len(found) > 1:
            fams = ", ".join(f"{r.family}:{r.name}" for r in found)
            raise PluginError(f"{loc}{name!r} is ambiguous; write one of {fams}")
        known = self.names(family)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        fam = f"{family} " if family else ""
        raise PluginError(f"{loc}unknown {fam}component {name!r}.{hint} Known: {', '.join(known)}.")


def _entry_points() -> list[md.EntryPoint]:
    eps = md.entry_points(group=ENTRY_POINT_GROUP)
    return sorted(eps, key=lambda ep: (ep.dist.name if ep.dist else "", ep.name))


def plugin_manager(
    extra_plugins: Sequence[Any] = (), autoload: bool | None = None
) -> tuple[pluggy.PluginManager, dict[int, tuple[str, str, str]]]:
    """A pluggy manager with every `plm` entry point loaded (built-ins only when autoload is
    off), and where each plugin came from: id(module) -> (package, version, entry point)."""
    if autoload is None:
        autoload = os.environ.get("PLM_DISABLE_PLUGIN_AUTOLOAD", "") not in ("1", "true", "yes")
    pm = pluggy.PluginManager("plm")
    pm.add_hookspecs(hookspecs)
    origin: dict[int, tuple[str, str, str]] = {}
    for ep in _entry_points():
        dist_name = ep.dist.name if ep.dist else "?"
        if not autoload and dist_name != BUILTIN_DIST:
            continue
        try:
            module = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must name itself
            raise PluginError(f"plugin {ep.name!r} from package {dist_name!r} failed to load: {exc}") from exc
        if pm.is_registered(module):
            continue
        pm.register(module, name=f"{dist_name}:{ep.name}")
        origin[id(module)] = (dist_name, ep.dist.version if ep.dist else "", ep.name)
    for plugin in extra_plugins:
        pm.register(plugin)
        origin[id(plugin)] = ("<direct>", "", getattr(plugin, "__name__", repr(plugin)))
    return pm, origin


def build_registry(extra_plugins: Sequence[Any] = (), autoload: bool | None = None) -> Registry:
    """Load plugins from entry points (built-ins only when autoload is off) into a registry."""
    pm, origin = plugin_manager(extra_plugins, autoload)
    registry = Registry()
    for impl in pm.hook.plm_register_components.get_hookimpls():
        registry._current = origin.get(id(impl.plugin), ("?", "", impl.plugin_name))
        impl.function(registry=registry)
    registry._current = ("<direct>", "", "<direct>")
    return registry


def register_commands(app: Any) -> None:
    """Let every installed plugin add its commands to the `plm` CLI (`plm_register_commands`)."""
    pm, _ = plugin_manager()
    pm.hook.plm_register_commands(app=app)


@functools.cache
def default_registry() -> Registry:
    """Every installed plugin's components, loaded once per process."""
    return build_registry()
