"""`plm.testing.check_expander` and `check_stage` pass stages written from the contracts alone
and fail, naming the rule, for ones broken in one way."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import plm
import plm.testing


class Abbreviations(plm.QueryExpander):
    name = "kit_abbreviations"

    def run(self, data: plm.Query) -> plm.ExpandedQuery:
        query = plm.ExpandedQuery.of(data)
        more = [w for w in data.text.split() if w == "k8s"]
        return replace(query, text=" ".join([query.text, *("kubernetes" for _ in more)]), fired=tuple(more))


def test_an_expander_written_from_the_contract_passes() -> None:
    plm.testing.check_expander(Abbreviations())
    plm.testing.check_expander(plm.default_registry().get("none", "expanders").cls())


class DropsFilters(Abbreviations):
    name = "kit_drops_filters"

    def run(self, data: plm.Query) -> plm.ExpandedQuery:
        return replace(super().run(data), filters=None)


class OriginalIsExpanded(Abbreviations):
    name = "kit_original_is_expanded"

    def run(self, data: plm.Query) -> plm.ExpandedQuery:
        out = super().run(data)
        return replace(out, original=out.text + " ")


class ReturnsTheQuery(Abbreviations):
    name = "kit_returns_the_query"

    def run(self, data: plm.Query) -> plm.ExpandedQuery:
        return data  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (DropsFilters, r"the query's k, depth, filters, id and weights are kept"),
        (OriginalIsExpanded, r"`original` is the user's text"),
        (ReturnsTheQuery, r"run returns a plm.ExpandedQuery"),
    ],
)
def test_a_broken_expander_fails_naming_the_contract(broken: type[Abbreviations], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_expander(broken())
    assert str(err.value).startswith("expanders contract (docs/contracts/expanders.md)")


class Lower(plm.BaseComponent[plm.Query, plm.Query]):
    """A stage of a family of its own, as a third party's normalizer."""

    name = "kit_lower"
    family = "normalizers"
    input_type = plm.Query
    output_type = plm.Query

    def run(self, data: plm.Query) -> plm.Query:
        return replace(data, text=data.text.lower())


class Counter(Lower):
    name = "kit_counter"
    calls = 0

    def run(self, data: plm.Query) -> plm.Query:
        Counter.calls += 1
        return replace(data, text=f"{data.text} {Counter.calls}")


class Text(Lower):
    name = "kit_text"

    def run(self, data: plm.Query) -> Any:
        return data.text.lower()


def test_a_stage_of_another_family_is_checked_by_check_stage() -> None:
    queries = [plm.Query("How do I Restart a Pod"), plm.Query("k8s")]
    plm.testing.check_stage(Lower(), queries)
    with pytest.raises(AssertionError, match=r"^normalizers contract .*: the same input gives the same output"):
        plm.testing.check_stage(Counter(), queries)
    with pytest.raises(AssertionError, match=r"run returns a Query"):
        plm.testing.check_stage(Text(), queries)
