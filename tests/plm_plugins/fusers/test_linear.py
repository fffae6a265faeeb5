"""Weighted linear fusion of normalised scores: every expected score below is worked out by
hand (in the comments) from the rankings, never by calling the code under test."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from plm_toys import bag_of_words
from pydantic import ValidationError

from plm_core.config import load_job
from plm_core.errors import ConfigError
from plm_core.records import Chunk, Document, ExpandedQuery, FusionConfig, ScoredChunk
from plm_core.registry import Registry
from plm_core.settings import Settings
from plm_index.job import Job
from plm_plugins.fusers.linear import LinearFuser, Profile


def _ranking(source: str, pairs: str) -> list[ScoredChunk]:
    """ "a:0.9 b:0.5" -> ScoredChunks best first."""
    found = [(cid, float(score)) for cid, score in (p.split(":") for p in pairs.split())]
    return [ScoredChunk(chunk_id=c, score=s, source=source, rank=r) for r, (c, s) in enumerate(found)]


def _fuse(fuser: LinearFuser, rankings: dict[str, list[ScoredChunk]], profile: str = "") -> list[tuple[str, float]]:
    settings = fuser.settings_for(ExpandedQuery(text="q", k=5, profile=profile), 100)
    fused = fuser.fuse(rankings, settings)
    assert [s.rank for s in fused] == list(range(len(fused))) and {s.source for s in fused} <= {"fused"}
    return [(s.chunk_id, s.score) for s in fused]


def _approx(expected: list[tuple[str, float]]) -> list[tuple[str, Any]]:
    return [(cid, pytest.approx(score, rel=1e-12, abs=1e-15)) for cid, score in expected]


# dense: a 0.9, b 0.5, c 0.1; bm25: b 12, d 6, a 3. c is missing from bm25, d from dense.
DENSE, BM25 = "a:0.9 b:0.5 c:0.1", "b:12 d:6 a:3"


def _two() -> dict[str, list[ScoredChunk]]:
    return {"dense": _ranking("dense", DENSE), "bm25": _ranking("bm25", BM25)}


def test_minmax_by_hand() -> None:
    # dense: min 0.1, max 0.9 -> a 1, b 0.5, c 0; bm25: min 3, max 12 -> b 1, d 3/9, a 0.
    fused = _fuse(LinearFuser(default={"normalization": "minmax"}), _two())
    assert fused == _approx([("b", 0.5 + 1), ("a", 1 + 0), ("d", 1 / 3), ("c", 0.0)])


def test_zscore_by_hand() -> None:
    # dense: mean 0.5, population variance (0.16 + 0 + 0.16) / 3, std = 0.4 / sqrt(1.5):
    #   a +sqrt(1.5), b 0, c -sqrt(1.5).
    # bm25: mean 7, deviations 5, -1, -4, population variance 42 / 3 = 14: b 5/sqrt(14),
    #   d -1/sqrt(14), a -4/sqrt(14). Missing counts 0, which beats a negative z.
    fused = _fuse(LinearFuser(default={"normalization": "zscore"}), _two())
    r15, r14 = math.sqrt(1.5), math.sqrt(14)
    assert fused == _approx([("b", 0 + 5 / r14), ("a", r15 - 4 / r14), ("d", -1 / r14), ("c", -r15)])
    assert fused[1][1] == pytest.approx(0.155700, abs=1e-6)


def test_dbsf_by_hand() -> None:
    # Qdrant's DBSF: limits mean -/+ 3 x sample std, then min-max between them.
    # dense: mean 0.5, sample variance 0.32 / 2 = 0.16, std 0.4: limits -0.7 and 1.7 (range
    #   2.4): a 1.6/2.4 = 2/3, b 1.2/2.4 = 1/2, c 0.8/2.4 = 1/3.
    # bm25: mean 7, sample variance 42 / 2 = 21: limits 7 -/+ 3 sqrt(21), range 6 sqrt(21):
    #   b 1/2 + 5/(6 sqrt 21), d 1/2 - 1/(6 sqrt 21), a 1/2 - 4/(6 sqrt 21).
    fused = _fuse(LinearFuser(default={"normalization": "dbsf"}), _two())
    u = 1 / (6 * math.sqrt(21))
    assert fused == _approx([("b", 0.5 + 0.5 + 5 * u), ("a", 2 / 3 + 0.5 - 4 * u), ("d", 0.5 - u), ("c", 1 / 3)])
    assert [round(s, 5) for _, s in fused] == [1.18185, 1.02119, 0.46363, 0.33333]


def test_dbsf_clips_scores_beyond_three_sigma() -> None:
    # One 1.0 and fifteen 0.0 (n = 16): mean 1/16, sample variance ((15/16)^2 + 15 x (1/16)^2) / 15 = 1/16,
    # std 1/4: limits 1/16 -/+ 3/4 = -11/16 .. 13/16, range 24/16. 1.0 -> 27/24, clipped to 1;
    # each 0.0 -> (11/16) / (24/16) = 11/24.
    pairs = "top:1 " + " ".join(f"z{i:02d}:0" for i in range(15))
    fused = _fuse(
        LinearFuser(default={"normalization": "dbsf", "weights": {"bm25": 1.0}}, order=["bm25"]),
        {"bm25": _ranking("bm25", pairs)},
    )
    assert fused[0] == ("top", 1.0)
    assert fused[1:] == _approx([(f"z{i:02d}", 11 / 24) for i in range(15)])


@pytest.mark.parametrize(("method", "value"), [("minmax", 1.0), ("zscore", 0.0), ("dbsf", 0.5)])
def test_no_spread_gets_the_documented_value(method: str, value: float) -> None:
    # one candidate in dense, two equal ones in bm25: nothing to divide by
    fuser = LinearFuser(default={"normalization": method, "weights": {"dense": 2.0, "bm25": 1.0}})
    fused = _fuse(fuser, {"dense": _ranking("dense", "a:0.7"), "bm25": _ranking("bm25", "b:4 a:4")})
    assert fused == _approx([("a", 2 * value + value), ("b", value)])


def test_weights_scale_each_source_and_ties_keep_insertion_order() -> None:
    # minmax as in test_minmax_by_hand; dense weight 2: a = 2 x 1 + 0 = 2, b = 2 x 0.5 + 1 = 2,
    # a tie: a was inserted first (dense goes first), so a leads.
    fuser = LinearFuser(default={"weights": {"dense": 2.0, "bm25": 1.0}})
    assert _fuse(fuser, _two()) == _approx([("a", 2.0), ("b", 2.0), ("d", 1 / 3), ("c", 0.0)])
    # the configured order, not the mapping's, decides insertion: bm25 first puts b first
    fuser = LinearFuser(order=["bm25", "dense"], default={"weights": {"dense": 2.0, "bm25": 1.0}})
    assert _fuse(fuser, _two()) == _approx([("b", 2.0), ("a", 2.0), ("d", 1 / 3), ("c", 0.0)])
    # a weight of 0 silences a source but keeps its chunks (score 0 from it)
    fuser = LinearFuser(default={"weights": {"dense": 0.0, "bm25": 1.0}})
    assert _fuse(fuser, _two()) == _approx([("b", 1.0), ("d", 1 / 3), ("a", 0.0), ("c", 0.0)])


def test_missing_sources_count_zero_and_single_source() -> None:
    # d is only in bm25, c only in dense: each gets its one source's value (plus 0)
    fused = dict(_fuse(LinearFuser(), _two()))
    assert (fused["d"], fused["c"]) == (pytest.approx(1 / 3), 0.0)
    one = _fuse(LinearFuser(), {"bm25": _ranking("bm25", "x:3 y:2 z:1")})
    assert one == _approx([("x", 1.0), ("y", 0.5), ("z", 0.0)])
    assert _fuse(LinearFuser(), {}) == []
    assert _fuse(LinearFuser(), {"dense": [], "bm25": []}) == []


def test_profiles_default_expanded_and_named() -> None:
    fuser = LinearFuser(
        default={"normalization": "minmax"},
        expanded={"normalization": "dbsf", "weights": {"dense": 0.3, "bm25": 3.0}, "candidates_factor": 20},
        profiles={
            "keyword": {"normalization": "zscore", "weights": {"dense": 0.0, "bm25": 1.0}, "candidates_factor": 2}
        },
    )
    query = ExpandedQuery(text="q", k=5)
    assert fuser.settings_for(query, 7269) == FusionConfig(
        candidates=50, weights={"dense": 1.0, "bm25": 1.0}, profile="default", params={"normalization": "minmax"}
    )
    expanded = ExpandedQuery(text="q", k=5, fired=("rpo",), profile="expanded")
    assert fuser.settings_for(expanded, 7269) == FusionConfig(
        candidates=100, weights={"dense": 0.3, "bm25": 3.0}, profile="expanded", params={"normalization": "dbsf"}
    )
    keyword = fuser.settings_for(ExpandedQuery(text="q", k=5, profile="keyword"), 7269)
    assert (keyword.profile, keyword.candidates, keyword.params) == ("keyword", 10, {"normalization": "zscore"})
    # an unknown profile gets default; candidates never exceed the corpus
    assert fuser.settings_for(ExpandedQuery(text="q", k=5, profile="nope"), 7269).profile == "default"
    assert fuser.settings_for(query, 12).candidates == 12
    # the profile's normalisation is the one used: dbsf with weights 0.3 / 3.0 (see test_dbsf_by_hand)
    u = 1 / (6 * math.sqrt(21))
    assert _fuse(fuser, _two(), "expanded")[0] == ("b", pytest.approx(0.3 * 0.5 + 3.0 * (0.5 + 5 * u)))
    # expanded is unset by default: an expanded query gets default
    assert LinearFuser().settings_for(expanded, 100).profile == "default"


def test_bad_weights_and_settings_are_errors() -> None:
    with pytest.raises(ConfigError, match=r"profile 'default'.*missing \['bm25'\]"):
        LinearFuser(default={"weights": {"dense": 1.0}}).check_sources(["dense", "bm25"])
    with pytest.raises(ConfigError, match=r"profile 'keyword'.*unknown \['sparse'\]"):
        LinearFuser(profiles={"keyword": {"weights": {"dense": 1.0, "bm25": 1.0, "sparse": 1.0}}}).check_sources(
            ["dense", "bm25"]
        )
    with pytest.raises(ConfigError, match=r"`order` names \['vec'\]"):
        LinearFuser(order=["vec"]).check_sources(["dense", "bm25"])
    LinearFuser().check_sources(["dense", "bm25"])  # the defaults fit the usual pair
    fuser = LinearFuser()
    with pytest.raises(ConfigError, match="sparse"):
        fuser.fuse({"sparse": _ranking("sparse", "a:1")}, fuser.settings_for(ExpandedQuery(text="q"), 10))
    for bad in ({"weights": {"dense": -1.0}}, {"normalization": "l2"}, {"candidates_factor": 0}):
        with pytest.raises(ValidationError):
            Profile(**bad)
    with pytest.raises(ValidationError):
        LinearFuser(alpha=0.5)


# ----------------------------------------------------------- end to end, a real Job
VOCAB = ["pod", "node", "backup", "restore", "token", "cluster"]


BagOfWordsEmbedder = bag_of_words(VOCAB)


CONFIG = """
[job]
name = "linear-test"
[store]
use = "sqlite"
[embedder]
use = "bag_of_words"
[query.expand]
use = "dictionary"
[query.embed]
use = "embed_query"
[query.retrieve]
use = "hybrid"
[query.retrieve.retrievers.dense]
use = "dense"
[query.retrieve.retrievers.bm25]
use = "bm25s"
tokenizer = "whitespace_lower"
method = "rank_bm25_okapi"  # the POC scoring: zero-score candidates kept
[query.retrieve.fuser]
use = "linear"
[query.retrieve.fuser.default]
normalization = "minmax"
weights = { dense = 1.0, bm25 = 2.0 }
[query.retrieve.fuser.expanded]
normalization = "dbsf"
weights = { dense = 0.3, bm25 = 3.0 }
"""

DOCS = {
    "a": "pod pod node scheduling",
    "b": "backup restore of the cluster",
    "c": "token rotation for the cluster",
    "d": "pod restore after node failure",
    "e": "unrelated words only",
}


@pytest.fixture()
def job(tmp_path: Path) -> Job:
    pytest.importorskip("bm25s")
    from plm_plugins.expanders.dictionary import DictionaryExpander
    from plm_plugins.expanders.embed_query import QueryEmbedder
    from plm_plugins.retrieval.hybrid import HybridRetrieval
    from plm_plugins.retrievers.bm25s import BM25Retriever
    from plm_plugins.retrievers.dense import DenseRetriever
    from plm_plugins.stores.sqlite import SQLiteStore
    from plm_plugins.tokenizers.whitespace_lower import WhitespaceLowerTokenizer

    registry = Registry()
    for cls in (
        SQLiteStore,
        BagOfWordsEmbedder,
        DictionaryExpander,
        QueryEmbedder,
        HybridRetrieval,
        DenseRetriever,
        BM25Retriever,
        WhitespaceLowerTokenizer,
        LinearFuser,
    ):
        registry.add(cls)
    path = tmp_path / "job.toml"
    path.write_text(CONFIG)
    job = Job(load_job(path, registry), tmp_path / "index", Settings(progress=False), registry)
    job.open()
    chunks = [Chunk(id=f"{d}_0", doc_id=d, text=t) for d, t in DOCS.items()]
    assert job.embedder is not None
    matrix = job.embedder.embed([c.index_text for c in chunks])
    job.store.replace_documents([Document(id=d, text=t) for d, t in DOCS.items()], chunks, matrix, "bag-of-words")
    job.rebuild_indexes()
    return job


def _by_hand(hits: Sequence[Any], weights: dict[str, float], method: str) -> dict[str, float]:
    """Each hit's fused score from the raw per-source scores the hits carry (k = corpus size,
    so every candidate of every source is among them)."""
    fused = {h.chunk_id: 0.0 for h in hits}
    for source, weight in weights.items():
        raw = {h.chunk_id: h.sources[source]["score"] for h in hits if source in h.sources}
        low, high = min(raw.values()), max(raw.values())
        mean = sum(raw.values()) / len(raw)
        std = math.sqrt(sum((s - mean) ** 2 for s in raw.values()) / (len(raw) - 1))
        for cid, score in raw.items():
            if method == "minmax":
                fused[cid] += weight * (score - low) / (high - low)
            else:  # dbsf; no score lies beyond 3 sigma with 5 candidates
                fused[cid] += weight * (score - mean + 3 * std) / (6 * std)
    return fused


def test_a_job_fuses_with_linear_minmax(job: Job) -> None:
    ranking, _ = job.search("pod on a node", k=5)
    assert ranking.fusion is not None and ranking.fusion.profile == "default"
    assert ranking.fusion.params == {"normalization": "minmax"} and ranking.fusion.candidates == 5
    hits = ranking.hits
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5] and all(set(h.sources) == {"dense", "bm25"} for h in hits)
    assert hits[0].doc_id == "a" and hits[0].score == pytest.approx(1.0 + 2.0)  # best in both sources
    expected = _by_hand(hits, {"dense": 1.0, "bm25": 2.0}, "minmax")
    assert {h.chunk_id: h.score for h in hits} == pytest.approx(expected, rel=1e-6)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_a_job_uses_the_expanded_profile_with_dbsf(job: Job) -> None:
    ranking, _ = job.search("rotate my jwt", k=5)
    assert ranking.query.profile == "expanded" and ranking.fusion is not None
    assert ranking.fusion.params == {"normalization": "dbsf"} and dict(ranking.fusion.weights) == {
        "dense": 0.3,
        "bm25": 3.0,
    }
    assert ranking.hits[0].doc_id == "c"
    expected = _by_hand(ranking.hits, {"dense": 0.3, "bm25": 3.0}, "dbsf")
    assert {h.chunk_id: h.score for h in ranking.hits} == pytest.approx(expected, rel=1e-6)


def test_weights_naming_other_retrievers_fail_when_the_job_is_built(job: Job, tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(CONFIG.replace("weights = { dense = 1.0, bm25 = 2.0 }", "weights = { dense = 1.0, sparse = 2.0 }"))
    with pytest.raises(ConfigError, match=r"weights .* must name exactly the retrievers"):
        Job(load_job(path, job.registry), tmp_path / "i2", job.settings, job.registry)


@pytest.mark.parametrize("normalization", ["minmax", "zscore", "dbsf"])
def test_linear_keeps_the_fuser_contract(normalization: str) -> None:
    import plm.testing

    plm.testing.check_fuser(LinearFuser(default={"normalization": normalization}))
    plm.testing.check_fuser(LinearFuser(), sources=("bm25", "splade"))
