"""`heading_weight` on the bm25s retriever: a chunk's heading words count that many times in
its term frequencies and its length (BM25F's field weight), built into the segments.

1.0 builds exactly what the retriever built before the option (settings, files, floats);
another weight gives the hand-computed scores, equals the text with its heading written that
many times, keeps segments equal to the whole build, and is never read from an index built
with another weight.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from plm_needs import needs

from plm_core.errors import StaleIndexError
from plm_core.records import Chunk, Document, ExpandedQuery
from plm_index.corpus import CorpusSnapshot

pytestmark = needs("bm25s", extra="bm25")
from plm_plugins.retrievers.bm25s import FORMAT, BM25Retriever, Postings, heading_text  # noqa: E402

# Markdown chunks as markdown_semantic writes them: the section's heading line at the top,
# a merged tiny section's heading further down, and a chunk with no heading.
MARKDOWN = [
    "# Pod scheduling\n\nThe scheduler assigns pods to nodes with free memory.",
    "the node reports memory pressure and the pod is evicted",
    "## Memory limits\n\nA pod over its memory limit is killed.\n\n### Node pressure\n\nthe node evicts pods",
    "the scheduler reads node labels",
    "",
]
# BEIR documents with include_title: title, blank line, text.
BEIR = [
    "Memory limits of pods\n\nWe measured how the node reclaims memory.",
    "A scheduler study\n\nPods wait for a node with memory; the scheduler ranks nodes.",
    "Node labels\n\nLabels on each node steer the scheduler.",
]
QUERIES = ["pod memory", "scheduler", "node pressure", "memory memory node", "nowhere"]


def _chunks(texts: list[str]) -> list[Chunk]:
    return [Chunk(id=f"c{i}", doc_id=f"d{i}", text=t) for i, t in enumerate(texts)]


def _built(texts: list[str], folder: Path | None = None, **config: Any) -> BM25Retriever:
    retriever = BM25Retriever(label="bm25", **{"tokenizer": "whitespace_lower", **config})
    retriever.build(CorpusSnapshot.of(_chunks(texts)), folder)
    return retriever


def test_heading_text_reads_markdown_heading_lines_and_first_paragraphs() -> None:
    assert heading_text(MARKDOWN[2], "markdown") == "## Memory limits\n### Node pressure"
    assert heading_text(MARKDOWN[1], "markdown") == ""
    assert heading_text("#hashtag\n####### seven\n#\tTabbed\n  # indented", "markdown") == "#\tTabbed"
    assert heading_text(BEIR[0], "first_paragraph") == "Memory limits of pods"
    assert heading_text("one paragraph only", "first_paragraph") == "one paragraph only"


def test_what_the_chunker_and_the_beir_loader_write_is_what_is_weighed() -> None:
    """The heading fields name what the index text holds: markdown_semantic's section
    headings at the top of each chunk (merged sections' further down); a BEIR title with
    include_title as the chunk's first paragraph."""
    from plm_index.documents import document_from_record
    from plm_plugins.chunkers.markdown_semantic import MarkdownSemanticChunker

    chunker = MarkdownSemanticChunker(MarkdownSemanticChunker.Config(min_words=5, target_words=20, max_words=40))
    page = "# Guide\n\nwhat this guide covers, briefly\n\n## Limits\n\n" + "memory limit words here. " * 3
    page += "\n\n## Tiny\n\nok"  # a tiny section: folded into the chunk before, heading and all
    chunks = chunker.run([Document(id="p", text=page)])
    assert [heading_text(c.index_text, "markdown") for c in chunks] == ["# Guide", "## Limits\n## Tiny"]
    record = {"_id": "7", "title": "A title here", "text": "The abstract.\n\nMore of it."}
    doc = document_from_record(record, id_fields=("_id",), include_title=True)
    (chunk,) = chunker.run([doc])
    assert heading_text(chunk.index_text, "first_paragraph") == "A title here"


@pytest.mark.parametrize("method", ["lucene", "rank_bm25_okapi", "bm25l"])
@pytest.mark.parametrize("field", ["markdown", "first_paragraph"])
def test_weight_one_builds_exactly_the_index_built_without_the_option(tmp_path: Path, method: str, field: str) -> None:
    plain = _built(MARKDOWN + BEIR, tmp_path / "plain", method=method)
    one = _built(MARKDOWN + BEIR, tmp_path / "one", method=method, heading_weight=1.0, heading_field=field)
    # The settings of an index built before the option: the same folder, no rebuild.
    assert one.segment_settings() == {"format": FORMAT, "tokenizer": {"name": "whitespace_lower"}}
    assert one.index_base(tmp_path) == plain.index_base(tmp_path)
    (segment,) = (one.index_base(tmp_path / "one") / "segments").iterdir()
    assert not (segment / Postings.HEADING_FILE).exists()
    data = one.state.segments[0].data
    assert data.tf.dtype == np.int32 and data.hl is None
    for query in QUERIES:
        got = one.scores(query)
        assert got.tolist() == plain.scores(query).tolist()
        hits = one.search(ExpandedQuery(text=query, k=5), 5)
        assert hits == plain.search(ExpandedQuery(text=query, k=5), 5)
    if method == "rank_bm25_okapi":  # and today's floats: rank_bm25's own, headings and all
        rank_bm25 = pytest.importorskip("rank_bm25")
        reference = rank_bm25.BM25Okapi([t.lower().split() for t in MARKDOWN + BEIR])
        for query in QUERIES:
            assert one.scores(query).tolist() == reference.get_scores(query.lower().split()).tolist()


def test_a_heading_match_outranks_a_body_mention_with_hand_computed_scores() -> None:
    """Lucene BM25 (k1 1.5, b 0.75), whitespace tokens ('#' is one), heading weight 2.

    c0 "# scheduler / pods wait here": heading tokens '#', 'scheduler' (2), body 3: length
       3 + 2 x 2 = 7; tf(scheduler) = 2 x 1 = 2.
    c1 "the scheduler places pods": length 4, tf(scheduler) = 1.
    c2 "# nodes / kubelet runs on every node": length 5 + 2 x 2 = 9.
    N = 3, df(scheduler) = 2, average length (7 + 4 + 9) / 3.
    """
    texts = ["# scheduler\n\npods wait here", "the scheduler places pods", "# nodes\n\nkubelet runs on every node"]
    k1, b = 1.5, 0.75
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # Lucene's IDF
    avg = (7 + 4 + 9) / 3
    c0 = idf * (2 / (k1 * ((1 - b) + b * 7 / avg) + 2))
    c1 = idf * (1 / (k1 * ((1 - b) + b * 4 / avg) + 1))
    weighted = _built(texts, heading_weight=2.0)
    assert weighted.scores("scheduler").tolist() == [c0, c1, 0.0]  # the very floats
    assert [h.chunk_id for h in weighted.search(ExpandedQuery(text="scheduler", k=3), 3)] == ["c0", "c1"]
    # Unweighted, the shorter body mention wins: lengths 5, 4, 7, tf 1 each.
    avg1 = (5 + 4 + 7) / 3
    plain = [idf * (1 / (k1 * ((1 - b) + b * n / avg1) + 1)) for n in (5, 4)]
    assert _built(texts).scores("scheduler").tolist() == [*plain, 0.0]
    assert [h.chunk_id for h in _built(texts).search(ExpandedQuery(text="scheduler", k=3), 3)] == ["c1", "c0"]
    # A weight of 1.5: tf 1.5, length 3 + 1.5 x 2 = 6 (c2: 5 + 3 = 8).
    avg15 = (6 + 4 + 8) / 3
    c0 = idf * (1.5 / (k1 * ((1 - b) + b * 6 / avg15) + 1.5))
    c1 = idf * (1 / (k1 * ((1 - b) + b * 4 / avg15) + 1))
    assert _built(texts, heading_weight=1.5).scores("scheduler").tolist() == [c0, c1, 0.0]


def _repeated(text: str, field: str, times: int) -> str:
    """The text with its heading written `times` times over (each heading line; the first
    paragraph)."""
    if field == "first_paragraph":
        head, sep, rest = text.partition("\n\n")
        return "\n".join([head] * times) + sep + rest
    return "\n".join("\n".join([line] * times) if heading_text(line, field) else line for line in text.split("\n"))


@pytest.mark.parametrize("method", ["lucene", "rank_bm25_okapi", "robertson", "atire", "bm25l", "bm25+"])
@pytest.mark.parametrize(("field", "texts"), [("markdown", MARKDOWN), ("first_paragraph", BEIR + MARKDOWN)])
@pytest.mark.parametrize("tokenizer", ["whitespace_lower", "bm25s_stem"])
def test_a_whole_weight_scores_as_the_heading_written_that_many_times(
    method: str, field: str, texts: list[str], tokenizer: str
) -> None:
    for times in (2, 3):
        weighted = _built(texts, method=method, tokenizer=tokenizer, heading_weight=times, heading_field=field)
        written = _built([_repeated(t, field, times) for t in texts], method=method, tokenizer=tokenizer)
        assert weighted.scores("x").shape == (len(texts),)
        for query in QUERIES:
            assert weighted.scores(query).tolist() == written.scores(query).tolist(), (times, query)
        plain = _built(texts, method=method, tokenizer=tokenizer)
        assert any(weighted.scores(q).tolist() != plain.scores(q).tolist() for q in QUERIES)  # the weight counts


@pytest.mark.parametrize("field", ["markdown", "first_paragraph"])
@pytest.mark.parametrize("method", ["lucene", "rank_bm25_okapi"])
def test_a_weighted_bm25s_keeps_the_retriever_and_segmented_index_contracts(
    tmp_path: Path, field: str, method: str
) -> None:
    import plm.testing

    def make() -> BM25Retriever:
        return BM25Retriever(label="bm25", method=method, heading_weight=2.5, heading_field=field)

    plm.testing.check_retriever(make, tmp_path / "built")
    plm.testing.check_segmented_index(make, tmp_path / "segments")


def test_an_index_built_with_another_weight_is_rebuilt_not_read(tmp_path: Path) -> None:
    texts = MARKDOWN + BEIR
    snap = CorpusSnapshot.of(_chunks(texts))
    saved = _built(texts, tmp_path, heading_weight=2.0)
    (segment,) = (saved.index_base(tmp_path) / "segments").iterdir()
    assert (segment / Postings.HEADING_FILE).is_file()

    def make(**config: Any) -> BM25Retriever:
        return BM25Retriever(label="bm25", **{"tokenizer": "whitespace_lower", **config})

    same = make(heading_weight=2.0)
    same.load(snap, tmp_path)
    assert same.scores("scheduler memory").tolist() == saved.scores("scheduler memory").tolist()
    for other in ({}, {"heading_weight": 3.0}, {"heading_weight": 2.0, "heading_field": "first_paragraph"}):
        reader = make(**other)
        assert not reader.is_current(snap.version, tmp_path), other
        with pytest.raises(StaleIndexError):
            reader.load(snap, tmp_path)
        reader.refresh(snap, tmp_path)  # what an ingest or a server does: its own build
        fresh = make(**other)
        fresh.build(snap, None)
        for query in QUERIES:
            assert reader.scores(query).tolist() == fresh.scores(query).tolist(), (other, query)
        assert reader.scores("scheduler").tolist() != saved.scores("scheduler").tolist(), other
    again = make(heading_weight=2.0)
    again.load(snap, tmp_path)  # the weighted build is still there, read as it was
    assert again.scores("scheduler memory").tolist() == saved.scores("scheduler memory").tolist()


def test_a_heading_word_the_row_lacks_counts_for_nothing() -> None:
    """Heading tokens are counted only as far as the row's own tokens hold them (a tokenizer
    that reads a line alone differently adds no word and no length)."""
    postings = Postings.of([["a", "b", "b"], ["b", "c"]], [["b", "b", "b", "z"], ["a", "c"]], 2.0)
    assert postings.hl.tolist() == [2, 1]  # row 0: 'b' twice (its count), row 1: 'c' ('a' is not in it)
    assert postings.lengths().tolist() == [5.0, 3.0]
    by_word = {w: postings.tf[postings.indptr[i] : postings.indptr[i + 1]].tolist() for w, i in postings.vocab.items()}
    assert by_word == {"a": [1.0], "b": [4.0, 1.0], "c": [2.0]}
