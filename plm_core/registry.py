"""The component registry: names -> component classes, unique per family, each with the
package that registered it. Plugins fill it through the `plm_register_components` hook
(`plm_core.hookspecs`); the runtime loads every installed plugin into it
(`plm_index.plugins`), built-ins through the same entry points a third party's use."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from plm_core.errors import PluginError

BUILTIN_DIST = "plm"
DIRECT = ("<direct>", "", "<direct>")  # (package, version, entry point) of a class added by hand
FIX_CLASH = "uninstall one of them or rename the component"


@dataclass(frozen=True)
class Failure:
    """A third-party plugin left out, said once a process: `what` says which and why, `plugin`
    is its entry point's name (None: not one plugin's)."""

    what: str
    plugin: str | None = None


@dataclass(frozen=True)
class Clash:
    """A name two packages registered in one family: a config naming it stops with `str(clash)`."""

    family: str
    name: str
    first: tuple[str, str]  # (package, entry point) of each registration
    second: tuple[str, str]

    def __str__(self) -> str:
        by = " and by ".join(f"package {package!r} (plugin {plugin})" for package, plugin in (self.first, self.second))
        return f"duplicate {self.family} name {self.name!r}: registered by {by}; {FIX_CLASH}"


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

    def __init__(self, failed: Sequence[Failure] = ()) -> None:
        self._failed = failed  # plugins left out (the loader's list): an unknown name's error names them
        self._items: dict[tuple[str, str], Registration] = {}
        self._clashes: dict[tuple[str, str], Clash] = {}  # (family, name) -> two packages registered it
        self._current: tuple[str, str, str] = DIRECT
        self._job_settings: list[type] = []  # pydantic models of keys packages add to [job]

    def attribute_to(self, origin: tuple[str, str, str]) -> None:
        """What `add` registers from now on comes from (package, version, entry point)."""
        self._current = origin

    def add(self, cls: type, name: str | None = None, family: str | None = None) -> None:
        """Register `cls` as `name` (default: cls.name) in its family, which is its base
        class's (`cls.family`): listed where the slots that take that base look. `family`, if
        given, must say the same."""
        name = str(name or getattr(cls, "name", None) or cls.__name__)
        own = str(getattr(cls, "family", "stage"))
        if family is not None and family != own:
            raise PluginError(
                f"{name!r}: registered as family {family!r}, but {cls.__name__} is a {own!r} component; "
                "a family is its base class: leave `family` out"
            )
        family = own
        package, version, plugin = self._current
        key = (family, name)
        if key in self._items:
            other = self._items[key]
            clash = Clash(family, name, (other.package, other.plugin), (package, plugin))
            if {other.package, package} <= {BUILTIN_DIST, "<direct>"}:
                raise PluginError(str(clash))
            # A third party's clash stops only the configs that name it: every other command runs.
            self._clashes.setdefault(key, clash)  # the loader says it once every plugin registered
            return
        self._items[key] = Registration(name, family, cls, package, version, plugin)

    def add_job_settings(self, model: type) -> None:
        """Let the `[job]` table hold `model`'s fields (a pydantic model: plm_eval's dataset,
        query sets and evaluator); a key no installed package declares stays an error."""
        if model not in self._job_settings:
            self._job_settings.append(model)

    def job_settings(self) -> tuple[type, ...]:
        return tuple(self._job_settings)

    def clashes(self) -> list[Clash]:
        """Each name two third-party packages registered (the loader warns of each once)."""
        return list(self._clashes.values())

    def undo_to(self) -> Callable[[], None]:
        """A function that puts the registry back as it is now: a plugin whose hook raises
        after adding some of its stages is left out whole, as its warning says."""
        items, clashes, settings = dict(self._items), dict(self._clashes), list(self._job_settings)

        def undo() -> None:
            self._items, self._clashes, self._job_settings = items, clashes, settings

        return undo

    def all(self) -> list[Registration]:
        return sorted(self._items.values(), key=lambda r: (r.family, r.name))

    def names(self, family: str | None = None) -> list[str]:
        return sorted(r.name for r in self._items.values() if family in (None, r.family))

    def names_of(self, base: type) -> list[str]:
        """The names of the components a slot taking `base` accepts (its subclasses)."""
        return sorted(r.name for r in self._items.values() if isinstance(r.cls, type) and issubclass(r.cls, base))

    def get(self, name: str, family: str | None = None, *, where: str = "", among: type | None = None) -> Registration:
        """Find a registration by name (optionally 'family:name'); unknown names get hints,
        from the components of the class `among` when the slot takes only those."""
        qualified = ":" in name and family is None
        if qualified:
            family, name = name.split(":", 1)
        found = [r for r in self._items.values() if r.name == name and family in (None, r.family)]
        if qualified and not found:
            # `family:name` only tells same-named stages apart, so a unique name still resolves
            # under a family label written before a family was its base class (keywords:yake).
            anywhere = [r for r in self._items.values() if r.name == name]
            found = anywhere if len(anywhere) == 1 else []
        loc = f"{where}: " if where else ""
        if len(found) == 1:
            clash = self._clashes.get((found[0].family, found[0].name))
            if clash is not None:
                raise PluginError(f"{loc}{clash}")
            return found[0]
        if not found:  # a plugin of that very name failed to load: that is the reason, not a typo
            failed = [f.what for f in self._failed if f.plugin == name]
            if failed:
                raise PluginError(f"{loc}{name!r} is not available: {failed[0]}")
        if len(found) > 1:
            fams = ", ".join(f"{r.family}:{r.name}" for r in found)
            raise PluginError(f"{loc}{name!r} is ambiguous; write one of {fams}")
        known = self.names(family)
        if among is not None:
            known = self.names_of(among)
            family = family or str(getattr(among, "family", among.__name__))
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        fam = f"{family} " if family else ""
        broken = f" Not loaded: {'; '.join(f.what for f in self._failed)}." if self._failed else ""
        raise PluginError(f"{loc}unknown {fam}component {name!r}.{hint} Known: {', '.join(known)}.{broken}")
