"""BM25 over segments scores and ranks exactly as one index built whole, for every method.

A real store takes random adds, edits and deletes; BM25 indexes follow it by `refresh`
(a segment per sync, deletions, merges), and at checkpoints every query's scores must be
the very floats (==, not within a tolerance) of a plain reference that adds each query
word's part to a full score vector, word by word (the computation before segments, and
rank_bm25 itself for rank_bm25_okapi); `search` must return the whole build's hits, and
the hits the full score vector gives (`State.top`), whether it ranked among the matching
rows alone or fell back to the full vector, and whether a word's impacts were cached.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from plm_needs import needs

from plm_core.records import Chunk, Document, ExpandedQuery
from plm_index import ranking, segments
from plm_index.corpus import CorpusSnapshot

pytestmark = needs("bm25s", extra="bm25")
from plm_plugins.retrievers.bm25_impacts import _IDF, Impacts  # noqa: E402
from plm_plugins.retrievers.bm25s import BM25Retriever  # noqa: E402

VOCAB = [f"w{i}" for i in range(300)]
WEIGHTS = [1 / (i + 1) for i in range(len(VOCAB))]  # Zipf: a few words in most chunks
CONFIGS = {  # label -> settings; drop_zero_scores defaults to true except for rank_bm25_okapi
    "lucene": {"method": "lucene"},
    "lucene32": {"method": "lucene", "dtype": "float32", "drop_zero_scores": False},
    "okapi": {"method": "rank_bm25_okapi"},
    "robertson": {"method": "robertson"},
    "atire": {"method": "atire", "k1": 1.2, "b": 0.5},
    "bm25l": {"method": "bm25l"},
    "bm25+": {"method": "bm25+", "dtype": "float32"},
    # heading_weight: the words of a chunk's '#' lines count 1.5 (or 2) times, tf and length
    "lucene_h": {"method": "lucene", "heading_weight": 1.5},
    "okapi_h": {"method": "rank_bm25_okapi", "heading_weight": 2.0},
    "bm25l_h": {"method": "bm25l", "heading_weight": 0.5},
}


def _retriever(label: str) -> BM25Retriever:
    return BM25Retriever(label=label, tokenizer="whitespace_lower", **CONFIGS[label])


def _text(rng: random.Random) -> str:
    body = " ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(0, 25)))
    if rng.random() < 0.4:  # a Markdown heading on top, and sometimes one further down
        body = "# " + " ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(1, 4))) + "\n\n" + body
        if rng.random() < 0.5:
            body += "\n\n## " + " ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(1, 3))) + "\n\nw7 w8"
    return body


def _sync(store: Any, rng: random.Random, live: set[str], counter: list[int]) -> None:
    if live and rng.random() < 0.3:
        gone = rng.sample(sorted(live), min(len(live), rng.randint(1, 4)))
        store.delete_documents(gone)
        live.difference_update(gone)
    ids = [f"d{counter[0] + i}" for i in range(rng.randint(2, 12))]
    counter[0] += len(ids)
    if live and rng.random() < 0.5:
        ids += rng.sample(sorted(live), min(len(live), rng.randint(1, 4)))  # edited: new chunk ids
    docs, chunks = [], []
    for doc_id in ids:
        texts = [_text(rng) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.15:
            texts.append(texts[0])  # a duplicate: equal scores, which only index order breaks
        chunks += [
            Chunk(id=f"{doc_id}#{counter[0]}.{j}", doc_id=doc_id, text=t, metadata={"even": j % 2 == 0})
            for j, t in enumerate(texts)
        ]
        docs.append(Document(id=doc_id, text=" ".join(texts)))
    store.replace_documents(docs, chunks, None, None, ["x"] * len(docs))
    live.update(ids)


# bm25s.scoring's term-frequency parts, as bm25s writes them (whole expressions, per word)
TFC = {
    "robertson": lambda tf, dl, avg, k1, b, delta: tf / (k1 * ((1 - b) + b * dl / avg) + tf),
    "lucene": lambda tf, dl, avg, k1, b, delta: tf / (k1 * ((1 - b) + b * dl / avg) + tf),
    "atire": lambda tf, dl, avg, k1, b, delta: (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * dl / avg)),
    "bm25l": lambda tf, dl, avg, k1, b, delta: (
        ((k1 + 1) * (tf / (1 - b + b * dl / avg) + delta)) / (k1 + tf / (1 - b + b * dl / avg) + delta)
    ),
    "bm25+": lambda tf, dl, avg, k1, b, delta: ((k1 + 1) * tf) / (k1 * (1 - b + b * dl / avg) + tf) + delta,
}


def _reference(label: str, texts: list[str], tokens: list[str]) -> np.ndarray:
    """Scores of the chunks (index order) the way they were computed before segments: each
    query word's part added to a full vector in turn; rank_bm25 for its own Okapi."""
    c = _retriever(label).config
    w = c.heading_weight
    docs = [t.lower().split() for t in texts]
    heads = [[t for line in text.split("\n") if line.startswith("#") for t in line.lower().split()] for text in texts]
    if c.method == "rank_bm25_okapi":
        rank_bm25 = pytest.importorskip("rank_bm25")
        assert w == int(w)  # a whole weight: the heading's words written w times over
        docs = [d + h * (int(w) - 1) for d, h in zip(docs, heads, strict=True)]
        return np.asarray(rank_bm25.BM25Okapi(docs, k1=c.k1, b=c.b, epsilon=c.epsilon).get_scores(tokens))
    # BM25F's weighted counts: (all - heading) + w x heading, term frequencies and lengths
    in_heads = [Counter(h) for h in heads]
    counts = [{t: (n - h[t]) + w * h[t] for t, n in Counter(d).items()} for d, h in zip(docs, in_heads, strict=True)]
    dl = np.array([(len(d) - len(h)) + w * len(h) for d, h in zip(docs, heads, strict=True)], dtype=np.float64)
    total, head = sum(len(d) for d in docs), sum(len(h) for h in heads)
    avgdl = (total if w == 1 else (float(total) - float(head)) + w * float(head)) / len(docs)
    scores, skips = np.zeros(len(docs)), []
    for term in tokens:
        rows = [i for i, counted in enumerate(counts) if term in counted]
        if not rows:
            continue
        idf = _IDF[c.method](len(rows), len(docs))
        tf = np.array([counts[i][term] for i in rows], dtype=np.float64)
        part = idf * TFC[c.method](tf, dl[rows], avgdl, c.k1, c.b, c.delta)
        if c.method in ("bm25l", "bm25+"):
            skips.append(idf * TFC[c.method](0.0, avgdl, avgdl, c.k1, c.b, c.delta))
            part = part - skips[-1]
        scores[rows] += part
    if skips:
        scores += np.array(skips, dtype=np.float64).sum()
    return scores.astype(c.dtype)


