"""`whitespace_lower` and `bm25s_stem` give exactly the tokens, scores and rankings of the code
they replaced (the tokenizer Literal inside the bm25s retriever), and poc_parity resolves to them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from plm_core.config import load_job
from plm_core.records import Chunk, CorpusVersion, ExpandedQuery
from plm_core.settings import Settings
from plm_index.assembly import Assembler
from plm_index.corpus import CorpusSnapshot
from plm_index.plugins import default_registry

bm25s = pytest.importorskip("bm25s")
Stemmer = pytest.importorskip("Stemmer")
from plm_plugins.retrievers.bm25s import BM25Retriever  # noqa: E402
from plm_plugins.tokenizers.whitespace_lower import WhitespaceLowerTokenizer  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "examples" / "sample_corpus"


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (SAMPLE / name).read_text().splitlines() if line.strip()]


DOCS = [r["text"] for r in _rows("corpus.jsonl")]
QUERIES = [r["text"] for r in _rows("queries.jsonl")]


def _old_stemmed(texts: list[str], return_ids: bool):  # type: ignore[no-untyped-def]
    """The removed code path: bm25s's English tokenizer, as the retriever called it."""
    stemmer = Stemmer.Stemmer("english")
    return bm25s.tokenize(list(texts), stopwords="en", stemmer=stemmer, return_ids=return_ids, show_progress=False)


def _snapshot() -> CorpusSnapshot:
    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i}", text=t) for i, t in enumerate(DOCS)]
    return CorpusSnapshot.of(chunks, version=CorpusVersion("", 0))


def test_poc_parity_bm25_tokens_scores_and_rankings_are_unchanged(tmp_path: Path) -> None:
    rank_bm25 = pytest.importorskip("rank_bm25")
    config = load_job(REPO / "configs" / "poc_parity.toml", default_registry())
    (retrieve,) = [s for s in config.query if s.use == "hybrid"]
    spec = retrieve.nested["retrievers"]["bm25"]
    retriever = Assembler(config, default_registry(), Settings(progress=False), tmp_path).build(spec)
    assert isinstance(retriever.tokenizer, WhitespaceLowerTokenizer)  # built by the assembly
    assert retriever.tokenize(DOCS + QUERIES) == [t.lower().split() for t in DOCS + QUERIES]
    retriever.build(_snapshot(), tmp_path)
    reference = rank_bm25.BM25Okapi([t.lower().split() for t in DOCS])
    for query in QUERIES:
        expected = reference.get_scores(query.lower().split())
        assert np.array_equal(retriever.scores(query), expected), query
        hits = retriever.search(ExpandedQuery(text=query, k=10), 10)
        assert [h.chunk_id for h in hits] == [f"c{i}" for i in np.argsort(expected)[::-1][:10]]


def test_bm25s_stem_tokens_and_scores_are_unchanged(tmp_path: Path) -> None:
    retriever = BM25Retriever(label="bm25", tokenizer="bm25s_stem", method="lucene")
    assert retriever.tokenize(DOCS + QUERIES) == [list(t) for t in _old_stemmed(DOCS + QUERIES, False)]
    retriever.build(_snapshot(), tmp_path)
    old = bm25s.BM25(k1=1.5, b=0.75, method="lucene", dtype="float64")
    old.index(_old_stemmed(DOCS, True), show_progress=False)
    for query in QUERIES:
        ids = [old.vocab_dict[t] for t in _old_stemmed([query], False)[0] if t in old.vocab_dict]
        assert np.array_equal(retriever.scores(query), old.get_scores_from_ids(ids)), query
