"""Per-query fusion weights (`Query.weights`): they replace the profile's weights of the
sources they name, for one query, in every profiled fuser; bad ones are user errors."""

from __future__ import annotations

import math

import pytest

from plm_core.errors import PlmUserError
from plm_core.records import ExpandedQuery, Query, ScoredChunk
from plm_index.cli_values import parse_weight_args
from plm_index.search import check_weights
from plm_plugins.fusers.linear import LinearFuser
from plm_plugins.fusers.rrf import RRFFuser


def _ranking(source: str, ids: str) -> list[ScoredChunk]:
    return [ScoredChunk(chunk_id=c, score=1.0 / (r + 1), source=source, rank=r) for r, c in enumerate(ids.split())]


RANKINGS = {"dense": _ranking("dense", "a b c"), "bm25": _ranking("bm25", "c b a")}


@pytest.mark.parametrize("fuser", [RRFFuser(), LinearFuser()], ids=["rrf", "linear"])
def test_query_weights_replace_the_profiles_for_that_query(fuser: RRFFuser | LinearFuser) -> None:
    plain = fuser.settings_for(ExpandedQuery(text="q", k=3), 100)
    leaning = fuser.settings_for(ExpandedQuery(text="q", k=3, weights={"bm25": 5.0}), 100)
    assert leaning.weights == {**plain.weights, "bm25": 5.0} and leaning.candidates == plain.candidates
    # dense = 0 leaves bm25's order; bm25 = 0 leaves dense's
    only_bm25 = fuser.settings_for(ExpandedQuery(text="q", k=3, weights={"dense": 0, "bm25": 1}), 100)
    only_dense = fuser.settings_for(ExpandedQuery(text="q", k=3, weights={"dense": 1, "bm25": 0}), 100)
    assert [s.chunk_id for s in fuser.fuse(RANKINGS, only_bm25)] == ["c", "b", "a"]
    assert [s.chunk_id for s in fuser.fuse(RANKINGS, only_dense)] == ["a", "b", "c"]
    # the next query without weights gets the profile's again
    assert fuser.settings_for(ExpandedQuery(text="q", k=3), 100) == plain


def test_query_weights_apply_to_the_expanded_profile_too() -> None:
    query = ExpandedQuery(text="q", k=3, profile="expanded", fired=("x",), weights={"dense": 2.0})
    settings = RRFFuser().settings_for(query, 100)
    assert settings.profile == "expanded" and settings.weights == {"dense": 2.0, "bm25": 3.0}


def test_unknown_source_is_a_user_error_naming_the_sources() -> None:
    with pytest.raises(
        PlmUserError, match=r"no retriever named 'keyword' to weigh: this recipe's retrievers are dense, bm25"
    ):
        RRFFuser().settings_for(ExpandedQuery(text="q", k=3, weights={"keyword": 1.0}), 100)


def test_expanded_query_keeps_the_weights_of_the_query() -> None:
    assert ExpandedQuery.of(Query(text="q", weights={"bm25": 2.0})).weights == {"bm25": 2.0}


@pytest.mark.parametrize("bad", [{}, {"dense": -1}, {"dense": math.nan}, {"dense": math.inf}, {"dense": True}, [1]])
def test_bad_weights_are_refused(bad: object) -> None:
    with pytest.raises(PlmUserError):
        check_weights(bad)


def test_cli_weight_arguments() -> None:
    assert parse_weight_args(["dense=0.3", "bm25=2"]) == {"dense": 0.3, "bm25": 2.0}
    for bad in ["dense", "dense=", "=1", "dense=-1", "dense=x", "dense=true"]:
        with pytest.raises(PlmUserError, match="--weight"):
            parse_weight_args([bad])