def _check(ix: BM25Retriever, whole: BM25Retriever, snap: CorpusSnapshot, store: Any, wants: dict[str, Any]) -> None:
    state = ix.state
    assert state is not None and state.n_live == snap.n_chunks
    ids = snap.chunk_ids
    live = {state.ids[int(r)]: int(r) for r in np.flatnonzero(state.live)}
    even = store.filter_mask({"even": True})
    for text, want in wants.items():
        got = ix.scores(text)
        assert [got[live[i]] for i in ids] == want.tolist(), text  # the very floats
        for n in (1, 3, 10, 60):
            for allowed in (None, even):
                hits = ix.search(ExpandedQuery(text=text, k=n), n, allowed)
                assert hits == whole.search(ExpandedQuery(text=text, k=n), n, allowed), (ix.label, text, n)
                full = state.top(got, n, ix.label, allowed, drop_zero=ix.drops_zero_scores)
                assert hits == full, (ix.label, text, n)


@pytest.mark.parametrize(
    ("full_sort_up_to", "sorted_below"),
    [(ranking.FULL_SORT_UP_TO, 0.0), (0, float("inf"))],
    ids=["small-sorted-whole", "ties-sparse"],
)
@pytest.mark.parametrize("path", ["numpy", "compiled", "blocks"])
def test_segments_deletions_and_merges_score_as_the_whole_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full_sort_up_to: int, sorted_below: float, path: str
) -> None:
    """`ties-sparse`: equal scores among the matching rows are ordered there too (as past
    FULL_SORT_UP_TO rows, a million-chunk index), by the rows' order keys, not by a full
    sort. A query's summed rows are found by scanning every row in one run, by sorting its
    parts' rows in the other (`SORTED_BELOW`, as for a few words at a million). `compiled`:
    the same through the C kernel (`_bm25_kernel.c`), which scans every row or follows
    the rows met by the same switch (`SORTED_BELOW`'s 1/8), reading words in a few rows
    from their kept impacts and the others from their postings (`RAW_FROM`, lowered so
    that both kinds meet in queries: each segment's term frequencies and lengths, deleted
    rows skipped). `blocks`: the kernel's block-max (`BLOCKS_FROM`, lowered to every query),
    blocks of 4 rows skipped where their bound cannot reach the n-th best."""
    from plm_plugins.retrievers import bm25_impacts, bm25s
    from plm_plugins.stores.sqlite import SQLiteStore

    if path == "numpy":
        monkeypatch.setattr(bm25s, "compiled", lambda: None)
    else:
        if bm25_impacts.compiled() is None:  # (.ci/run checks that it is built)
            pytest.skip("BM25's C kernel is not built here (setup.py: no C compiler or Python headers)")
        monkeypatch.setattr(bm25s, "RAW_FROM", 5)
    if path == "blocks":  # every query by the kernel's block-max, blocks of 4 rows
        monkeypatch.setattr(bm25_impacts, "BLOCKS_FROM", 0)
        monkeypatch.setattr(bm25_impacts, "BLOCK_ROWS", 4)
    kinds: Counter = Counter()
    postings_of = bm25s._postings_of

    def counted_postings(*args: Any) -> Any:
        hit = postings_of(*args)
        kinds["postings" if hit is not None and hit[1] >= bm25s.RAW_FROM else "impacts"] += 1
        return hit

    monkeypatch.setattr(bm25s, "_postings_of", counted_postings)
    monkeypatch.setattr(ranking, "FULL_SORT_UP_TO", full_sort_up_to)
    monkeypatch.setattr(bm25_impacts, "SORTED_BELOW", sorted_below)
    monkeypatch.setattr(segments.merge, "MERGE_FACTOR", 3)
    monkeypatch.setattr(segments.merge, "FLOOR_ROWS", 4)
    monkeypatch.setattr(Impacts, "MAX_IMPACTS", 400)  # words' impacts evicted and scored again, often
    calls: Counter = Counter()
    sparse = ranking.top_n_sparse

    def counted(*args: Any, **kwargs: Any) -> Any:
        hits = sparse(*args, **kwargs)
        calls["sparse" if hits is not None else "full"] += 1
        return hits

    monkeypatch.setattr(segments.state, "top_n_sparse", counted)
    store = SQLiteStore(SQLiteStore.Config())
    store.open(tmp_path / "store")
    rng, live, counter = random.Random(5), set(), [0]
    index_dir = tmp_path / "index"
    every = {label: _retriever(label) for label in CONFIGS}
    qrng = random.Random(11)
    queries = [" ".join(qrng.choices(VOCAB, WEIGHTS, k=qrng.randint(1, 6))) for _ in range(16)]
    queries += ["w0 w0 w1", "w299 nowhere", "nowhere", ""]
    deleted = merged = 0
    for step in range(24):
        _sync(store, rng, live, counter)
        with store.snapshot():
            snap = CorpusSnapshot(store, index_dir, None)
            for ix in every.values():
                ix.refresh(snap, index_dir)
        if step % 12 != 11:
            continue
        segments.wait_for_merges()
        with store.snapshot():
            snap = CorpusSnapshot(store, index_dir, None)
            for label, ix in every.items():
                whole = _retriever(label)
                whole.build(CorpusSnapshot(store, index_dir, None), None)
                reader = _retriever(label)
                reader.load(snap, index_dir)  # another process: the newest manifest, merges included
                wants = {q: _reference(label, snap.index_texts, q.lower().split()) for q in queries}
                for got in (ix, reader, whole):
                    _check(got, whole, snap, store, wants)
                assert ix.state is not None and reader.state is not None
                deleted += sum(len(d) for d in ix.state.deleted)
                merged += sum("-m" in s.name for s in reader.state.segments)
    assert deleted and merged and len(every["lucene"].state.segments) > 1
    assert calls["sparse"] > calls["full"] > 0  # both paths ranked, mostly the matching rows alone
    assert path != "compiled" or kinds["postings"] > kinds["impacts"] > 0  # the kernel read both kinds


