"""HybridRetrieval built by a real Job from TOML, over the SQLite store and a toy embedder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from plm_needs import needs
from plm_toys import bag_of_words

from plm_core.config import load_job
from plm_core.errors import PlmUserError
from plm_core.records import Chunk, Document, ExpandedQuery, Ranking
from plm_core.registry import Registry
from plm_core.settings import Settings
from plm_index.job import Job

pytestmark = needs("bm25s", extra="bm25")
from plm_plugins.expanders.dictionary import DictionaryExpander  # noqa: E402
from plm_plugins.expanders.embed_query import QueryEmbedder  # noqa: E402
from plm_plugins.fusers.rrf import RRFFuser  # noqa: E402
from plm_plugins.retrieval.hybrid import HybridRetrieval  # noqa: E402
from plm_plugins.retrievers.bm25s import BM25Retriever  # noqa: E402
from plm_plugins.retrievers.dense import DenseRetriever  # noqa: E402
from plm_plugins.stores.sqlite import SQLiteStore  # noqa: E402

VOCAB = ["pod", "node", "backup", "restore", "token", "cluster"]


BagOfWordsEmbedder = bag_of_words(VOCAB)


CONFIG = """
[job]
name = "hybrid-test"
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
[query.retrieve.fuser]
use = "rrf"
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
    registry = Registry()
    for cls in (
        SQLiteStore,
        BagOfWordsEmbedder,
        DictionaryExpander,
        QueryEmbedder,
        HybridRetrieval,
        DenseRetriever,
        BM25Retriever,
        RRFFuser,
    ):
        registry.add(cls)
    path = tmp_path / "job.toml"
    path.write_text(CONFIG)
    config = load_job(path, registry)
    job = Job(config, tmp_path / "index", Settings(progress=False), registry)
    job.open()
    chunks = [
        Chunk(id=f"{d}_0", doc_id=d, text=t, heading_path=("H", d), metadata={"n": i})
        for i, (d, t) in enumerate(DOCS.items())
    ]
    matrix = job.embedder.embed([c.index_text for c in chunks])
    docs = [Document(id=d, text=t) for d, t in DOCS.items()]
    job.store.replace_documents(docs, chunks, matrix, job.embedder.model_name)
    return job


def test_job_builds_nested_parts_with_labels(job: Job) -> None:
    hybrid = job.query_stages[-1]
    assert isinstance(hybrid, HybridRetrieval)
    assert {k: type(v) for k, v in hybrid.retrievers.items()} == {"dense": DenseRetriever, "bm25": BM25Retriever}
    assert [r.label for r in hybrid.retrievers.values()] == ["dense", "bm25"]
    assert isinstance(hybrid.fuser, RRFFuser)


def test_build_search_and_indexes_ok(job: Job) -> None:
    hybrid = job.query_stages[-1]
    version = job.store.version()
    assert not job.searcher.indexes_current(version)  # nothing built yet
    job.rebuild_indexes()
    assert job.searcher.indexes_current(version)
    assert hybrid.retrievers["bm25"].manifest_path(job.index_dir, version).is_file()
    ranking, timings = job.search("pod on a node", k=3)
    assert isinstance(ranking, Ranking) and set(timings) == {"expand", "embed", "retrieve"}
    assert ranking.fusion is not None and ranking.fusion.profile == "default" and ranking.fusion.candidates == 5
    assert [h.rank for h in ranking.hits] == [1, 2, 3]  # hits count from 1
    top = ranking.hits[0]
    assert (top.chunk_id, top.doc_id, top.text, top.heading_path, dict(top.metadata)) == (
        "a_0",
        "a",
        DOCS["a"],
        ("H", "a"),
        {"n": 0},
    )
    assert top.sources["dense"]["rank"] == 1 and top.sources["bm25"]["rank"] == 1
    assert top.score == pytest.approx(1 / 60 + 1 / 60)
    # every hit's score is the RRF of its per-source ranks
    for hit in ranking.hits:
        assert hit.score == pytest.approx(sum(1 / (60 + s["rank"] - 1) for s in hit.sources.values()))


def test_expanded_query_uses_expanded_profile(job: Job) -> None:
    job.rebuild_indexes()
    ranking, _ = job.search("rotate my jwt", k=2)
    assert ranking.query.fired == ("jwt",) and "token" in ranking.query.text
    assert ranking.fusion is not None and ranking.fusion.profile == "expanded" and ranking.fusion.params["k"] == 10
    assert ranking.hits[0].chunk_id == "c_0"


def test_fresh_job_loads_saved_indexes(job: Job) -> None:
    job.rebuild_indexes()
    expected = [h.chunk_id for h in job.retrieve("backup restore", k=5)]
    # a new Job over the same store: the hybrid stage warms up from the saved index
    fresh = Job(job.config, job.index_dir, job.settings, job.registry).open()
    assert [h.chunk_id for h in fresh.retrieve("backup restore", k=5)] == expected
    assert len(expected) == 5  # k = corpus size works


