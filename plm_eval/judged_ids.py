"""Whether the judgments can meet the index at all: qrels name documents by id, and an id rule
that does not match them (`184.html` in the index, `184` in the qrels) scores every metric
0.000 without a word. Checked once per run, before any query is asked."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable

from plm_core.errors import PlmUserError

ENOUGH = 0.9  # under this share of the judged documents in the index, the run says so

# An id rule the folder loader offers -> what it makes of an id it gave under the default.
_RULES: dict[str, Callable[[str], str]] = {
    "stem": lambda i: posixpath.splitext(posixpath.basename(i))[0],
}


def judged_coverage(judged: Iterable[str], indexed: Iterable[str]) -> str | None:
    """None when at least 90% of the judged documents are indexed; else the line that says how
    many are and which id rule would match. Raises when none is: no result could count."""
    wanted, have = set(judged), set(indexed)
    if not wanted:
        return None
    found = len(wanted & have)
    if found >= ENOUGH * len(wanted):
        return None
    example = sorted(wanted - have)[0]
    line = (
        f"only {found} of the {len(wanted)} judged documents are in the index (a qrels id such as "
        f"{example!r} names no indexed document)"
    )
    hint = next(
        (
            f"; their ids match the indexed documents' under ids = {rule!r}: pass --set index.load.ids={rule}"
            for rule, make in _RULES.items()
            if len(wanted & {make(i) for i in have}) >= ENOUGH * len(wanted)
        ),
        "; check the qrels against the loader's ids (`plm query --json` shows them)",
    )
    if not found:
        raise PlmUserError(line + ", so no result can match a judgment" + hint)
    return line + hint
