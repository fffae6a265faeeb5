"""Plugin loading: every `plm` entry point installed (built-ins through plm's own
`[project.entry-points.plm]` table, exactly like a third party's, so nothing names a plugin
in code) loaded into a pluggy manager, and its `plm_register_components` hooks called into a
`Registry`. A third-party plugin that fails to import or to register, registers nothing, or
sits in the wrong entry-point group is left out with one warning on stderr, naming it."""

from __future__ import annotations

import difflib
import functools
import importlib.metadata as md
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pluggy

from plm_core import hookspecs
from plm_core.errors import PluginError
from plm_core.registry import BUILTIN_DIST, DIRECT, Clash, Failure, Registry

ENTRY_POINT_GROUP = "plm"
AUTOLOAD_ENV = "PLM_DISABLE_PLUGIN_AUTOLOAD"
FAILED_PLUGINS: list[Failure] = []  # each said once per process
_CLASHES_SAID: set[Clash] = set()


def _entry_points() -> list[tuple[md.EntryPoint, str, str]]:
    """The `plm` group's entry points, each with its package's name and version, sorted. A
    package's metadata is parsed once here (`ep.dist.name` parses it on every access: 165
    times, a third of a second, for `plm --help`)."""
    every = md.entry_points()
    known: dict[int, tuple[str, str]] = {}

    def package(ep: md.EntryPoint) -> tuple[str, str]:
        if ep.dist is None:
            return "?", ""
        if id(ep.dist) not in known:
            meta = ep.dist.metadata
            known[id(ep.dist)] = (meta["Name"] or "?", meta["Version"] or "")
        return known[id(ep.dist)]

    for group in sorted(g for g in every.groups if g != ENTRY_POINT_GROUP and g.split(".")[0] == ENTRY_POINT_GROUP):
        # `[project.entry-points."plm.chunkers"]`: plm reads one group, whatever the family
        for ep in every.select(group=group):
            entry = f"entry point {ep.name!r} of package {package(ep)[0]!r} is in the group {group!r}"
            warn_once(
                Failure(entry),
                ", which plm does not read: put it under [project.entry-points.plm] "
                "(one group for every family; the family is the class's base) and reinstall the package",
            )
    eps = [(ep, *package(ep)) for ep in every.select(group=ENTRY_POINT_GROUP)]
    return sorted(eps, key=lambda e: (e[1] if e[0].dist else "", e[0].name))


def plugin_manager(
    extra_plugins: Sequence[Any] = (), autoload: bool | None = None
) -> tuple[pluggy.PluginManager, dict[int, tuple[str, str, str]]]:
    """A pluggy manager with every `plm` entry point loaded (built-ins only when autoload is
    off), and where each plugin came from: id(module) -> (package, version, entry point)."""
    if autoload is None:
        autoload = os.environ.get(AUTOLOAD_ENV, "") not in ("1", "true", "yes")
    pm = pluggy.PluginManager("plm")
    pm.add_hookspecs(hookspecs)
    origin: dict[int, tuple[str, str, str]] = {}
    for ep, dist_name, dist_version in _entry_points():
        if not autoload and dist_name != BUILTIN_DIST:
            continue
        try:
            module = ep.load()
            if pm.is_registered(module):
                continue
            pm.register(module, name=f"{dist_name}:{ep.name}")
        except Exception as exc:  # noqa: BLE001 - a broken plugin must name itself
            shadow = shadowed_package_note()
            if dist_name == BUILTIN_DIST:  # plm's own stages: a bug (or a shadowed `plm`), never skipped
                raise PluginError(
                    f"plugin {ep.name!r} from package {dist_name!r} failed to load: {exc}{shadow}"
                ) from exc
            skip_broken_plugin(f"plugin {ep.name!r} ({ep.value}) from package {dist_name!r}", exc, shadow, ep.name)
            continue
        origin[id(module)] = (dist_name, dist_version, ep.name)
    for plugin in extra_plugins:
        pm.register(plugin)
        origin[id(plugin)] = ("<direct>", "", getattr(plugin, "__name__", repr(plugin)))
    return pm, origin


def shadowed_package_note(name: str = "plm") -> str:
    """ "; a folder named plm in DIR shadows the installed package: ..." when `import plm`
    finds a folder other than plm's own (a `plm/` without `__init__.py` in the working
    directory becomes a namespace package ahead of an editable install; one with it is
    another package), else "". Plugins `import plm`, so that is where it shows first."""
    own = Path(__file__).resolve().parents[1] / name  # plm_index's sibling in the same distribution
    module = sys.modules.get(name)
    origin, locations = getattr(module, "__file__", None), list(getattr(module, "__path__", None) or [])
    if module is None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin, locations = (spec.origin, list(spec.submodule_search_locations or [])) if spec else (None, [])
    found = Path(origin).parent if origin and origin not in ("namespace", "built-in") else None
    if found is None and locations:
        found = Path(locations[0])
    if found is None or found.resolve() == own:
        return ""
    where = found.parent
    cwd = " (the working directory)" if where.resolve() == Path.cwd().resolve() else ""
    return (
        f"; a folder named {name} in {where}{cwd} shadows the installed package ({own}): "
        "run plm from another directory, or rename that folder"
    )


