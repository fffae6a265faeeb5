"""Doc-level collapse in a real Job (BM25 alone over the SQLite store): without it one
document's chunks crowd the top; with it each document appears at most `per_doc` times,
k documents come back when k match, ranked 1..k in the uncollapsed order."""

from __future__ import annotations

from pathlib import Path

import pytest
from plm_needs import needs

from plm_core.config import load_job
from plm_core.errors import ConfigError
from plm_core.records import Chunk, Document, ExpandedQuery, Hit, Ranking
from plm_core.registry import Registry
from plm_core.settings import Settings
from plm_index.job import Job
from plm_plugins.rankers.collapse import DocCollapse

pytestmark = needs("bm25s", extra="bm25")
from plm_plugins.retrievers.bm25s import BM25Retriever  # noqa: E402
from plm_plugins.stores.sqlite import SQLiteStore  # noqa: E402

BASE = """
[job]
name = "collapse-test"
[store]
use = "sqlite"
[query.retrieve]
use = "bm25s"
method = "lucene"
"""
COLLAPSE = '[query.collapse]\nuse = "collapse"\n'

# Document "runbook" owns the four best chunks for "backup restore"; four documents match.
CHUNKS = {
    "runbook": [
        "backup restore backup restore steps",
        "backup restore of the vault",
        "restore the backup after failure",
        "backup and restore checklist",
    ],
    "faq": ["how do I restore a table", "backup retention is thirty days"],
    "policy": ["nightly backup of all clusters", "unrelated words only"],
    "intro": ["restore points are hourly"],
    "glossary": ["pod node cluster token", "scheduling words here"],
}
MATCHING_DOCS = 4


def _job(tmp_path: Path, extra: str = "", name: str = "job") -> Job:
    registry = Registry()
    for cls in (SQLiteStore, BM25Retriever, DocCollapse):
        registry.add(cls)
    path = tmp_path / f"{name}.toml"
    path.write_text(BASE + extra)
    job = Job(load_job(path, registry), tmp_path / f"{name}-index", Settings(progress=False), registry)
    job.open()
    docs = [Document(id=d, text="\n\n".join(texts)) for d, texts in CHUNKS.items()]
    chunks = [Chunk(id=f"{d}_{i}", doc_id=d, text=t) for d, texts in CHUNKS.items() for i, t in enumerate(texts)]
    job.store.replace_documents(docs, chunks)
    job.rebuild_indexes()
    return job


def _docs(hits: list[Hit]) -> list[str]:
    return [h.doc_id for h in hits]


def test_without_collapse_one_document_fills_the_top(tmp_path: Path) -> None:
    hits = _job(tmp_path).retrieve("backup restore", k=4)
    assert _docs(hits) == ["runbook"] * 4


def test_one_chunk_per_document_in_the_uncollapsed_order(tmp_path: Path) -> None:
    everything = _job(tmp_path, name="plain").retrieve("backup restore", k=20)
    first_per_doc: dict[str, Hit] = {}
    for hit in everything:
        first_per_doc.setdefault(hit.doc_id, hit)
    assert len(first_per_doc) == MATCHING_DOCS  # "glossary" shares no word with the query

    job = _job(tmp_path, COLLAPSE, name="collapsed")
    assert job.searcher.depth(3) == 15  # k x depth_factor 5
    for k in (1, 2, 3, 4):
        hits = job.retrieve("backup restore", k=k)
        assert len(hits) == k and [h.rank for h in hits] == list(range(1, k + 1))
        assert len(set(_docs(hits))) == k
        # each document's best chunk, in the order (and with the scores) retrieval gave them
        expected = list(first_per_doc.values())[:k]
        assert [(h.chunk_id, h.score, h.sources) for h in hits] == [(h.chunk_id, h.score, h.sources) for h in expected]
    # more wanted than documents match: every matching document once, no filler
    hits = job.retrieve("backup restore", k=10)
    assert _docs(hits) == list(first_per_doc) and [h.rank for h in hits] == [1, 2, 3, 4]


def test_per_doc_two_keeps_each_documents_two_best(tmp_path: Path) -> None:
    everything = _job(tmp_path, name="plain").retrieve("backup restore", k=20)
    hits = _job(tmp_path, COLLAPSE + "per_doc = 2\n", name="two").retrieve("backup restore", k=20)
    kept: dict[str, int] = {}
    expected = []
    for hit in everything:  # the first two of each document, in rank order
        if kept.get(hit.doc_id, 0) < 2:
            kept[hit.doc_id] = kept.get(hit.doc_id, 0) + 1
            expected.append(hit.chunk_id)
    assert [h.chunk_id for h in hits] == expected and _docs(hits).count("runbook") == 2
    assert [h.rank for h in hits] == list(range(1, len(expected) + 1))


def test_depth_is_capped_and_bad_settings_are_errors(tmp_path: Path) -> None:
    assert DocCollapse().depth(10) == 50
    assert DocCollapse(depth_factor=1).depth(7) == 7
    assert DocCollapse().depth(5000) == 10_000  # capped, never below k
    assert DocCollapse(depth_factor=2).depth(10_000) == 10_000
    with pytest.raises(ConfigError, match="per_doc"):
        _job(tmp_path, COLLAPSE + "per_doc = 0\n", name="bad")


def test_run_on_a_ranking_renumbers_and_keeps_fusion() -> None:
    query = ExpandedQuery(text="q", k=3)
    hits = tuple(
        Hit(chunk_id=c, doc_id=c[0], score=1.0 - i / 10, rank=i + 1)
        for i, c in enumerate(["a1", "a2", "b1", "a3", "c1"])
    )
    out = DocCollapse().run(Ranking(query=query, hits=hits))
    assert [(h.chunk_id, h.rank, h.score) for h in out.hits] == [("a1", 1, 1.0), ("b1", 2, 0.8), ("c1", 3, 0.6)]
    assert out.query is query and out.fusion is None
    assert DocCollapse().run(Ranking(query=query, hits=())).hits == ()