def test_queries_at_once_on_one_index_rank_as_one_at_a_time(tmp_path: Path) -> None:
    """Threads share the version's impacts and sum buffers: each query still gets its own sums."""
    from concurrent.futures import ThreadPoolExecutor

    rng = random.Random(3)
    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i}", text=_text(rng)) for i in range(400)]
    retriever = _retriever("lucene")
    retriever.build(CorpusSnapshot.of(chunks), tmp_path)
    queries = [" ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(2, 6))) for _ in range(60)] * 4
    alone = [retriever.search(ExpandedQuery(text=q, k=10), 10) for q in queries]
    retriever.load(CorpusSnapshot.of(chunks), tmp_path)  # a new state: nothing kept yet
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda q: retriever.search(ExpandedQuery(text=q, k=10), 10), queries))
    assert together == alone


def test_a_querys_rows_summed_by_sorting_are_those_a_scan_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    """`_sum_by_row` finds the summed rows by sorting a query's parts (few of them) or by
    scanning every row (many): the same rows, the same floats, rows whose parts cancel out
    left out either way, and the shared buffer zeroed again after both."""
    from types import SimpleNamespace

    from plm_plugins.retrievers import bm25_impacts

    rng = np.random.default_rng(3)
    state = SimpleNamespace(total=5_000)
    for size in (0, 1, 40, 900, 3_000):
        at = np.concatenate([np.sort(rng.choice(state.total, size=size, replace=False)) for _ in range(3)])
        part = rng.choice([-1.5, -0.25, 0.25, 0.5, 1.5, 2.0], size=len(at)) * rng.random(len(at)).round(1)
        if size:
            at, part = np.append(at, [at[0], at[0]]), np.append(part, [1.0, -1.0])  # a row whose parts cancel
        got = {}
        for way, below in (("sort", float("inf")), ("scan", 0.0)):
            monkeypatch.setattr(bm25_impacts, "SORTED_BELOW", below)
            got[way] = bm25_impacts._sum_by_row(state, at.astype(np.intp), part)  # type: ignore[arg-type]
            assert all(not buffer[: state.total].any() for buffer in bm25_impacts._BUFFERS)
        sums = np.zeros(state.total)
        np.add.at(sums, at, part)
        want = np.flatnonzero(sums != 0)
        for rows, values in got.values():
            assert np.array_equal(rows, want) and np.array_equal(values, sums[want]), size
            assert values.dtype == np.float64 and (values != 0).all()