def skip_broken_plugin(what: str, exc: BaseException, note: str = "", plugin: str | None = None) -> None:
    """Say once on stderr that a third-party plugin is left out, why, and how to run without
    any: one broken package must not stop every command (`--help` and `--version` included)."""
    warn_once(
        Failure(f"{what}: {type(exc).__name__}: {exc}{note}", plugin),
        "; skipped (its stages and commands are missing). Fix or uninstall that package, "
        f"or set {AUTOLOAD_ENV}=1 to load plm's built-in plugins only.",
    )


def warn_once(failure: Failure, rest: str) -> None:
    """`warning: <what><rest>` on stderr, once a process; the failure joins FAILED_PLUGINS,
    which an unknown stage's error lists as not loaded."""
    if failure in FAILED_PLUGINS:
        return
    FAILED_PLUGINS.append(failure)
    print(f"warning: {failure.what}{rest}", file=sys.stderr)


def call_each(
    pm: pluggy.PluginManager,
    hook: str,
    origin: dict[int, tuple[str, str, str]],
    before: Callable[[Any], Callable[[], None]],
    **kwargs: Any,
) -> None:
    """Call one hook's implementations one by one, in pluggy's order (tryfirst first), each
    with the arguments it names, so a third-party implementation that raises is skipped with
    a warning, and what it added before it raised is taken out again (`before(impl)` returns
    the function that does so); plm's own raise."""
    for impl in reversed(getattr(pm.hook, hook).get_hookimpls()):
        package, _, plugin = origin.get(id(impl.plugin), ("?", "", impl.plugin_name))
        undo = before(impl)
        try:
            impl.function(**{name: kwargs[name] for name in impl.argnames})
        except Exception as exc:  # noqa: BLE001 - a broken plugin must name itself
            if package in (BUILTIN_DIST, "<direct>"):
                raise
            undo()
            skip_broken_plugin(f"plugin {plugin!r} from package {package!r} ({hook})", exc, plugin=plugin)


def build_registry(extra_plugins: Sequence[Any] = (), autoload: bool | None = None) -> Registry:
    """Load plugins from entry points (built-ins only when autoload is off) into a registry."""
    pm, origin = plugin_manager(extra_plugins, autoload)
    registry = Registry(failed=FAILED_PLUGINS)

    def attribute(impl: Any) -> Callable[[], None]:  # what registry.add records as the package
        registry.attribute_to(origin.get(id(impl.plugin), ("?", "", impl.plugin_name)))
        return registry.undo_to()

    call_each(pm, "plm_register_components", origin, attribute, registry=registry)
    registry.attribute_to(DIRECT)
    # A clash is said only now: a plugin whose hook raised after it is left out, clash and all.
    for clash in registry.clashes():
        if clash not in _CLASHES_SAID:
            _CLASHES_SAID.add(clash)
            print(f"warning: {clash}; a config naming it stops with this error", file=sys.stderr)
    note_silent_plugins(pm, origin)
    return registry


HOOKS = ("plm_register_components", "plm_register_commands")


def note_silent_plugins(pm: pluggy.PluginManager, origin: dict[int, tuple[str, str, str]]) -> None:
    """Warn about a third-party entry point whose module implements no plm hook (none, or one
    misspelled): it loads without error and adds nothing, and its stages are then unknown."""
    for module in pm.get_plugins():
        package, _, plugin = origin.get(id(module), (BUILTIN_DIST, "", ""))
        if package in (BUILTIN_DIST, "<direct>"):
            continue
        hooks = sorted({caller.name for caller in pm.get_hookcallers(module) or ()})
        if set(hooks) & set(HOOKS):
            continue
        close = [h for h in hooks if difflib.get_close_matches(h, HOOKS, n=1)]
        found = f"; it has {close[0]!r}: a misspelling?" if close else ""
        bare = [h for h in HOOKS if callable(getattr(module, h, None))]
        if bare:  # the function is there, without the decorator pluggy looks for
            found = f"; it has `def {bare[0]}` without `@plm.hookimpl` above it"
        entry = f"plugin {plugin!r} from package {package!r} registers nothing"
        warn_once(
            Failure(entry, plugin), f": its module has no `@plm.hookimpl def plm_register_components(registry)`{found}"
        )


@functools.cache
def default_registry() -> Registry:
    """Every installed plugin's components, loaded once per process."""
    return build_registry()
