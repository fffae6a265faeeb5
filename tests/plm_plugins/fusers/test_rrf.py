from __future__ import annotations

import pytest
from pydantic import ValidationError

from plm_core.errors import ConfigError
from plm_core.records import ExpandedQuery, FusionConfig, ScoredChunk
from plm_plugins.fusers.rrf import Profile, RRFFuser


def _ranking(source: str, ids: str) -> list[ScoredChunk]:
    return [ScoredChunk(chunk_id=c, score=1.0 / (r + 1), source=source, rank=r) for r, c in enumerate(ids.split())]


def _scores(fused: list[ScoredChunk]) -> list[tuple[str, float]]:
    return [(s.chunk_id, s.score) for s in fused]


def test_settings_default_and_expanded_profiles() -> None:
    fuser = RRFFuser()
    plain = fuser.settings_for(ExpandedQuery(text="q", k=5), n_chunks=7269)
    assert plain == FusionConfig(
        candidates=50, weights={"dense": 1.0, "bm25": 1.0}, profile="default", params={"k": 60}
    )
    # the dictionary expander names the "expanded" profile when a trigger fired
    fired = fuser.settings_for(ExpandedQuery(text="q", k=5, fired=("rpo",), profile="expanded"), n_chunks=7269)
    assert fired == FusionConfig(
        candidates=100, weights={"dense": 0.3, "bm25": 3.0}, profile="expanded", params={"k": 10}
    )
    # the profile is the one the expander names: fired triggers alone do not pick it
    assert fuser.settings_for(ExpandedQuery(text="q", k=5, fired=("rpo",)), n_chunks=7269) == plain
    # candidates never exceed the corpus
    assert fuser.settings_for(ExpandedQuery(text="q", k=5), n_chunks=12).candidates == 12
    # no expanded profile: always default
    expanded = ExpandedQuery(text="q", k=5, fired=("x",), profile="expanded")
    assert RRFFuser(expanded=None).settings_for(expanded, 100).profile == "default"


def test_default_profile_scores_by_hand() -> None:
    fuser = RRFFuser()
    settings = fuser.settings_for(ExpandedQuery(text="q", k=5), 100)
    fused = fuser.fuse({"bm25": _ranking("bm25", "b a d"), "dense": _ranking("dense", "a b c")}, settings)
    # a: dense rank 0 + bm25 rank 1; b: dense 1 + bm25 0 -> equal: a first (inserted first, dense first)
    assert _scores(fused) == [
        ("a", 1 / (60 + 0) + 1 / (60 + 1)),
        ("b", 1 / (60 + 1) + 1 / (60 + 0)),
        ("c", 1 / (60 + 2)),
        ("d", 1 / (60 + 2)),
    ]
    assert [s.rank for s in fused] == [0, 1, 2, 3] and {s.source for s in fused} == {"fused"}


def test_ties_keep_insertion_order_dense_first() -> None:
    fuser = RRFFuser()
    settings = fuser.settings_for(ExpandedQuery(text="q", k=5), 100)
    fused = fuser.fuse({"dense": _ranking("dense", "x y"), "bm25": _ranking("bm25", "p q")}, settings)
    # x and p tie at 1/60, y and q at 1/61: dense's chunk of each pair was inserted first.
    assert _scores(fused) == [("x", 1 / 60), ("p", 1 / 60), ("y", 1 / 61), ("q", 1 / 61)]
    # the configured order, not the mapping's, decides insertion
    fused = RRFFuser(order=["bm25", "dense"]).fuse(
        {"dense": _ranking("dense", "x y"), "bm25": _ranking("bm25", "p q")}, settings
    )
    assert [s.chunk_id for s in fused] == ["p", "x", "q", "y"]


def test_the_recommended_recipe_breaks_a_tie_toward_the_lexical_match() -> None:
    """Issue 45 item 16: a word found in one document only ranked it second in 2 of 4 tries:
    BM25's first hit and dense's first guess tie at 1/(k + 0), and dense was inserted first."""
    from pathlib import Path

    from plm_core.config import load_job
    from plm_index.plugins import build_registry

    recipe = Path(__file__).resolve().parents[3] / "configs" / "recommended.toml"
    spec = next(s for s in load_job(recipe, build_registry(autoload=False)).query if s.label == "query.retrieve")
    fuser = RRFFuser(spec.nested["fuser"].config)
    settings = fuser.settings_for(ExpandedQuery(text="zyzzyva", k=5), 100)
    fused = fuser.fuse({"dense": _ranking("dense", "guess other"), "bm25": _ranking("bm25", "word")}, settings)
    assert fused[0].score == fused[1].score and [s.chunk_id for s in fused[:2]] == ["word", "guess"]