def test_a_newer_corpus_version_is_picked_up_and_stale_bm25_rebuilt(job: Job, caplog: Any) -> None:
    job.rebuild_indexes()
    assert job.retrieve("token rotation", k=1)[0].doc_id == "c"
    # another writer (here: the same store) replaces document c without rebuilding BM25
    new = Chunk(id="c_0", doc_id="c", text="quota limits for projects", heading_path=("H", "c"))
    vec = job.embedder.embed([new.text])
    job.store.replace_documents([Document(id="c", text=new.text)], [new], vec, job.embedder.model_name)
    with caplog.at_level("INFO"):  # a warning the first time in a process, then info
        hits = {h.doc_id: h for h in job.retrieve("quota limits", k=5)}
    assert hits["c"].sources["bm25"]["rank"] == 1 and hits["c"].text == new.text  # BM25 knows the new text
    assert "applied in memory" in caplog.text  # the saved segments, advanced by the change feed
    assert job.retrieve("token rotation", k=5)[0].doc_id != "c"


def test_missing_parts_are_config_errors(job: Job, tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text(CONFIG.split("[query.retrieve.retrievers.dense]")[0] + '[query.retrieve.fuser]\nuse = "rrf"\n')
    with pytest.raises(PlmUserError, match="retriever"):
        Job(load_job(path, job.registry), tmp_path / "i2", job.settings, job.registry)


def _expanded(text: str, k: int, alternatives: tuple[str, ...] = ()) -> ExpandedQuery:
    return ExpandedQuery(text=text, k=k, original=text, alternatives=alternatives)


def test_alternatives_are_retrieved_and_fused_by_reciprocal_rank(job: Job) -> None:
    job.rebuild_indexes()
    hybrid = job.query_stages[-1]
    assert isinstance(hybrid, HybridRetrieval)
    plain = hybrid.run(_expanded("pod on a node", k=2))
    assert [h.doc_id for h in plain.hits] == ["a", "d"]
    ranking = hybrid.run(_expanded("pod on a node", k=2, alternatives=("backup restore of the cluster",)))
    assert "b" in [h.doc_id for h in ranking.hits]  # only the alternative finds it this high
    # each text's rankings fused as usual, then unweighted RRF (k = 60, 0-based ranks) over the texts
    settings = hybrid.fuser.settings_for(_expanded("pod on a node", k=2), 5)
    per_text = [
        hybrid.fuser.fuse(
            {n: r.search(_expanded(t, 2), settings.candidates) for n, r in hybrid.retrievers.items()}, settings
        )
        for t in ("pod on a node", "backup restore of the cluster")
    ]
    expected: dict[str, float] = {}
    for fused in per_text:
        for rank, s in enumerate(fused):
            expected[s.chunk_id] = expected.get(s.chunk_id, 0.0) + 1 / (60 + rank)
    best = sorted(expected.items(), key=lambda kv: kv[1], reverse=True)[:2]
    assert [(h.chunk_id, h.rank) for h in ranking.hits] == [(cid, i + 1) for i, (cid, _) in enumerate(best)]
    assert [h.score for h in ranking.hits] == pytest.approx([score for _, score in best])
    # per-source ranks are the main query's; the fusion settings too
    assert ranking.fusion == plain.fusion
    assert all(set(h.sources) <= {"dense", "bm25"} for h in ranking.hits)


def test_no_alternatives_is_exactly_the_single_query_fusion(job: Job) -> None:
    job.rebuild_indexes()
    hybrid = job.query_stages[-1]
    query = _expanded("restore a pod after node failure", k=3)
    settings = hybrid.fuser.settings_for(query, 5)
    rankings = {n: r.search(query, settings.candidates) for n, r in hybrid.retrievers.items()}
    fused = hybrid.fuser.fuse(rankings, settings)[:3]
    assert hybrid.run(query) == Ranking(query=query, hits=hybrid.corpus.hits(fused, rankings), fusion=settings)


def test_per_query_weights_reach_the_fuser_through_the_pipeline(job: Job) -> None:
    """`Job.search(weights=...)` survives expansion and embedding: with dense at 0 the order
    is BM25's alone, with BM25 at 0 dense's alone, and the next query has the profile's."""
    job.rebuild_indexes()
    hybrid = job.query_stages[-1]
    text = "rotate my jwt for the cluster"  # a dictionary trigger fires: the expanded profile
    plain, _ = job.search(text, k=5)
    bm25_only, _ = job.search(text, k=5, weights={"dense": 0.0})
    dense_only, _ = job.search(text, k=5, weights={"bm25": 0.0})
    query = bm25_only.query
    assert query.fired and bm25_only.fusion is not None and bm25_only.fusion.profile == "expanded"
    assert bm25_only.fusion.weights == {"dense": 0.0, "bm25": 3.0}
    n = bm25_only.fusion.candidates
    bm25_order = [c.chunk_id for c in hybrid.retrievers["bm25"].search(query, n)][:5]
    dense_order = [c.chunk_id for c in hybrid.retrievers["dense"].search(query, n)][:5]
    assert [h.chunk_id for h in bm25_only.hits][: len(bm25_order)] == bm25_order
    assert [h.chunk_id for h in dense_only.hits] == dense_order
    assert bm25_order != dense_order  # the weights really changed something
    assert [h.chunk_id for h in job.search(text, k=5)[0].hits] == [h.chunk_id for h in plain.hits]
    with pytest.raises(PlmUserError, match="keyword"):
        job.search(text, k=5, weights={"keyword": 1.0})


def test_a_write_refreshes_the_dense_index_from_its_own_rows(job: Job, monkeypatch: Any) -> None:
    """A written document's vector reaches the dense segments without reading every stored
    vector (the store-wide check cost 3 s a write at a million chunks)."""
    job.rebuild_indexes()
    job.retrieve("pod", k=1)  # warm: the saved segments are open

    def store_wide() -> Any:
        raise AssertionError("a write read every stored vector")

    monkeypatch.setattr(job.store, "consistency_problems", store_wide)
    new = Chunk(id="f_0", doc_id="f", text="backup backup backup", heading_path=("H", "f"))
    vec = job.embedder.embed([new.text])
    job.store.replace_documents([Document(id="f", text=new.text)], [new], vec, job.embedder.model_name)
    hits = {h.doc_id: h for h in job.retrieve("backup backup backup", k=5)}
    assert hits["f"].sources["dense"]["rank"] == 1


def test_a_written_vector_of_another_model_is_refused_by_the_refresh(job: Job) -> None:
    """Checking only the rows a refresh reads still refuses a row of another model."""
    job.rebuild_indexes()
    job.retrieve("pod", k=1)
    for doc, model in (("f", "another-model"), ("g", job.embedder.model_name)):  # the store's model stays ours
        new = Chunk(id=f"{doc}_0", doc_id=doc, text="backup pod", heading_path=("H", doc))
        vec = job.embedder.embed([new.text])
        job.store.replace_documents([Document(id=doc, text=new.text)], [new], vec, model)
    with pytest.raises(PlmUserError, match="half re-embedded"):
        job.retrieve("backup", k=5)


class _Recording:
    """A retriever stand-in for `search_all`: records the thread it ran in, sleeps, answers."""

    def __init__(self, label: str, seconds: float, fail: bool = False) -> None:
        self.label, self.seconds, self.fail, self.thread, self.done = label, seconds, fail, "", False

    def search(self, query: Any, n: int, allowed: Any = None) -> list[Any]:
        import threading
        import time

        from plm_core.records import ScoredChunk

        self.thread = threading.current_thread().name
        time.sleep(self.seconds)
        self.done = True
        if self.fail:
            raise RuntimeError(f"{self.label} broke")
        return [
            ScoredChunk(chunk_id=f"{self.label}{i}", score=1.0 / (i + 1), source=self.label, rank=i) for i in range(n)
        ]


def test_retrievers_run_side_by_side_and_answer_as_one_after_another(monkeypatch: Any) -> None:
    import os
    import time

    from plm_plugins.retrieval import hybrid

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    parts = {"dense": _Recording("d", 0.3), "bm25": _Recording("b", 0.3)}
    query = ExpandedQuery(text="q", k=3)
    start = time.perf_counter()
    together = hybrid.search_all(parts, query, 3, None)  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    assert list(together) == ["dense", "bm25"]
    assert together == {label: r.search(query, 3) for label, r in parts.items()}
    assert seconds < 0.5, f"{seconds:.2f}s: the two 0.3 s searches ran one after the other"
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    parts["bm25"].thread = ""
    hybrid.search_all(parts, query, 3, None)  # type: ignore[arg-type]
    assert parts["bm25"].thread == parts["dense"].thread  # one core: no pool


def test_a_retriever_error_is_raised_after_the_others_finish(monkeypatch: Any) -> None:
    import os

    from plm_plugins.retrieval import hybrid

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    slow = _Recording("b", 0.2)
    parts = {"dense": _Recording("d", 0.0, fail=True), "bm25": slow}
    with pytest.raises(RuntimeError, match="d broke"):
        hybrid.search_all(parts, ExpandedQuery(text="q", k=3), 3, None)  # type: ignore[arg-type]
    assert slow.thread.startswith("plm-retrieve") and slow.done  # waited for, not left running
    parts = {"dense": _Recording("d", 0.0), "bm25": _Recording("b", 0.0, fail=True)}
    with pytest.raises(RuntimeError, match="b broke"):
        hybrid.search_all(parts, ExpandedQuery(text="q", k=3), 3, None)  # type: ignore[arg-type]
