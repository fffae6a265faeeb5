"""How a check reports: every broken rule of a stage in one run, not the first alone.

A check opens `checking(family)`, states each rule with `rules.expect(ok, rule, detail)`
(recorded, and the check goes on) or `rules.require(...)` (a rule the rest builds on: the
check stops there), and runs independent groups of rules in `rules.part(what)`, so a stage
that raises stops only that group. At the end one AssertionError names them all, each line
in the form `<family> contract (docs/contracts/<family>.md): <rule>` with its detail below.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# The families with a page under docs/contracts/ (a new family, e.g. a third party's, has none).
PAGES = frozenset(
    "chunkers converters embedders enrichers evaluators executors expanders fusers loaders query_generators "
    "rankers reporters rerankers retrieval retrievers stores tokenizers".split()
)


class _Stop(Exception):
    """A required rule is broken: the rules after it cannot be judged."""


class Rules:
    """The broken rules one check has found so far, in the order found."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.broken: list[str] = []
        self._more: dict[str, int] = {}  # rule -> how many more times it broke, after the first
        self.error: BaseException | None = None  # the first exception a stage raised

    def expect(self, ok: Any, rule: str, detail: str = "") -> bool:
        """Record `rule` as broken unless `ok`; True when it holds."""
        if not ok:
            if rule in self._more:  # a rule checked in a loop: named once, with its first detail
                self._more[rule] += 1
            else:
                self._more[rule] = 0
                self.broken.append(rule + (f"\n  {detail}" if detail else ""))
        return bool(ok)

    def require(self, ok: Any, rule: str, detail: str = "") -> None:
        """As `expect`, but the check stops here when the rule is broken."""
        if not self.expect(ok, rule, detail):
            raise _Stop

    @contextmanager
    def part(self, what: str) -> Iterator[None]:
        """A group of rules judged on its own: an exception from the stage ends the group
        (recorded as broken) and the check goes on with the next."""
        try:
            yield
        except _Stop:
            pass
        except Exception as err:  # noqa: BLE001 - a stage's error is a broken rule, reported with the rest
            self.error = self.error or err
            stopped = f"(stopped by {type(err).__name__}: {err})"
            first = next((line for line in self.broken if line.endswith(stopped)), None)
            if first is not None:  # the same error in another group (every query, say): named once
                self._more[first] += 1
            else:
                self._more[f"{what} {stopped}"] = 0
                self.broken.append(f"{what} {stopped}")

    def message(self) -> str:
        page = f"docs/contracts/{self.family}.md" if self.family in PAGES else "its base class's docstrings"
        more = {line: self._more.get(line.split("\n")[0], 0) for line in self.broken}
        text = "\n".join(
            f"{self.family} contract ({page}): {line}" + (f"\n  (and {more[line]} more like it)" if more[line] else "")
            for line in self.broken
        )
        if len(self.broken) > 1:
            text += f"\n({len(self.broken)} rules of the {self.family} contract broken)"
        return text


@contextmanager
def checking(family: str) -> Iterator[Rules]:
    """One check of one stage: raises AssertionError naming every rule found broken. An
    exception from the stage outside any part ends the check; alone, it propagates as it is
    (its traceback is the clearest report), with broken rules it joins them."""
    rules = Rules(family)
    try:
        yield rules
    except _Stop:
        pass
    except Exception as err:
        if not rules.broken:
            raise
        rules.error = rules.error or err
        rules.broken.append(f"the check stopped: {type(err).__name__}: {err}")
    if rules.broken:
        raise AssertionError(rules.message()) from rules.error
