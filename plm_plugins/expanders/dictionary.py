"""Dictionary query expansion (the POC's rule, POC_SPEC section 4).

A trigger fires when it is a plain substring of the lowercased query; the words of every
fired expansion are unioned, words already among the query's lowercased whitespace
tokens are dropped, and the rest are appended in sorted order.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from plm import ComponentConfig, ConfigError, ExpandedQuery, Query, QueryExpander, hookimpl

if TYPE_CHECKING:
    from plm import Registry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_DICTIONARY = "poc_dictionary.toml"


def load_dictionary(path: Path | None = None) -> dict[str, str]:
    """Read a trigger -> expansion table from TOML or JSON (None: the POC table), in file order."""
    where = path if path is not None else f"{__package__}/{DEFAULT_DICTIONARY}"
    try:
        if path is None:
            text = resources.files(__package__).joinpath(DEFAULT_DICTIONARY).read_text(encoding="utf-8")
        else:
            text = path.read_text(encoding="utf-8")
        is_json = path is not None and path.suffix.lower() == ".json"
        data: Any = json.loads(text) if is_json else tomllib.loads(text)
    except (OSError, ValueError) as err:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise ConfigError(f"expansion dictionary {where}: cannot be read: {err}") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f'expansion dictionary {where}: expected a table of trigger = "words"')
    table: dict[str, str] = {}
    for trigger, words in data.items():
        if not isinstance(words, str):
            raise ConfigError(
                f"expansion dictionary {where}: trigger {trigger!r} maps to {words!r}; "
                "expected a string of space-separated words"
            )
        if not str(trigger).strip():
            raise ConfigError(f"expansion dictionary {where}: an empty trigger would fire on every query; remove it")
        if not words.split():
            raise ConfigError(f"expansion dictionary {where}: trigger {trigger!r} has no words to append")
        # Triggers are matched against the lowercased query, so an uppercase trigger
        # could never fire; lowercasing it here is what its author meant.
        table[str(trigger).lower()] = words
    return table


def expand(text: str, table: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """The POC's expansion: (expanded text, fired triggers in dictionary order)."""
    lowered = text.lower()
    # Plain substring match, no word boundaries: "purpose" fires "rpo" and "tokens"
    # fires "token". The POC behaved this way and its reported numbers depend on it.
    fired = tuple(trigger for trigger in table if trigger in lowered)
    if not fired:
        return text, ()
    existing = set(lowered.split())
    words: set[str] = set()
    for trigger in fired:
        words.update(table[trigger].split())
    # Compared case-sensitively against the *lowercased* query words, as the POC did:
    # "RPO" is appended even to a query containing "rpo". Sorted by code point, so
    # capitalised words come first.
    new_words = sorted(w for w in words if w not in existing)
    if not new_words:
        return text, fired
    return f"{text} {' '.join(new_words)}", fired


class DictionaryExpander(QueryExpander):
    """Appends related words to a query when a dictionary trigger occurs in it."""

    name = "dictionary"
    needs = ("config_dir",)
    config_dir: Path | None

    class Config(ComponentConfig):
        dictionary: str | None = None
        """A TOML or JSON file of trigger = "words"; None: the POC's table
        (plm_plugins/expanders/poc_dictionary.toml). A relative path is read from the
        job config's folder (else the working directory)."""
        mode: Literal["substring"] = "substring"
        """How a trigger matches: a plain substring of the lowercased query (the POC's rule)."""
        profile_if_fired: str = "expanded"
        """The fusion profile a query asks for when a trigger fired ("" = the default one)."""

    config: Config

    def check(self) -> None:
        """A missing or malformed dictionary fails at `plm config check`, not at the first query."""
        self.ensure_warm()

    def warm_up(self) -> None:
        self._table = load_dictionary(self._dictionary_path())

    def _dictionary_path(self) -> Path | None:
        if self.config.dictionary is None:
            return None
        path = Path(self.config.dictionary).expanduser()
        if not path.is_absolute() and self.config_dir is not None and (self.config_dir / path).exists():
            path = self.config_dir / path
        if not path.is_file():
            raise ConfigError(
                f"expander {self.label!r}: dictionary file not found: {path} "
                '(set `dictionary` to a TOML or JSON file of trigger = "words", or leave it out '
                "for the POC table)"
            )
        return path

    @property
    def table(self) -> Mapping[str, str]:
        self.ensure_warm()
        return self._table

    def run(self, data: Query) -> ExpandedQuery:
        text, fired = expand(data.text, self.table)
        alternatives: tuple[str, ...] = ()
        if isinstance(data, ExpandedQuery):  # chained expanders keep the user's text, all triggers, alternatives
            original, fired, profile = data.original or data.text, data.fired + fired, data.profile
            alternatives = data.alternatives
        else:
            original, profile = data.text, ""
        if fired and self.config.profile_if_fired:
            profile = self.config.profile_if_fired
        return ExpandedQuery(
            text=text,
            k=data.k,
            filters=data.filters,
            id=data.id,
            depth=data.depth,
            weights=data.weights,
            original=original,
            fired=fired,
            profile=profile,
            alternatives=alternatives,
        )


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(DictionaryExpander)