def test_expanded_profile_weights_by_hand() -> None:
    fuser = RRFFuser()
    settings = fuser.settings_for(ExpandedQuery(text="q", k=5, fired=("rpo",), profile="expanded"), 100)
    fused = fuser.fuse({"dense": _ranking("dense", "a b c"), "bm25": _ranking("bm25", "c a")}, settings)
    assert _scores(fused) == [
        ("c", 0.3 / (10 + 2) + 3.0 / (10 + 0)),  # 0.325
        ("a", 0.3 / (10 + 0) + 3.0 / (10 + 1)),  # 0.3027...
        ("b", 0.3 / (10 + 1)),
    ]
    assert fused[0].score == pytest.approx(0.325)


def test_rank_base_one_is_textbook_rrf() -> None:
    fuser = RRFFuser(rank_base=1)
    settings = fuser.settings_for(ExpandedQuery(text="q", k=5), 100)
    fused = fuser.fuse({"dense": _ranking("dense", "a b"), "bm25": _ranking("bm25", "b")}, settings)
    assert _scores(fused) == [("b", 1 / (60 + 2) + 1 / (60 + 1)), ("a", 1 / (60 + 1))]


def test_missing_weight_and_bad_profile_are_errors() -> None:
    fuser = RRFFuser()
    settings = fuser.settings_for(ExpandedQuery(text="q", k=5), 100)
    with pytest.raises(ConfigError, match="sparse"):
        fuser.fuse({"sparse": _ranking("sparse", "a")}, settings)
    with pytest.raises(ValidationError):
        Profile(k=0)
    with pytest.raises(ValidationError):
        RRFFuser(unknown=1)


def test_single_source_and_empty() -> None:
    fuser = RRFFuser()
    settings = fuser.settings_for(ExpandedQuery(text="q", k=5), 100)
    assert _scores(fuser.fuse({"bm25": _ranking("bm25", "a")}, settings)) == [("a", 1 / 60)]
    assert fuser.fuse({}, settings) == []
    assert _scores(fuser.run({"dense": _ranking("dense", "a b")})) == [("a", 1 / 60), ("b", 1 / 61)]


def test_defaults_follow_the_retrievers_configured() -> None:
    fuser = RRFFuser()
    fuser.check_sources(["bm25", "mine"])  # what the hybrid stage does with its retrievers
    plain = fuser.settings_for(ExpandedQuery(text="q", k=5), 100)
    assert plain.weights == {"bm25": 1.0, "mine": 1.0}
    # the POC's expanded profile belongs to its dense + bm25 pair: other sources get default
    assert fuser.settings_for(ExpandedQuery(text="q", k=5, profile="expanded"), 100).profile == "default"
    # order: bm25 (of the usual pair) first, then the others in their table order
    fused = fuser.fuse({"mine": _ranking("mine", "x"), "bm25": _ranking("bm25", "p")}, plain)
    assert [s.chunk_id for s in fused] == ["p", "x"]
    # weights given must still name exactly the retrievers
    with pytest.raises(ConfigError, match="missing"):
        RRFFuser(default={"weights": {"bm25": 1.0}}).check_sources(["bm25", "mine"])


def test_a_profile_given_in_part_keeps_its_other_defaults() -> None:
    fuser = RRFFuser(expanded={"candidates_factor": 5})
    fuser.check_sources(["dense", "bm25"])
    expanded = fuser.settings_for(ExpandedQuery(text="q", k=5, profile="expanded"), 1000)
    # k 10 and the weights 0.3/3.0 stay the expanded profile's; only candidates changed
    assert expanded == FusionConfig(
        candidates=25, weights={"dense": 0.3, "bm25": 3.0}, profile="expanded", params={"k": 10}
    )


@pytest.mark.parametrize("config", [{}, {"rank_base": 1}, {"order": ["bm25", "dense"]}])
def test_rrf_keeps_the_fuser_contract(config: dict[str, object]) -> None:
    import plm.testing

    plm.testing.check_fuser(RRFFuser(**config))
    if "order" not in config:  # other retrievers than the POC's pair (no expanded profile)
        plm.testing.check_fuser(RRFFuser(**config), sources=("bm25", "splade"))
